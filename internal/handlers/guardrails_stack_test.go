package handlers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/guardrails"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// Integration tests of the guardrails against the local stack (they skip under -short);
// the unit tests, with an in-process nats-server, are in guardrails_test.go.

// only is the RE2 pattern that protects exactly topic.
func only(topic string) string { return "^" + regexp.QuoteMeta(topic) + "$" }

// An event outside a guardrail gets a rejected result naming the rule, once (never retried),
// and the partitions concerned keep their replicas and leaders.
func TestGuardrailsRejectWithNothingChanged(t *testing.T) {
	env := testenv.Get(t)
	type setup struct {
		f      *fleet
		topic  string
		logDir string // a log directory of broker 1 (the move is refused before it matters which)
	}
	preferred := func(s setup, partitions []int) rcData {
		d := rcData{"topic": s.topic, "preferred_leader": 2}
		if partitions != nil {
			d["partitions"] = partitions
		}
		return d
	}
	for _, tc := range []struct {
		name       string
		guardrails func(topic string) guardrails.Limits
		// first, when set, runs events that pass the guardrails before the refused one.
		first  func(t *testing.T, s setup)
		event  func(s setup) *events.Envelope
		source string // the event's source; "" the harness's
		want   func(s setup) *regexp.Regexp
	}{
		{
			name: "preferred leader of a protected topic",
			guardrails: func(topic string) guardrails.Limits {
				return guardrails.Limits{ProtectedTopics: []string{"^nothing$", only(topic)}}
			},
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeReplicaChangeRequested, preferred(s, []int{0}))
			},
			want: func(s setup) *regexp.Regexp {
				return exactly(fmt.Sprintf("guardrails.protected_topics: topic %q matches %q", s.topic, only(s.topic)))
			},
		},
		{
			name: "replication factor of a protected topic",
			guardrails: func(topic string) guardrails.Limits {
				return guardrails.Limits{ProtectedTopics: []string{only(topic)}}
			},
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeReplicaChangeRequested, rcData{"topic": s.topic, "replication_factor": 2})
			},
			want: func(s setup) *regexp.Regexp {
				return exactly(fmt.Sprintf("guardrails.protected_topics: topic %q matches %q", s.topic, only(s.topic)))
			},
		},
		{
			name: "log-dir move of a protected topic",
			guardrails: func(topic string) guardrails.Limits {
				return guardrails.Limits{ProtectedTopics: []string{only(topic)}}
			},
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeLogDirMoveRequested, map[string]any{"broker": 1, "topic": s.topic, "partition": 0, "to_dir": s.logDir})
			},
			want: func(s setup) *regexp.Regexp {
				return exactly(fmt.Sprintf("guardrails.protected_topics: topic %q matches %q", s.topic, only(s.topic)))
			},
		},
		{
			name: "broker-overloaded naming a protected topic",
			guardrails: func(topic string) guardrails.Limits {
				return guardrails.Limits{ProtectedTopics: []string{only(topic)}}
			},
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeBrokerOverloaded, map[string]any{"broker": 1, "topics": []string{s.topic}})
			},
			want: func(s setup) *regexp.Regexp {
				return exactly(fmt.Sprintf("guardrails.protected_topics: topic %q matches %q", s.topic, only(s.topic)))
			},
		},
		{
			name:       "a plan over the partition cap",
			guardrails: func(string) guardrails.Limits { return guardrails.Limits{MaxPartitionsPerEvent: 2} },
			event:      func(s setup) *events.Envelope { return s.f.event(events.TypeReplicaChangeRequested, preferred(s, nil)) },
			want: func(setup) *regexp.Regexp {
				return exactly("guardrails.max_partitions_per_event: the plan changes 3 partitions, over the cap of 2")
			},
		},
		{
			name:       "a replication-factor change asking for a timeout over the cap",
			guardrails: func(string) guardrails.Limits { return guardrails.Limits{MaxTimeout: time.Hour} },
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeReplicaChangeRequested, rcData{"topic": s.topic, "replication_factor": 2, "timeout": "2h"})
			},
			want: func(setup) *regexp.Regexp {
				return exactly("guardrails.max_timeout: timeout 2h0m0s is over the cap of 1h0m0s")
			},
		},
		{
			name:       "a replication-factor change asking for a throttle under the minimum",
			guardrails: func(string) guardrails.Limits { return guardrails.Limits{MinThrottleBytesPerSec: 1 << 20} },
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeReplicaChangeRequested, rcData{"topic": s.topic, "replication_factor": 2, "throttle_bytes_per_sec": 1})
			},
			want: func(setup) *regexp.Regexp {
				return exactly("guardrails.min_throttle_bytes_per_sec: throttle_bytes_per_sec 1 is under the minimum of 1048576")
			},
		},
		{
			name:       "a dry run over the partition cap",
			guardrails: func(string) guardrails.Limits { return guardrails.Limits{MaxPartitionsPerEvent: 2} },
			event: func(s setup) *events.Envelope {
				d := preferred(s, nil)
				d["dry_run"] = true
				return s.f.event(events.TypeReplicaChangeRequested, d)
			},
			want: func(setup) *regexp.Regexp {
				return exactly("guardrails.max_partitions_per_event: the plan changes 3 partitions, over the cap of 2")
			},
		},
		{
			name: "a source not allowed",
			guardrails: func(string) guardrails.Limits {
				return guardrails.Limits{AllowedSources: map[string][]string{events.TypeReplicaChangeRequested: {"ops-pipeline", "kafkamender-emitter"}}}
			},
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeReplicaChangeRequested, preferred(s, []int{0}))
			},
			source: "test-pipeline",
			want: func(setup) *regexp.Regexp {
				return exactly(`guardrails.allowed_sources: source "test-pipeline" may not send replica-change-requested events (allowed: ops-pipeline, kafkamender-emitter)`)
			},
		},
		{
			name:       "an operation over the hourly cap",
			guardrails: func(string) guardrails.Limits { return guardrails.Limits{MaxOperationsPerHour: 1} },
			first: func(t *testing.T, s setup) {
				// Dry runs neither count nor are refused by the cap; the one operation of the
				// hour does count.
				dry := func(p int) *events.Envelope {
					d := preferred(s, []int{p})
					d["dry_run"] = true
					return s.f.event(events.TypeReplicaChangeRequested, d)
				}
				if res := s.f.run(dry(0)); res.Status != events.StatusPlanned || len(res.Changes) != 1 {
					t.Fatalf("dry run: %s %q, %d changes; want planned, 1", res.Status, res.Error, len(res.Changes))
				}
				first := s.f.event(events.TypeReplicaChangeRequested, preferred(s, []int{0}))
				if res := s.f.run(first); res.Status != events.StatusSucceeded {
					t.Fatalf("the first operation: %s %q, want succeeded", res.Status, res.Error)
				}
				if res := s.f.run(dry(1)); res.Status != events.StatusPlanned || len(res.Changes) != 1 {
					t.Fatalf("dry run at the cap: %s %q, %d changes; want planned, 1", res.Status, res.Error, len(res.Changes))
				}
				if got := hourlyRecord(t, s.f); !slices.Equal(got, []string{first.ID}) {
					t.Errorf("the hourly record lists %v, want the first operation only", got)
				}
			},
			event: func(s setup) *events.Envelope {
				return s.f.event(events.TypeReplicaChangeRequested, preferred(s, []int{1}))
			},
			want: func(s setup) *regexp.Regexp {
				return regexp.MustCompile("^" + regexp.QuoteMeta(fmt.Sprintf("guardrails.max_operations_per_hour: cluster %s ran 1 operations in the last hour (the cap is 1); the oldest counts until ", s.f.alias)) + `\d\d:\d\d:\d\dZ$`)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, env, "local")
			topic := testenv.Name(t, "guard")
			f.configure = func(c *handlers.Config) { c.Guardrails = tc.guardrails(topic) }
			f.start("worker-1")
			cl := env.Kafka(t, "local")
			// Broker 1 heads every partition; broker 2 is a replica of each, in sync.
			testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}, {1, 2, 4}, {1, 2, 3}}, nil)
			s := setup{f: f, topic: topic}
			dirs := env.TwoLogDirs(t, "local", 1)
			s.logDir = dirs[1]
			if tc.first != nil {
				tc.first(t, s)
			}
			before := state(t, f, topic)
			adm := env.Admin(t, "local")
			dirsBefore := dirsOf(t, adm, topic)
			e := tc.event(s)
			if tc.source != "" {
				e.Source = tc.source
			}
			results := f.publish(e)
			res := wait(t, results, 3*time.Minute)
			if want := tc.want(s); res.Status != events.StatusRejected || !want.MatchString(res.Error) {
				t.Fatalf("result %s %q\nwant rejected, error matching %s", res.Status, res.Error, want)
			}
			if len(res.Changes) != 0 || len(res.Skipped) != 0 || len(res.Noop) != 0 || res.Attempt != 1 {
				t.Errorf("a rejection lists changes %v, skipped %v, noop %v, attempt %d", res.Changes, res.Skipped, res.Noop, res.Attempt)
			}
			if stored := f.stored(e.ID); stored.Status != events.StatusRejected || stored.Error != res.Error {
				t.Errorf("stored result %s %q", stored.Status, stored.Error)
			}
			// Never retried: a redelivery would replay the stored result on the subject.
			select {
			case again := <-results:
				t.Errorf("another result for the event (%s %q, replayed %v): a rejection is never retried", again.Status, again.Error, again.Replayed)
			case <-time.After(3 * time.Second):
			}
			// Nothing changed: every partition as before, also a moment later.
			if after := state(t, f, topic); !sameState(before, after) {
				t.Errorf("placement changed:\nbefore %v\nafter  %v", showPlacement(before), showPlacement(after))
			}
			if after := dirsOf(t, adm, topic); !maps.Equal(dirsBefore, after) {
				t.Errorf("log directories on broker 1 changed: before %v, after %v", dirsBefore, after)
			}
			f.noLeftovers([]string{topic}, nil, "")
		})
	}
}

