package pause

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// Paused implements pipeline.Pauses: why cluster's events wait, "" when it is not paused.
func (s *Store) Paused(ctx context.Context, cluster string) (string, error) {
	p, err := s.Get(ctx, cluster)
	if err != nil || p == nil {
		return "", err
	}
	return p.String(), nil
}

// Guard refuses events the guardrails do not allow (handlers.Handlers implements it: the
// source allow-list, guardrails.allowed_sources).
type Guard interface {
	Refuses(ev *events.Event) error
}

// Handler handles the cluster-pause and cluster-resume events (pipeline.Handler). Both
// take no lock: a pause writes nothing to the cluster, and must not wait for an operation
// that runs (it is left to finish).
type Handler struct {
	Store  *Store
	Guard  Guard // nil: every source may pause and resume
	Logger *zap.Logger
}

// Handle pauses or resumes the event's cluster.
func (h *Handler) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	ev := job.Event()
	res := &events.Result{Status: events.StatusSucceeded}
	if h.Guard != nil {
		if err := h.Guard.Refuses(ev); err != nil {
			res.Status, res.Error = events.StatusRejected, err.Error()
			return res, nil
		}
	}
	log := h.Logger
	if log == nil {
		log = zap.NewNop()
	}
	now := time.Now()
	switch req := ev.Payload.(type) {
	case *events.ClusterPause:
		res.Reason = req.Reason
		until := req.UntilTime()
		switch {
		case !until.IsZero() && !until.After(now):
			res.Status, res.Error = events.StatusRejected, fmt.Sprintf("data.until: %s is not in the future (now %s): nothing paused", req.Until, now.UTC().Format(time.RFC3339))
			return res, nil
		case !until.IsZero() && until.Sub(now) > events.MaxPause:
			res.Status, res.Error = events.StatusRejected, fmt.Sprintf("data.until: %s is more than %s ahead: nothing paused (pause without until, and resume with cluster-resume)", req.Until, events.MaxPause)
			return res, nil
		}
		p := Pause{Cluster: ev.Cluster, Reason: req.Reason, By: ev.Source, Event: ev.ID, Since: now, Until: until}
		prev, err := h.Store.Put(ctx, p)
		if err != nil {
			return nil, err // transient: tried again
		}
		res.Note = p.String()
		if prev != nil {
			res.Note += "; it replaces the pause by " + prev.By + " since " + prev.Since.UTC().Format(time.RFC3339) + " (event " + prev.Event + ")"
		}
		log.Warn("cluster paused", zap.String("cluster", ev.Cluster), zap.String("by", ev.Source), zap.String("id", ev.ID), zap.String("note", res.Note))
	case *events.ClusterResume:
		res.Reason = req.Reason
		prev, err := h.Store.Resume(ctx, ev.Cluster)
		if err != nil {
			return nil, err
		}
		if prev == nil {
			res.Status, res.Note = events.StatusNoop, "cluster "+ev.Cluster+" was not paused"
			return res, nil
		}
		res.Note = fmt.Sprintf("cluster %s resumed by %s; it was %s", ev.Cluster, ev.Source, prev.String()[len("cluster "+ev.Cluster+" "):])
		log.Info("cluster resumed", zap.String("cluster", ev.Cluster), zap.String("by", ev.Source), zap.String("id", ev.ID))
	default:
		return nil, fmt.Errorf("pause handler: event type %s is not cluster-pause or cluster-resume", ev.Type)
	}
	return res, nil
}
