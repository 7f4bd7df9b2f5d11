package main

// Scenarios demote and preferred: a reorder-and-elect change three ways.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// demoted is the broker each demotion moves leadership off.
const demoted int32 = 1

var contenders = []string{kafkamender, cli, floor}

// tag is a contender's short name, in topic names.
func tag(contender string) string {
	switch contender {
	case kafkamender:
		return "km"
	case cli:
		return "cli"
	}
	return "floor"
}

// change is one contender's run of a reorder-and-elect change on a fresh topic.
type change struct {
	c         *cluster
	topic     string
	plan      func(ctx context.Context) (plan.Plan, error)
	eventType string
	data      map[string]any
}

// runs times each contender on its own fresh topic, -runs times in rotated order, checks
// that all planned the same target and that each did it, and returns the times. With
// overheads, kafkamender's own overhead of each run is returned too.
func (b *bench) runs(ctx context.Context, what string, c *cluster, assignment [][]int32, mk func(topic string) change) (map[string][]time.Duration, [2][]time.Duration, error) {
	times := map[string][]time.Duration{}
	var over [2][]time.Duration
	var want []target
	for r := range b.opts.runs {
		for _, who := range order(r, contenders) {
			topic := fmt.Sprintf("bench-%s-%s-%s-%d-%s", what, c.Name, tag(who), r, b.stamp)
			if err := c.createTopic(ctx, topic, assignment); err != nil {
				return nil, over, err
			}
			ch := mk(topic)
			p, err := ch.plan(ctx)
			if err != nil {
				return nil, over, fmt.Errorf("plan %s: %w", topic, err)
			}
			t := targetOf(p)
			if want == nil {
				want = t
			} else if !sameTarget(t, want) {
				return nil, over, fmt.Errorf("%s: the planner gives %s another target than the first contender's", topic, who)
			}
			var d time.Duration
			switch who {
			case floor:
				start := time.Now()
				err = floorReorder(ctx, c, topic, p)
				d = time.Since(start)
			case cli:
				start := time.Now()
				err = cliReorder(ctx, c, b.dir, topic, p)
				d = time.Since(start)
			case kafkamender:
				if err = b.nats.clearCoolDown(ctx, c.Name); err != nil {
					return nil, over, err
				}
				b.w.rec.reset()
				id := fmt.Sprintf("%s-%s-%d-%s", what, c.Name, r, b.stamp)
				start := time.Now()
				var res *events.Result
				var heard time.Time
				res, heard, err = b.nats.event(ctx, c.Name, ch.eventType, id, ch.data)
				d = time.Since(start)
				if err == nil {
					err = didPlan(res, p)
				}
				if err == nil && b.opts.trace {
					err = b.writeTrace(id, start, res.StartedAt, heard)
				}
				if err == nil {
					before, after, ok := overhead(b.w.rec.since(res.StartedAt), c.Name, res.StartedAt, heard)
					if !ok {
						err = fmt.Errorf("%s: the worker's Kafka log shows no write that changes the cluster", id)
					}
					over[0], over[1] = append(over[0], before), append(over[1], after)
				}
			}
			if err == nil {
				// Every contender's change holds, read by the bench (untimed: brokers' metadata
				// may lag the one the contender read by a moment).
				err = until(ctx, 30*time.Second, "the change shows", func(ctx context.Context) error { return c.shows(ctx, topic, p) })
			}
			if err != nil {
				return nil, over, fmt.Errorf("%s, %s, run %d: %w", what, who, r+1, err)
			}
			times[who] = append(times[who], d)
			b.logf("%s %s %-13s run %d: %s", what, c.Name, who, r+1, short(d))
			if err := c.deleteTopic(ctx, topic); err != nil {
				return nil, over, err
			}
		}
	}
	return times, over, nil
}