// A broker-overloaded event that picks the topics itself (no topics) never moves a
// protected topic's leadership: its partitions that the broker leads are skipped, each with
// the code protected, and keep their replicas and leaders; the others are shed.
func TestGuardrailsShedLeavesProtectedTopics(t *testing.T) {
	// Exclusive: a shed without topics changes every topic of the cluster.
	env := testenv.GetExclusive(t)
	for _, tc := range []struct {
		cluster string
		others  []int32
	}{{"local", []int32{2, 3, 4}}, {"kraft", []int32{2, 3}}} {
		t.Run(tc.cluster, func(t *testing.T) {
			f := newFleet(t, env, tc.cluster)
			protected, open := testenv.Name(t, "protected"), testenv.Name(t, "open")
			pattern := only(protected)
			f.configure = func(c *handlers.Config) {
				c.Guardrails = guardrails.Limits{ProtectedTopics: []string{pattern}}
			}
			f.start("worker-1")
			cl := env.Kafka(t, tc.cluster)
			testenv.CreateTopic(t, cl, protected, ledBy(1, tc.others, 4, 2), nil)
			testenv.CreateTopic(t, cl, open, ledBy(1, tc.others, 4, 2), nil)
			if tc.cluster == "local" {
				// Topics of other tests still being deleted (in the background, in ZooKeeper
				// mode) would be in the shed's plan and then vanish.
				zc := env.ZooKeeper(t)
				testenv.Eventually(t, 60*time.Second, func() error {
					pending, _, err := zc.Children(stack.KafkaChroot + "/admin/delete_topics")
					if err != nil && !errors.Is(err, zk.ErrNoNode) {
						return err
					}
					if len(pending) > 0 {
						return fmt.Errorf("topics still being deleted: %v", pending)
					}
					return nil
				})
			}
			before := state(t, f, protected)

			res := f.run(f.event(events.TypeBrokerOverloaded, map[string]any{"broker": 1, "demote_to_end": true}))
			if res.Status != events.StatusPartial {
				t.Fatalf("result %s %q (skipped %v), want partial", res.Status, res.Error, res.Skipped)
			}
			var skipped []string
			for _, s := range res.Skipped {
				if s.Code == plan.SkipProtected || s.Topic == protected {
					want := fmt.Sprintf("topic %q is protected: it matches %q (guardrails.protected_topics)", protected, pattern)
					if s.Topic != protected || s.Code != plan.SkipProtected || s.Reason != want {
						t.Errorf("skipped %s: %q (%s), want %q (protected)", s.TopicPartition, s.Reason, s.Code, want)
					}
					skipped = append(skipped, s.TopicPartition.String())
				}
			}
			if want := []string{protected + "-0", protected + "-1", protected + "-2", protected + "-3"}; !slices.Equal(skipped, want) {
				t.Errorf("skipped as protected: %v, want %v", skipped, want)
			}
			shed := map[model.TopicPartition]bool{}
			for _, c := range res.Changes {
				if c.Topic == protected {
					t.Errorf("changed %s of the protected topic: %v led by %d", c.TopicPartition, c.ReplicasAfter, c.LeaderAfter)
				}
				if c.Topic == open && c.LeaderAfter != 1 {
					shed[c.TopicPartition] = true
				}
			}
			if len(shed) != 4 {
				t.Errorf("%d of the other topic's 4 partitions shed: %v", len(shed), res.Changes)
			}
			// The protected topic keeps its placement; the other one is off broker 1.
			time.Sleep(2 * time.Second)
			if after := state(t, f, protected); !sameState(before, after) {
				t.Errorf("the protected topic's placement changed:\nbefore %v\nafter  %v", showPlacement(before), showPlacement(after))
			}
			testenv.Eventually(t, 15*time.Second, func() error {
				for _, p := range state(t, f, open) {
					if p.Leader == 1 || p.Replicas[0] == 1 {
						return fmt.Errorf("%s: replicas %v led by %d", p.TopicPartition, p.Replicas, p.Leader)
					}
				}
				return nil
			})
			f.noLeftovers([]string{protected, open}, nil, "")
		})
	}
}

