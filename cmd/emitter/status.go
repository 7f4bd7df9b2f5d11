package main

// The status command: what the fleet is doing on each cluster, read from NATS.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/pause"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// statusOptions are the flags of emitter status.
type statusOptions struct {
	cluster  string // "": every cluster a fleet serves
	consumer string
	output   string
	natsURL  string
	natsAuth natsAuth
	timeout  time.Duration
}

// define defines the flags of status.
func (o *statusOptions) define(fs *pflag.FlagSet) func(env) error {
	fs.StringVar(&o.cluster, "cluster", "", "only this `cluster` (default: every cluster the fleet has a consumer for)")
	fs.StringVar(&o.consumer, "consumer", pipeline.DefaultConsumer, "the fleet's `name` (its nats.consumer): its consumers are NAME_<cluster>")
	registerOutputFlags(fs, &o.output, "`format`: table or json")
	registerNATSFlags(fs, &o.natsURL, &o.natsAuth)
	fs.DurationVar(&o.timeout, "timeout", publishTimeout, "give up connecting and reading after `duration`")
	return o.check
}

// check validates the flags of status, and resolves the NATS connection.
func (o *statusOptions) check(e env) error {
	var errs []error
	if o.cluster != "" {
		errs = append(errs, checkClusterFlag(o.cluster)...)
	}
	if !events.ValidToken(o.consumer) {
		errs = append(errs, fmt.Errorf("--consumer %q: not a consumer name (letters, digits, '-' and '_')", o.consumer))
	}
	return checkReadFlags(e, errs, o.output, o.timeout, &o.natsURL, &o.natsAuth)
}

func printStatusUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter status [--cluster CLUSTER] [flags]

Says, for each cluster (read from NATS, as the workers keep it):
  - paused or not: who paused it, since and until when, why (bucket %s);
  - the lock: where the fleet keeps it, and its holder when it is in NATS;
  - the operation in flight: its event, type, step, worker and attempt, how many
    partitions it changes and how many copies it submitted (bucket %s);
  - the events waiting in the cluster's queue, and the one out (consumer
    NAME_<cluster> of stream %s);
  - the plans awaiting approval (bucket %s; 'emitter plans' lists them).

Exit status:
    0  read
    1  reading failed
    2  usage error