// demote: broker 1 leads n partitions (3 replicas each); move its leadership off.
func (b *bench) demote(ctx context.Context, c *cluster, n int) error {
	times, _, err := b.runs(ctx, fmt.Sprintf("demote%d", n), c, ledBy(demoted, c.brokerIDs(), n), func(topic string) change {
		return change{c: c, topic: topic,
			plan:      func(ctx context.Context) (plan.Plan, error) { return c.planShed(ctx, topic, demoted) },
			eventType: events.TypeBrokerOverloaded,
			data:      map[string]any{"broker": demoted, "topics": []string{topic}, "reason": "bench"}}
	})
	if err != nil {
		return err
	}
	km, cl, fl := summarize(times[kafkamender]), summarize(times[cli]), summarize(times[floor])
	goal := ""
	if n >= 1000 {
		goal = fmt.Sprintf("≤ 1.2× floor: %s", met(float64(km.median) <= 1.2*float64(fl.median)))
	}
	b.rows = append(b.rows, []string{fmt.Sprintf("demote a broker leading %d partitions", n), clusterLabel(c),
		km.String(), cl.String(), fl.String(), ratio(km, fl), ratio(km, cl), goal})
	return nil
}

// preferred: one partition [1 2 3]; make broker 2 its preferred leader and leader.
func (b *bench) preferred(ctx context.Context, c *cluster) error {
	const to int32 = 2
	times, over, err := b.runs(ctx, "preferred", c, [][]int32{{1, 2, 3}}, func(topic string) change {
		return change{c: c, topic: topic,
			plan:      func(ctx context.Context) (plan.Plan, error) { return c.planPreferred(ctx, topic, to) },
			eventType: events.TypeReplicaChangeRequested,
			data:      map[string]any{"topic": topic, "partitions": []int32{0}, "preferred_leader": to, "reason": "bench"}}
	})
	if err != nil {
		return err
	}
	km, cl, fl := summarize(times[kafkamender]), summarize(times[cli]), summarize(times[floor])
	b.rows = append(b.rows, []string{"preferred leader of one partition", clusterLabel(c),
		km.String(), cl.String(), fl.String(), ratio(km, fl), ratio(km, cl), ""})
	before, after := summarize(over[0]), summarize(over[1])
	b.rows = append(b.rows,
		[]string{"kafkamender overhead: event received → first cluster write", clusterLabel(c), before.String(), "", "", "", "",
			fmt.Sprintf("< 50ms: %s", met(before.n > 0 && before.max < 50*time.Millisecond))},
		[]string{"kafkamender overhead: last cluster answer → result heard", clusterLabel(c), after.String(), "", "", "", "",
			fmt.Sprintf("< 50ms: %s", met(after.n > 0 && after.max < 50*time.Millisecond))})
	return nil
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func clusterLabel(c *cluster) string {
	return fmt.Sprintf("%s (Kafka %s)", c.Name, c.Version)
}

// clearCoolDown forgets the brokers of cluster shed recently: each run's alert must shed
// again, and plan as the bench did (no broker to avoid).
func (n *natsConn) clearCoolDown(ctx context.Context, clusterName string) error {
	kv, err := n.js.KeyValue(ctx, events.OverloadedBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	keys, err := kv.ListKeysFiltered(ctx, clusterName+".*")
	if err != nil {
		return err
	}
	var all []string
	for k := range keys.Keys() {
		all = append(all, k)
	}
	for _, k := range all {
		if err := kv.Purge(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// writeTrace writes the worker's Kafka requests and the engine's phases between an event's
// receipt and its result heard, one a line, with the milliseconds since the receipt; the
// first line is the event's publication (start), before it.
func (b *bench) writeTrace(id string, start, received, heard time.Time) error {
	// Before the receipt: the bench's subscription to the result, the event's publication
	// (stored and acknowledged by JetStream) and its delivery to the worker.
	lines := []string{fmt.Sprintf("%9.1f ms  event sent (the clock starts)", -float64(received.Sub(start).Microseconds())/1000)}
	for _, c := range b.w.rec.since(received) {
		if c.at.After(heard) {
			continue
		}
		dir := "read "
		switch {
		case c.phase:
			dir = "---- "
		case c.write:
			dir = "wrote"
		}
		lines = append(lines, fmt.Sprintf("%9.1f ms  %-7s %s %s", float64(c.at.Sub(received).Microseconds())/1000, c.cluster, dir, c.kind))
	}
	lines = append(lines, fmt.Sprintf("%9.1f ms  result heard", float64(heard.Sub(received).Microseconds())/1000))
	return os.WriteFile(filepath.Join(b.dir, id+".trace"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
