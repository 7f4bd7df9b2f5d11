package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
)

// maxActionBytes bounds an action's form.
const maxActionBytes = 16 << 10

// act publishes the event of an action (POST /ui/actions/{action}): approve, deny,
// cancel, pause or resume. Only an operator may; from a browser, only with its form's
// CSRF token. The event is the one the emitter's command of the same name publishes,
// with the source console/<user>; the worker decides, as for any event. Refused
// requests publish nothing.
func (s *Server) act(w http.ResponseWriter, r *http.Request, id identity) {
	r.Body = http.MaxBytesReader(w, r.Body, maxActionBytes)
	action := r.PathValue("action")
	if id.Role != Operator {
		s.logger.Warn("console action refused: not an operator", zap.String("action", clip(action)), zap.String("user", id.User))
		s.message(w, r, http.StatusForbidden, "Refused", "Your role is "+id.Role.String()+": it may look, not act.")
		return
	}
	if err := checkCSRF(r, id); err != nil {
		s.logger.Warn("console action refused", zap.String("action", clip(action)), zap.String("user", id.User), zap.Error(err))
		s.message(w, r, http.StatusForbidden, "Refused", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	cluster := r.PostFormValue("cluster")
	if !events.ValidClusterName(cluster) {
		s.message(w, r, http.StatusBadRequest, "Not published", fmt.Sprintf("cluster %q: not a cluster name", clip(cluster)))
		return
	}
	typ, data, err := s.actionEvent(ctx, action, cluster, r)
	if err != nil {
		s.message(w, r, http.StatusBadRequest, "Not published", err.Error())
		return
	}
	evID := events.NewID()
	_, subject, body, err := events.New(cluster, typ, evID, id.Source(), data, s.cfg.Now(), 0)
	if err != nil {
		s.message(w, r, http.StatusBadRequest, "Not published", err.Error())
		return
	}
	msg := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	msg.Header.Set("Content-Type", events.ContentTypeCloudEventsJSON)
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(evID), jetstream.WithExpectStream(events.EventsStream)); err != nil {
		s.logger.Warn("console action: publish failed", zap.String("action", action), zap.String("cluster", cluster), zap.Error(err))
		s.message(w, r, http.StatusBadGateway, "Not published", fmt.Sprintf("publish %s on %s: %v", typ, subject, err))
		return
	}
	s.logger.Info("console action", zap.String("action", action), zap.String("event", evID), zap.String("cluster", cluster),
		zap.String("user", id.User), zap.Stringer("role", id.Role), zap.String("source", id.Source()))
	http.Redirect(w, r, Prefix+"events/"+evID+"?"+url.Values{"cluster": {cluster}}.Encode(), http.StatusSeeOther)
}

// actionEvent is the type and data of an action's event, from its form.
func (s *Server) actionEvent(ctx context.Context, action, cluster string, r *http.Request) (string, any, error) {
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	switch action {
	case "approve", "deny":
		planID := r.PostFormValue("plan")
		if err := events.CheckID(planID); err != nil {
			return "", nil, fmt.Errorf("plan %q: %w", clip(planID), err)
		}
		p, _, err := approval.ReadStore(s.js).Get(ctx, cluster, planID)
		if errors.Is(err, approval.ErrNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
			return "", nil, fmt.Errorf("no plan %s of cluster %s", planID, cluster)
		}
		if err != nil {
			return "", nil, fmt.Errorf("read plan %s: %w", planID, err)
		}
		if p.State != approval.Awaiting {
			return "", nil, fmt.Errorf("plan %s is %s already: %s", planID, p.State, p.Decided())
		}
		if action == "deny" {
			if reason == "" {
				return "", nil, errors.New("say why the plan is denied: it becomes its event's error")
			}
			return events.TypePlanDenied, events.PlanDecision{PlanID: planID, Reason: reason}, nil
		}
		return events.TypePlanApproved, events.PlanDecision{PlanID: planID, Reason: reason}, nil
	case "cancel":
		target := r.PostFormValue("event")
		if err := events.CheckID(target); err != nil {
			return "", nil, fmt.Errorf("event %q: %w", clip(target), err)
		}
		return events.TypeOperationCancel, events.OperationCancel{ID: target, Reason: reason}, nil
	case "pause":
		if reason == "" {
			return "", nil, errors.New("say why the cluster is paused: whoever finds it paused reads it")
		}
		data := events.ClusterPause{Reason: reason}
		if u := strings.TrimSpace(r.PostFormValue("until")); u != "" {
			d, err := time.ParseDuration(u)
			if err != nil || d <= 0 {
				return "", nil, fmt.Errorf("until %q: want a duration from now (2h)", clip(u))
			}
			data.Until = s.cfg.Now().Add(d).UTC().Truncate(time.Second).Format(time.RFC3339)
		}
		return events.TypeClusterPause, data, nil
	case "resume":
		return events.TypeClusterResume, events.ClusterResume{Reason: reason}, nil
	}
	return "", nil, fmt.Errorf("no action %q (approve, deny, cancel, pause, resume)", clip(action))
}
