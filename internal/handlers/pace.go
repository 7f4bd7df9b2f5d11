package handlers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// Min-ISR pacing. A copy adds load to the brokers it touches (the leader serving it, the
// disks and network of both ends); while some partition of the cluster is under its
// min.insync.replicas (producers with acks=all fail on it) for a reason that is not the
// operation's own, no new batch of copies starts, except the copies that restore such a
// partition's redundancy; copies already running go on. The worker checks again every
// pacePoll and starts the batch as soon as no partition is under (within 5 s of the
// recovery), and the result says how long it waited and why.
//
// A partition is under as Kafka's UnderMinIsrPartitionCount counts it: it has a leader and
// fewer in-sync replicas than its topic's min.insync.replicas. Not a reason to wait: a
// partition short only of brokers the event itself declares gone for good (broker-failed:
// the operation is there to repair them), and a partition that could never meet its
// minimum (fewer replicas than min.insync.replicas: a topic's configuration, not an
// outage). An offline partition (no leader) is another alert and another event
// (partition-offline).

// pacePoll is the interval of the checks while paused.
const pacePoll = time.Second

// pacer finds the partitions a copy must wait for.
type pacer struct {
	c *Cluster
	// failed are the brokers the event declares gone for good.
	failed []int32
	minISR map[string]int // read once per attempt (topics created since count 1)
}

// underMin is a partition under its topic's min.insync.replicas.
type underMin struct {
	model.TopicPartition
	replicas, isr []int32
	min           int
}

func (u underMin) String() string {
	return fmt.Sprintf("%s (in sync %v of replicas %v, min %d)", u.TopicPartition, u.isr, u.replicas, u.min)
}

// hurting lists the partitions under min.insync.replicas for a reason not the operation's,
// from a fresh metadata read.
func (p *pacer) hurting(ctx context.Context) ([]underMin, error) {
	adm := kadm.NewClient(p.c.Client)
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	if p.minISR == nil {
		m, err := minInsyncReplicasOf(ctx, p.c, md.Topics.Names())
		if err != nil {
			return nil, err
		}
		p.minISR = m
	}
	var out []underMin
	for _, td := range md.Topics.Sorted() {
		if td.Err != nil {
			continue
		}
		min := max(p.minISR[td.Topic], 1)
		for _, pd := range td.Partitions.Sorted() {
			// As Kafka's UnderMinIsrPartitionCount, which leaders report: a partition
			// without a leader is offline, another alert (and another event).
			if pd.Leader < 0 || len(pd.ISR) >= min || len(pd.Replicas) < min {
				continue
			}
			if short := model.Minus(pd.Replicas, pd.ISR); len(p.failed) > 0 && len(model.Minus(short, p.failed)) == 0 {
				continue // short only of the brokers this event repairs
			}
			out = append(out, underMin{TopicPartition: model.TopicPartition{Topic: td.Topic, Partition: pd.Partition},
				replicas: pd.Replicas, isr: pd.ISR, min: min})
		}
	}
	return out, nil
}

// describeUnder names the partitions, the first few in full.
func describeUnder(under []underMin) string {
	const shown = 5
	var parts []string
	for i, u := range under {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(under)-shown))
			break
		}
		parts = append(parts, u.String())
	}
	return fmt.Sprintf("%d partition(s) under min.insync.replicas for a reason not this operation's: %s", len(under), strings.Join(parts, ", "))
}

// pace holds batch bi (of n) back while the cluster is hurting: it submits at once (with
// restore, when the operation's copies can restore redundancy) the batch's copies that
// add replicas to a partition under min.insync.replicas, waits for the others until no
// partition is under, and returns them. It journals a note when it starts to wait and one
// when it stops, and reports progress (which keeps the event's delivery alive) while it
// waits.
func (p *pacer) pace(ctx context.Context, r *operation.Run, log *zap.Logger, bi, n int, submit []plan.Change,
	progress events.Progress, poll time.Duration, restore func([]plan.Change) error) ([]plan.Change, error) {
	var since, reported time.Time
	for {
		under, err := p.hurting(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case err != nil:
			// Nothing known: no new batch until a read says the cluster is not hurting.
			log.Warn("cannot read the in-sync replicas; the next batch waits for a read", zap.Error(err))
		case len(under) == 0:
			if !since.IsZero() {
				waited := time.Since(since).Round(time.Second)
				r.Op.Note(fmt.Sprintf("batch %d of %d resumed at %s after waiting %s for partitions under min.insync.replicas to recover.",
					bi, n, time.Now().UTC().Format(time.RFC3339), waited))
				log.Info("resuming: no partition under min.insync.replicas", zap.Int("batch", bi), zap.Duration("waited", waited))
				if err := r.Save(ctx, r.Entry().Step); err != nil {
					return nil, err
				}
			}
			return submit, nil
		default:
			why := describeUnder(under)
			if since.IsZero() {
				since = time.Now()
				r.Op.Note(fmt.Sprintf("batch %d of %d paused at %s: %s.", bi, n, since.UTC().Format(time.RFC3339), why))
				log.Warn("pausing the copies: the cluster is hurting", zap.Int("batch", bi), zap.String("why", why))
				if err := r.Save(ctx, r.Entry().Step); err != nil {
					return nil, err
				}
			}
			if restore != nil {
				short := map[model.TopicPartition]bool{}
				for _, u := range under {
					short[u.TopicPartition] = true
				}
				var now, later []plan.Change
				for _, ch := range submit {
					if short[ch.TopicPartition] && len(minus(ch.ReplicasAfter, ch.ReplicasBefore)) > 0 {
						now = append(now, ch)
					} else {
						later = append(later, ch)
					}
				}
				if len(now) > 0 {
					if err := restore(now); err != nil {
						return nil, err
					}
					submit = later
				}
			}
			if time.Since(reported) >= poll {
				progress.Paused = why
				r.Progress(progress)
				reported = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(pacePoll):
		}
	}
}

// configValue returns the value of key among configs, if it is set.
func configValue(configs []kadm.Config, key string) (string, bool) {
	for _, c := range configs {
		if c.Key == key && c.Value != nil {
			return *c.Value, true
		}
	}
	return "", false
}

// minInsyncReplicasOf returns the topics' min.insync.replicas (absent: unknown, 1), read
// in one request; a topic whose configs cannot be read is left out.
func minInsyncReplicasOf(ctx context.Context, c *Cluster, topics []string) (map[string]int, error) {
	m := make(map[string]int, len(topics))
	if len(topics) == 0 {
		return m, nil
	}
	rcs, err := kadm.NewClient(c.Client).DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, transient(fmt.Errorf("describe topic configs: %w", err))
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		if v, ok := configValue(rc.Configs, "min.insync.replicas"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				m[rc.Name] = n
			}
		}
	}
	return m, nil
}