Flags:
`, events.PausesBucket, events.JournalBucket, events.EventsStream, events.PlansBucket)
	printFlags(w, fs)
}

// clusterStatus is one cluster's status, as -o json prints it.
type clusterStatus struct {
	Cluster  string       `json:"cluster"`
	Paused   *pause.Pause `json:"paused,omitempty"`
	Lock     lockStatus   `json:"lock"`
	InFlight *inFlight    `json:"in_flight,omitempty"`
	// Waiting counts the events in the cluster's queue not yet delivered; Out those
	// delivered and not yet answered (at most one: a running or held event).
	Waiting uint64 `json:"waiting"`
	Out     int    `json:"out"`
	// ControlWaiting counts the control events (pause, resume, cancel) not yet taken.
	ControlWaiting uint64 `json:"control_waiting"`
	// PlansAwaiting are the ids of the cluster's plans awaiting approval, oldest first.
	PlansAwaiting []string `json:"plans_awaiting"`
}

type lockStatus struct {
	// Location is where the fleet keeps the cluster's lock ("" before its first lock).
	Location string      `json:"location,omitempty"`
	Holder   *lockHolder `json:"holder,omitempty"` // NATS locks only
}

// lockHolder is the part of a NATS lock's record (locks.Holder) that status shows; the
// emitter does not link package locks, which links the ZooKeeper client.
type lockHolder struct {
	Worker     string    `json:"worker"`
	Event      string    `json:"event"`
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	ClaimedAt  time.Time `json:"claimed_at,omitzero"`
}

type inFlight struct {
	Event         string       `json:"event"`
	Type          string       `json:"type"`
	Step          journal.Step `json:"step"`
	Worker        string       `json:"worker"`
	Attempt       int          `json:"attempt"`
	Started       time.Time    `json:"started_at"`
	Updated       time.Time    `json:"updated_at"`
	Partitions    int          `json:"partitions"`
	Reassignments int          `json:"reassignments"`
}

func (o *statusOptions) run(ctx context.Context, e env, name string) int {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	js, closeNC, ok := connectJetStream(e, name, o.natsURL, o.natsAuth, o.timeout)
	if !ok {
		return exitFailure
	}
	defer closeNC()
	st, err := readStatus(ctx, js, *o)
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	if o.output == outputJSON {
		out, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
			return exitFailure
		}
		fmt.Fprintf(e.stdout, "%s\n", out)
		return exitOK
	}
	writeStatus(e.stdout, st, e.now())
	return exitOK
}

// readStatus reads the status of the clusters o asks for.
func readStatus(ctx context.Context, js jetstream.JetStream, o statusOptions) ([]clusterStatus, error) {
	stream, err := js.Stream(ctx, events.EventsStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s (no worker has started yet?): %w", events.EventsStream, err)
	}
	clusters := []string{o.cluster}
	if o.cluster == "" {
		clusters = nil
		names := stream.ConsumerNames(ctx)
		for n := range names.Name() {
			if c, ok := strings.CutPrefix(n, o.consumer+"_"); ok && !strings.Contains(c, "~") {
				clusters = append(clusters, c)
			}
		}
		if err := names.Err(); err != nil {
			return nil, fmt.Errorf("list the consumers of %s: %w", events.EventsStream, err)
		}
		slices.Sort(clusters)
	}
	awaiting, err := plansAwaiting(ctx, js, clusters)
	if err != nil {
		return nil, err
	}
	pauses, jr := pause.New(js, kvbucket.Existing()), journal.NewReader(js)
	out := make([]clusterStatus, 0, len(clusters))
	for _, c := range clusters {
		s := clusterStatus{Cluster: c, PlansAwaiting: awaiting[c]}
		if s.PlansAwaiting == nil {
			s.PlansAwaiting = []string{}
		}
		if s.Paused, err = pauses.Get(ctx, c); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, err
		}
		if rec, err := jr.Get(ctx, c); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("cluster %s: journal: %w", c, err)
		} else if rec != nil && rec.Open() {
			s.InFlight = &inFlight{Event: rec.Event, Type: rec.Type, Step: rec.Step, Worker: rec.Worker, Attempt: rec.Attempt,
				Started: rec.Started, Updated: rec.Updated, Partitions: len(rec.Changes), Reassignments: len(rec.Reassignments)}
		}
		if s.Lock, err = readLock(ctx, js, c); err != nil {
			return nil, fmt.Errorf("cluster %s: lock: %w", c, err)
		}
		if ci, err := consumerInfo(ctx, stream, pipeline.ClusterConsumer(o.consumer, c)); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c, err)
		} else if ci != nil {
			s.Waiting, s.Out = ci.NumPending, ci.NumAckPending
		}
		if ci, err := consumerInfo(ctx, stream, pipeline.ControlConsumer(o.consumer, c)); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c, err)
		} else if ci != nil {
			s.ControlWaiting = ci.NumPending + uint64(ci.NumAckPending)
		}
		out = append(out, s)
	}
	return out, nil
}

// plansAwaiting reads the ids of the plans awaiting approval of clusters, by cluster; none
// when the plans' bucket does not exist (no plan ever waited).
func plansAwaiting(ctx context.Context, js jetstream.JetStream, clusters []string) (map[string][]string, error) {
	if len(clusters) == 0 {
		return nil, nil
	}
	plans, err := approval.ReadStore(js).List(ctx, clusters...)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plans awaiting approval (bucket %s): %w", events.PlansBucket, err)
	}
	out := map[string][]string{}
	for _, p := range plans {
		if p.State == approval.Awaiting {
			out[p.Cluster] = append(out[p.Cluster], p.ID)
		}
	}
	return out, nil
}

// consumerInfo reads a consumer's state; nil when there is no such consumer.
func consumerInfo(ctx context.Context, stream jetstream.Stream, name string) (*jetstream.ConsumerInfo, error) {
	c, err := stream.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	return ci, nil
}

// readLock reads where the fleet keeps the cluster's lock and, in NATS, its holder.
func readLock(ctx context.Context, js jetstream.JetStream, cluster string) (lockStatus, error) {
	var ls lockStatus
	loc, err := kvValue(ctx, js, events.LockBackendsBucket, cluster)
	if err != nil || loc == nil {
		return ls, err
	}
	ls.Location = string(loc)
	bucket, ok := strings.CutPrefix(ls.Location, "nats kv ") // the worker's lockLocation
	if !ok {
		return ls, nil
	}
	raw, err := kvValue(ctx, js, strings.TrimSpace(bucket), cluster)
	if err != nil || raw == nil {
		return ls, err
	}
	var h lockHolder
	if err := json.Unmarshal(raw, &h); err != nil {
		return ls, fmt.Errorf("the holder's record: %w", err)
	}
	ls.Holder = &h
	return ls, nil
}

// kvValue reads a key of a bucket; nil when the bucket or the key does not exist.
func kvValue(ctx context.Context, js jetstream.JetStream, bucket, key string) ([]byte, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s, key %s: %w", bucket, key, err)
	}
	return e.Value(), nil
}

// maxStatusPlans is how many ids of plans awaiting approval status names per cluster.
const maxStatusPlans = 5

// writeStatus prints the clusters' status, a block each.
func writeStatus(w io.Writer, st []clusterStatus, now time.Time) {
	if len(st) == 0 {
		fmt.Fprintln(w, "no cluster: no fleet has created its consumers yet")
		return
	}
	for i, s := range st {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "cluster %s\n", s.Cluster)
		paused := "no"
		if s.Paused != nil {
			paused = "yes: " + s.Paused.String()
		}
		fmt.Fprintf(w, "  paused:     %s\n", paused)
		lock := "not taken yet"
		switch {
		case s.Lock.Holder != nil:
			lock = fmt.Sprintf("held by %s for event %s (%s)", s.Lock.Holder.Worker, s.Lock.Holder.Event, s.Lock.Location)
		case strings.HasPrefix(s.Lock.Location, "nats"):
			lock = "free (" + s.Lock.Location + ")"
		case s.Lock.Location != "":
			lock = "in " + s.Lock.Location + " (its holder is the worker of the operation in flight)"
		}
		fmt.Fprintf(w, "  lock:       %s\n", lock)
		flight := "none"
		if f := s.InFlight; f != nil {
			flight = fmt.Sprintf("%s (%s): step %s, attempt %d by %s, started %s ago; %d partitions planned, %d copies submitted",
				f.Event, f.Type, f.Step, f.Attempt, f.Worker, now.Sub(f.Started).Round(time.Second), f.Partitions, f.Reassignments)
		}
		fmt.Fprintf(w, "  in flight:  %s\n", flight)
		fmt.Fprintf(w, "  waiting:    %d events, %d out; %d control events\n", s.Waiting, s.Out, s.ControlWaiting)
		plans := "none awaiting"
		if n := len(s.PlansAwaiting); n > 0 {
			ids := s.PlansAwaiting[:min(n, maxStatusPlans)]
			more := ""
			if n > len(ids) {
				more = fmt.Sprintf(" and %d more", n-len(ids))
			}
			plans = fmt.Sprintf("%s awaiting: %s%s (emitter plans --cluster %s)", plural(n, "plan"), strings.Join(ids, ", "), more, s.Cluster)
		}
		fmt.Fprintf(w, "  approval:   %s\n", plans)
	}
}
