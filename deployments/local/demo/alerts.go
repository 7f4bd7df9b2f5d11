package main

// Alertmanager, the broker-overloaded cool-down, and results.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// alert is an alert as Prometheus posts it to Alertmanager's API.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt,omitzero"`
}

// newAlert is KafkaBrokerOverloaded for broker of the demo's cluster, starting now.
func newAlert(broker int32) alert {
	return alert{
		Labels: map[string]string{"alertname": "KafkaBrokerOverloaded", "cluster": clusterName,
			"broker_id": strconv.Itoa(int(broker))},
		Annotations: map[string]string{"summary": fmt.Sprintf("demo: broker %d cpu 97%%", broker)},
		// Alertmanager's API shows times to the millisecond: the same startsAt everywhere.
		StartsAt: time.Now().UTC().Truncate(time.Millisecond),
	}
}

// resolved is the alert ending now.
func (a alert) resolved() alert {
	a.EndsAt = time.Now().UTC().Truncate(time.Millisecond)
	return a
}

// postAlert posts one alert to the local Alertmanager's own API, as Prometheus would.
func postAlert(ctx context.Context, a alert) error {
	body, err := json.Marshal([]alert{a})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, stack.AlertmanagerURL+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("alertmanager: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("alertmanager: %s %s", resp.Status, out)
	}
	return nil
}

// eventID is the id of the event the worker's bridge makes of alert a
// (alertmanager.ID): from Alertmanager's fingerprint of the alert and its startsAt, both
// as Alertmanager's API shows them (a firing alert posted again keeps its first startsAt).
func eventID(ctx context.Context, a alert) (string, error) {
	q := url.Values{"active": {"true"}}
	for _, k := range []string{"alertname", "cluster", "broker_id"} {
		q.Add("filter", fmt.Sprintf("%s=%q", k, a.Labels[k]))
	}
	for {
		body, status, err := get(ctx, stack.AlertmanagerURL+"/api/v2/alerts?"+q.Encode())
		if err == nil && status == http.StatusOK {
			var got []struct {
				Fingerprint string    `json:"fingerprint"`
				StartsAt    time.Time `json:"startsAt"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				return "", fmt.Errorf("alertmanager: %w", err)
			}
			if len(got) == 1 {
				return alertmanager.ID(alertmanager.Alert{Fingerprint: got[0].Fingerprint, StartsAt: got[0].StartsAt}), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the alert is not listed by Alertmanager: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// chooseOverloaded picks the broker to pile leadership on and overload: broker 3, unless
// an earlier shed put it in the cool-down (an alert for it would be a noop naming that
// shed), then the first other broker not in it. When every broker is, it stays 3: the
// demo shows the noop. The cool-down records are the workers' (events.OverloadedBucket),
// read, never changed.
func (d *demo) chooseOverloaded(ctx context.Context) error {
	d.cooling = map[int32]time.Time{}
	kv, err := d.js.KeyValue(ctx, events.OverloadedBucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
	case err != nil:
		return err
	default:
		for _, b := range d.brokers {
			e, err := kv.Get(ctx, fmt.Sprintf("%s.%d", clusterName, b))
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if until := e.Created().Add(d.cfg.BrokerOverloaded.CoolDown); time.Now().Before(until) {
				d.cooling[b] = until
			}
		}
	}
	d.overloaded = 3
	for _, b := range append([]int32{3}, d.brokers...) {
		if _, ok := d.cooling[b]; !ok {
			d.overloaded = b
			break
		}
	}
	return nil
}

// result waits up to within for the result of event id in the results stream.
func (d *demo) result(ctx context.Context, id string, within time.Duration) (*events.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		s, err := d.js.Stream(ctx, events.ResultsStream)
		if err == nil {
			var r *events.Result
			if r, _, err = pipeline.ReadResult(ctx, s, id); err == nil && r != nil {
				return r, nil
			} else if err == nil {
				err = errors.New("not stored yet")
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no result of %s within %s (%v)", id, within, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// leadersMoved says how many partitions of a result changed leader.
func leadersMoved(r *events.Result) string {
	n := 0
	for _, c := range r.Changes {
		if c.LeaderAfter != c.LeaderBefore {
			n++
		}
	}
	if n == 1 {
		return "1 leader moved"
	}
	return fmt.Sprintf("%d leaders moved", n)
}

// took is how long a result's event took.
func took(r *events.Result) time.Duration {
	return r.FinishedAt.Sub(r.StartedAt).Round(10 * time.Millisecond)
}