// exactly matches s and nothing else.
func exactly(s string) *regexp.Regexp { return regexp.MustCompile("^" + regexp.QuoteMeta(s) + "$") }

// showPlacement shows each partition's replicas and leader.
func showPlacement(ps []model.Partition) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%d:%v@%d ", p.Partition, p.Replicas, p.Leader)
	}
	return b.String()
}

// dirsOf maps each replica of topic on broker 1 of local to its log directory (see placement).
func dirsOf(t *testing.T, adm *kadm.Client, topic string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, dir := range placement(t, adm, 1) {
		if strings.HasPrefix(k, topic+"-") {
			out[k] = dir
		}
	}
	if len(out) == 0 {
		t.Fatalf("no replica of %s on broker 1", topic)
	}
	return out
}

// hourlyRecord lists the events of the fleet's cluster in the hourly record of the
// guardrails (events.GuardrailsBucket), oldest first.
func hourlyRecord(t *testing.T, f *fleet) []string {
	t.Helper()
	kv, err := f.js.KeyValue(t.Context(), events.GuardrailsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), f.alias)
	if err != nil {
		t.Fatal(err)
	}
	var ops []guardrails.Op
	if err := json.Unmarshal(e.Value(), &ops); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range ops {
		out = append(out, o.Event)
	}
	return out
}
