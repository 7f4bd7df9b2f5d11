package plan

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// shedCluster builds a snapshot with the given live brokers and topics (TopicPartition is
// filled in from the map key and the index). Topic "gone" is missing.
func shedCluster(brokers []int32, topics map[string][]model.Partition) *model.Snapshot {
	s := &model.Snapshot{
		Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{},
		Missing: map[string]error{"gone": errors.New("UNKNOWN_TOPIC_OR_PARTITION")},
	}
	for _, id := range brokers {
		s.Brokers[id] = model.Broker{ID: id}
	}
	for name, ps := range topics {
		for i := range ps {
			ps[i].TopicPartition = model.TopicPartition{Topic: name, Partition: int32(i)}
		}
		s.Topics[name] = ps
	}
	return s
}

func stp(topic string, p int32) model.TopicPartition {
	return model.TopicPartition{Topic: topic, Partition: p}
}

func ch(topic string, p int32, before, after []int32, from, to int32) Change {
	return Change{TopicPartition: stp(topic, p), ReplicasBefore: before, ReplicasAfter: after, LeaderBefore: from, LeaderAfter: to}
}

// protect protects the topics that one of the RE2 patterns matches, as the handlers do
// with guardrails.protected_topics.
func protect(patterns ...string) Protected {
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = regexp.MustCompile(p)
	}
	return func(topic string) (string, bool) {
		for _, re := range res {
			if re.MatchString(topic) {
				return re.String(), true
			}
		}
		return "", false
	}
}

func reassigning(p model.Partition, adding ...int32) model.Partition {
	p.Adding = adding
	return p
}

// copySnapshot is a deep copy, to check that planning does not modify its input.
func copySnapshot(s *model.Snapshot) *model.Snapshot {
	// maps.Clone keeps a nil map nil, so an unmodified snapshot compares equal.
	c := &model.Snapshot{Controller: s.Controller, Brokers: maps.Clone(s.Brokers), Missing: maps.Clone(s.Missing)}
	if s.Topics != nil {
		c.Topics = map[string][]model.Partition{}
	}
	for name, ps := range s.Topics {
		cps := make([]model.Partition, len(ps))
		for i, p := range ps {
			p.Replicas, p.ISR, p.Offline = slices.Clone(p.Replicas), slices.Clone(p.ISR), slices.Clone(p.Offline)
			p.Adding, p.Removing = slices.Clone(p.Adding), slices.Clone(p.Removing)
			cps[i] = p
		}
		c.Topics[name] = cps
	}
	return c
}

func TestShed(t *testing.T) {
	all := []int32{1, 2, 3}
	live := []int32{1, 2, 3, 4}
	for _, tc := range []struct {
		name        string
		snap        *model.Snapshot
		req         ShedRequest
		changes     []Change
		skipped     []string // "topic-partition: reason prefix"
		blocked     []model.TopicPartition
		elections   []model.TopicPartition // checked when not nil
		rejectMatch string
	}{
		{
			name: "to the least-loaded in-sync replica",
			snap: shedCluster(live, map[string][]model.Partition{
				"t": {part([]int32{1, 2, 3}, all, 1)},
				"o": {part([]int32{2, 3, 4}, []int32{2, 3, 4}, 2), part([]int32{2, 3, 4}, []int32{2, 3, 4}, 2), part([]int32{3, 2, 4}, []int32{2, 3, 4}, 3)},
			}),
			req:     ShedRequest{Broker: 1},
			changes: []Change{ch("t", 0, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3)},
		},
		{
			name: "counts come from the whole snapshot, not the selected topics",
			snap: shedCluster(live, map[string][]model.Partition{
				"t": {part([]int32{1, 2, 3}, all, 1)},
				"o": {part([]int32{2, 3, 4}, []int32{2, 3, 4}, 2), part([]int32{2, 3, 4}, []int32{2, 3, 4}, 2), part([]int32{3, 2, 4}, []int32{2, 3, 4}, 3)},
			}),
			req:     ShedRequest{Broker: 1, Topics: []string{"t"}},
			changes: []Change{ch("t", 0, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3)},
		},
		{
			name:    "ties go to the lowest broker id",
			snap:    shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 3, 2}, all, 1)}}),
			req:     ShedRequest{Broker: 1},
			changes: []Change{ch("t", 0, []int32{1, 3, 2}, []int32{2, 3, 1}, 1, 2)},
		},
		{
			name: "several partitions spread evenly",
			snap: shedCluster(live, map[string][]model.Partition{"t": {
				part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 3}, all, 1),
			}}),
			req: ShedRequest{Broker: 1},
			changes: []Change{
				ch("t", 0, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2),
				ch("t", 1, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3),
				ch("t", 2, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2),
			},
		},
		{
			// Greedy alone gives t-0 and t-2 to broker 2 (ties to the lowest id) and leaves
			// broker 3 with nothing; the repair pass moves t-0 to broker 3.
			name: "repair pass beats greedy",
			snap: shedCluster(live, map[string][]model.Partition{"t": {
				part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 4}, []int32{1, 2, 4}, 1), part([]int32{1, 2, 4}, []int32{1, 2, 4}, 1),
			}}),
			req: ShedRequest{Broker: 1},
			changes: []Change{
				ch("t", 0, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3),
				ch("t", 1, []int32{1, 2, 4}, []int32{4, 2, 1}, 1, 4),
				ch("t", 2, []int32{1, 2, 4}, []int32{2, 1, 4}, 1, 2),
			},
		},
		{
			// Cluster-wide only: a-1 to broker 2 (the tie to the lower id), b-1 to broker 3,
			// so each topic has both its leaders on one broker. Swapping keeps the counts.
			name: "each topic balanced second: two topics swap brokers",
			snap: shedCluster(live, map[string][]model.Partition{
				"a": {part([]int32{2, 3}, []int32{2, 3}, 2), part([]int32{1, 2, 3}, all, 1)},
				"b": {part([]int32{3, 2}, []int32{2, 3}, 3), part([]int32{1, 2, 3}, all, 1)},
			}),
			req: ShedRequest{Broker: 1},
			changes: []Change{
				ch("a", 1, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3),
				ch("b", 1, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2),
			},
		},
		{
			// Brokers 2 and 3 lead one each: either may get a-1 (2 and 1 leaders either
			// way); the topic's own counts pick broker 3, not the lower id.
			name: "the topic decides which broker gets one more",
			snap: shedCluster(live, map[string][]model.Partition{
				"a": {part([]int32{2, 3}, []int32{2, 3}, 2), part([]int32{1, 2, 3}, all, 1)},
				"b": {part([]int32{3, 2}, []int32{2, 3}, 3)},
			}),
			req:     ShedRequest{Broker: 1},
			changes: []Change{ch("a", 1, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3)},
		},
		{
			name: "avoided brokers only when they are the only option",
			snap: shedCluster(live, map[string][]model.Partition{
				"t": {part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 4}, []int32{1, 2}, 1)},
				"o": {part([]int32{3, 4}, []int32{3, 4}, 3), part([]int32{3, 4}, []int32{3, 4}, 3)},
			}),
			req: ShedRequest{Broker: 1, Avoid: []int32{2}},
			changes: []Change{
				ch("t", 0, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3),
				ch("t", 1, []int32{1, 2, 4}, []int32{2, 1, 4}, 1, 2),
			},
		},
		{
			name: "no other in-sync replica is skipped; leader but not head is an election only",
			snap: shedCluster(live, map[string][]model.Partition{"t": {
				part([]int32{1, 2, 3}, []int32{1}, 1),
				part([]int32{1, 5}, []int32{1, 5}, 1),
				part([]int32{2, 1, 3}, all, 1),
			}}),
			req: ShedRequest{Broker: 1},
			changes: []Change{
				ch("t", 2, []int32{2, 1, 3}, []int32{2, 1, 3}, 1, 2),
			},
			skipped: []string{
				"t-0: no in-sync replica other than broker 1",
				"t-1: no live in-sync replica other than broker 1 (isr [1 5]; not live: [5])",
			},
			elections: []model.TopicPartition{stp("t", 2)},
		},
		{
			name: "under reassignment is skipped",
			snap: shedCluster(live, map[string][]model.Partition{"t": {
				reassigning(part([]int32{1, 2, 3}, all, 1), 4), part([]int32{1, 2, 3}, all, 1),
			}}),
			req:     ShedRequest{Broker: 1},
			changes: []Change{ch("t", 1, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2)},
			skipped: []string{"t-0: under reassignment (adding [4], removing [])"},
		},
		{
			name: "under reassignment is blocked when waiting",
			snap: shedCluster(live, map[string][]model.Partition{"t": {
				reassigning(part([]int32{1, 2, 3}, all, 1), 4), part([]int32{1, 2, 3}, all, 1),
			}}),
			req:     ShedRequest{Broker: 1, WaitBlocked: true},
			changes: []Change{ch("t", 1, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2)},
			blocked: []model.TopicPartition{stp("t", 0)},
		},
		{
			name: "head but not leader is reordered, keeping the leader",
			snap: shedCluster(live, map[string][]model.Partition{"t": {
				part([]int32{1, 2, 3}, all, 3),              // leader 3 stays, becomes head
				part([]int32{1, 2, 3}, []int32{1, 2}, -1),   // no leader: 2 is the only candidate
				part([]int32{1, 2, 4}, []int32{1, 2, 4}, 2), // leader 2 is avoided but moves nothing
			}}),
			req: ShedRequest{Broker: 1, Avoid: []int32{2}},
			changes: []Change{
				ch("t", 0, []int32{1, 2, 3}, []int32{3, 2, 1}, 3, 3),
				ch("t", 1, []int32{1, 2, 3}, []int32{2, 1, 3}, -1, 2),
				ch("t", 2, []int32{1, 2, 4}, []int32{2, 1, 4}, 2, 2),
			},
			elections: []model.TopicPartition{stp("t", 1)},
		},
		{
			name: "demote to end",
			snap: shedCluster(live, map[string][]model.Partition{"t": {
				part([]int32{1, 2, 3}, all, 1),
				part([]int32{3, 1, 2}, all, 1),
				part([]int32{4, 2, 1}, []int32{1, 2, 4}, 4), // neither led nor headed: untouched
				part([]int32{1, 4}, []int32{1, 4}, 4),
			}}),
			req: ShedRequest{Broker: 1, DemoteToEnd: true},
			changes: []Change{
				ch("t", 0, []int32{1, 2, 3}, []int32{2, 3, 1}, 1, 2),
				ch("t", 1, []int32{3, 1, 2}, []int32{3, 2, 1}, 1, 3),
				ch("t", 3, []int32{1, 4}, []int32{4, 1}, 4, 4),
			},
			elections: []model.TopicPartition{stp("t", 0), stp("t", 1)},
		},
		{
			name: "topics and exclude_topics",
			snap: shedCluster(live, map[string][]model.Partition{
				"a": {part([]int32{1, 2, 3}, all, 1)}, "b": {part([]int32{1, 2, 3}, all, 1)}, "c": {part([]int32{1, 2, 3}, all, 1)},
			}),
			req:     ShedRequest{Broker: 1, Topics: []string{"b", "a", "a"}, ExcludeTopics: []string{"b"}},
			changes: []Change{ch("a", 0, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2)},
		},
		{
			name: "exclude_topics alone",
			snap: shedCluster(live, map[string][]model.Partition{
				"a": {part([]int32{1, 2, 3}, all, 1)}, "b": {part([]int32{1, 2, 3}, all, 1)}, "c": {part([]int32{1, 2, 3}, all, 1)},
			}),
			req: ShedRequest{Broker: 1, ExcludeTopics: []string{"c", "nonexistent"}},
			changes: []Change{
				ch("a", 0, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2),
				ch("b", 0, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3),
			},
		},
		{
			name: "max_partitions takes the first in topic, partition order",
			snap: shedCluster(live, map[string][]model.Partition{
				"b": {part([]int32{1, 2, 3}, all, 1)},
				"a": {part([]int32{1, 2}, []int32{1}, 1), part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 3}, all, 1)},
			}),
			req: ShedRequest{Broker: 1, MaxPartitions: 2},
			changes: []Change{
				ch("a", 1, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2),
				ch("a", 2, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3),
			},
			skipped: []string{"a-0: no in-sync replica other than broker 1", "b-0: beyond max_partitions 2"},
		},
		{
			name: "a protected topic is never changed: skipped where it would be, its load still counts",
			snap: shedCluster(live, map[string][]model.Partition{
				"protected-a": {
					part([]int32{1, 2, 3}, all, 1),        // led: would move
					part([]int32{1, 2, 3}, []int32{1}, 1), // no candidate: that reason stays
					part([]int32{1, 2, 3}, all, 2),        // headed, not led: would be reordered
					part([]int32{2, 3, 1}, all, 2),        // neither: not listed
					part([]int32{2, 1, 3}, all, 1),        // led, not headed: would be elected
				},
				"t": {part([]int32{1, 2, 3}, all, 1)},
			}),
			req:     ShedRequest{Broker: 1, Protected: protect("^protected-")},
			changes: []Change{ch("t", 0, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3)},
			skipped: []string{
				`protected-a-0: topic "protected-a" is protected: it matches "^protected-" (guardrails.protected_topics)`,
				"protected-a-1: no in-sync replica other than broker 1",
				`protected-a-2: topic "protected-a" is protected`,
				`protected-a-4: topic "protected-a" is protected`,
			},
		},
		{
			name: "a protected partition under reassignment is skipped, not waited for",
			snap: shedCluster(live, map[string][]model.Partition{
				"p": {reassigning(part([]int32{1, 2, 3}, all, 1), 4)},
				"t": {reassigning(part([]int32{1, 2, 3}, all, 1), 4), part([]int32{1, 2, 3}, all, 1)},
			}),
			req:     ShedRequest{Broker: 1, WaitBlocked: true, Protected: protect("^p$")},
			changes: []Change{ch("t", 1, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2)},
			skipped: []string{`p-0: topic "p" is protected: it matches "^p$"`},
			blocked: []model.TopicPartition{stp("t", 0)},
		},
		{
			name: "protected partitions do not count toward max_partitions",
			snap: shedCluster(live, map[string][]model.Partition{
				"a": {part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 3}, all, 1)},
				"b": {part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 3}, all, 1), part([]int32{1, 2, 3}, all, 1)},
			}),
			req: ShedRequest{Broker: 1, MaxPartitions: 2, Protected: protect("^a$")},
			changes: []Change{
				ch("b", 0, []int32{1, 2, 3}, []int32{2, 1, 3}, 1, 2),
				ch("b", 1, []int32{1, 2, 3}, []int32{3, 2, 1}, 1, 3),
			},
			skipped: []string{`a-0: topic "a" is protected`, `a-1: topic "a" is protected`, "b-2: beyond max_partitions 2"},
		},
		{
			name:    "every topic protected: nothing changes",
			snap:    shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, 1)}, "u": {part([]int32{2, 1}, []int32{1, 2}, 1)}}),
			req:     ShedRequest{Broker: 1, Protected: protect(".")},
			skipped: []string{`t-0: topic "t" is protected: it matches "."`, `u-0: topic "u" is protected: it matches "."`},
		},
		{
			name:    "a broker that is down but still a replica is accepted",
			snap:    shedCluster([]int32{2, 3}, map[string][]model.Partition{"t": {part([]int32{5, 2}, []int32{2}, 2)}}),
			req:     ShedRequest{Broker: 5},
			changes: []Change{ch("t", 0, []int32{5, 2}, []int32{2, 5}, 2, 2)},
		},
		{
			name: "sparse broker ids",
			snap: shedCluster([]int32{1001, 2002, 3003, 900000}, map[string][]model.Partition{"t": {
				part([]int32{900000, 2002, 3003}, []int32{900000, 2002, 3003}, 900000),
				part([]int32{900000, 2002, 1001}, []int32{900000, 2002, 1001}, 900000),
			}}),
			req: ShedRequest{Broker: 900000},
			changes: []Change{
				ch("t", 0, []int32{900000, 2002, 3003}, []int32{2002, 900000, 3003}, 900000, 2002),
				ch("t", 1, []int32{900000, 2002, 1001}, []int32{1001, 2002, 900000}, 900000, 1001),
			},
		},
		{
			name: "leads and heads nothing: empty plan",
			snap: shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, 1)}}),
			req:  ShedRequest{Broker: 4},
		},
		{
			name: "leads nothing among the selected topics: empty plan",
			snap: shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, 1)}, "u": {part([]int32{2, 3}, []int32{2, 3}, 2)}}),
			req:  ShedRequest{Broker: 1, Topics: []string{"u"}},
		},
		{
			name:        "unknown topic",
			snap:        shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, 1)}}),
			req:         ShedRequest{Broker: 1, Topics: []string{"t", "gone"}},
			rejectMatch: `topic "gone" does not exist (UNKNOWN_TOPIC_OR_PARTITION)`,
		},
		{
			name:        "topic not read",
			snap:        shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, 1)}}),
			req:         ShedRequest{Broker: 1, Topics: []string{"nope"}},
			rejectMatch: `topic "nope" was not read`,
		},
		{
			name:        "unknown broker",
			snap:        shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, 1)}}),
			req:         ShedRequest{Broker: 9},
			rejectMatch: "broker 9 is not a broker of this cluster",
		},
		{
			name:        "negative broker (not the -1 of leaderless partitions)",
			snap:        shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, -1)}}),
			req:         ShedRequest{Broker: -1},
			rejectMatch: "broker -1 is not a broker of this cluster",
		},
		{
			name:        "negative max_partitions",
			snap:        shedCluster(live, map[string][]model.Partition{"t": {part([]int32{1, 2, 3}, all, 1)}}),
			req:         ShedRequest{Broker: 1, MaxPartitions: -1},
			rejectMatch: "max_partitions -1 is negative",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := checkPlan(t, tc.snap, tc.rejectMatch, func() (Plan, error) { return Shed(tc.snap, tc.req) })
			if !ok {
				return
			}
			if !slices.EqualFunc(got.Changes, tc.changes, changeEqual) {
				t.Errorf("changes =\n%s\nwant\n%s", fmtChanges(got.Changes), fmtChanges(tc.changes))
			}
			if len(got.Noop) != 0 {
				t.Errorf("noop = %v, want none", got.Noop)
			}
			if !slices.Equal(got.Blocked, tc.blocked) {
				t.Errorf("blocked = %v, want %v", got.Blocked, tc.blocked)
			}
			var skipped []string
			for _, s := range got.Skipped {
				skipped = append(skipped, s.TopicPartition.String()+": "+s.Reason)
			}
			if len(skipped) != len(tc.skipped) {
				t.Fatalf("skipped = %q, want %q", skipped, tc.skipped)
			}
			for i := range skipped {
				if !strings.HasPrefix(skipped[i], tc.skipped[i]) {
					t.Errorf("skipped[%d] = %q, want prefix %q", i, skipped[i], tc.skipped[i])
				}
			}
			if tc.elections != nil && !slices.Equal(got.Elections(), tc.elections) {
				t.Errorf("elections = %v, want %v", got.Elections(), tc.elections)
			}
			if len(tc.changes) == 0 && len(tc.skipped) == 0 && len(tc.blocked) == 0 && !reflect.DeepEqual(got, Plan{}) {
				t.Errorf("plan = %+v, want an empty plan", got)
			}
		})
	}
}

// TestShedPerTopicExample is the example: balancing the cluster-wide counts only,
// the hot topic ends with 45/42/37 leaders on brokers 2/3/4, when 41/41/42 is possible with
// the same cluster-wide counts.
//
// Brokers 2, 3, 4 lead 16, 16 and 15 partitions (hot 15/12/7, cold 0/3/8, warm 1/1/0)
// and broker 1 leads 31 of cold and 90 of hot, each of which any of 2, 3, 4 can take.
// Cluster-wide only, the first cold one goes to broker 4 and the rest round robin from
// broker 2, 10/10/11 for cold and 30/30/30 for hot: 56 leaders each, hot 45/42/37, cold
// 10/13/19. With the same 56 each, hot 41/41/42 and cold 14/14/14 is the least square sum:
// cold's 14/14/14 is as even as it gets, hot's sorted 42/41/41 too, and with its 42 on
// broker 2 or 3 cold would have 13 there and 15 on broker 4 instead.
func TestShedPerTopicExample(t *testing.T) {
	all := []int32{1, 2, 3, 4}
	led := func(n int, b int32) []model.Partition { // replicas b and the others of 2, 3, 4
		var ps []model.Partition
		for range n {
			r := []int32{b}
			for _, x := range []int32{2, 3, 4} {
				if x != b {
					r = append(r, x)
				}
			}
			ps = append(ps, part(r, r, b))
		}
		return ps
	}
	shed1 := func(n int) []model.Partition { return led(n, 1) } // replicas 1, 2, 3, 4
	hot := slices.Concat(led(15, 2), led(12, 3), led(7, 4), shed1(90))
	cold := slices.Concat(led(3, 3), led(8, 4), shed1(31))
	warm := slices.Concat(led(1, 2), led(1, 3))
	s := shedCluster(all, map[string][]model.Partition{"hot": hot, "cold": cold, "warm": warm})
	req := ShedRequest{Broker: 1}

	old, err := shed(s, req, false)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := checkPlan(t, s, "", func() (Plan, error) { return Shed(s, req) })
	if !ok {
		return
	}
	checkShedRules(t, "example", s, req, got)
	for _, c := range []struct {
		name       string
		p          Plan
		hot, cold  []int
		clusterAll []int
	}{
		{"cluster-wide only", old, []int{45, 42, 37}, []int{10, 13, 19}, []int{56, 56, 56}},
		{"Shed", got, []int{41, 41, 42}, []int{14, 14, 14}, []int{56, 56, 56}},
	} {
		cluster, topics := shedCounts(s, 1, c.p)
		if !slices.Equal(cluster, c.clusterAll) || !slices.Equal(topics["hot"], c.hot) || !slices.Equal(topics["cold"], c.cold) {
			t.Errorf("%s: brokers 2, 3, 4 lead %v, hot %v, cold %v; want %v, %v, %v", c.name, cluster, topics["hot"], topics["cold"], c.clusterAll, c.hot, c.cold)
		}
	}
}

func fmtChanges(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %s %v→%v leader %d→%d\n", c.TopicPartition, c.ReplicasBefore, c.ReplicasAfter, c.LeaderBefore, c.LeaderAfter)
	}
	return b.String()
}

// TestShedRandom checks the rules of Shed on random small clusters, and that the leader
// counts it ends with are as even as a brute force over every choice can make them.
func TestShedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2026))
	optimal, hard, changes, protectedRuns, improved := 0, 0, 0, 0, 0
	for i := range 1000 {
		s, req := randomShedCase(r)
		name := fmt.Sprintf("case %d (broker %d, request %+v)", i, req.Broker, req)
		before := copySnapshot(s)
		got, err := Shed(s, req)
		if !reflect.DeepEqual(before, s) {
			t.Fatalf("%s: planning modified the snapshot", name)
		}
		if err != nil {
			var re *RejectError
			if errors.As(err, &re) && !isShedBroker(s, req.Broker) {
				continue
			}
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := Shed(s, req)
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("%s: two plans of the same input differ", name)
		}
		checkShedRules(t, name, s, req, got)
		if req.Protected == nil {
			none := req
			none.Protected = protect("^nothing-of-this-cluster$")
			if p, _ := Shed(s, none); !reflect.DeepEqual(p, got) {
				t.Fatalf("%s: a Protected that protects nothing changes the plan", name)
			}
		} else {
			protectedRuns++
		}
		// Renumbering brokers in the same order (sparse ids) gives the same plan.
		const scale = 1_000_003
		sparse, err := Shed(renumber(s, scale), renumberRequest(req, scale))
		if err != nil {
			t.Fatalf("%s: renumbered: %v", name, err)
		}
		if want := renumberPlan(got, scale); !reflect.DeepEqual(tpsOf(sparse.Changes), tpsOf(want.Changes)) ||
			!slices.EqualFunc(sparse.Changes, want.Changes, changeEqual) || !reflect.DeepEqual(sparse.Blocked, want.Blocked) ||
			!reflect.DeepEqual(tpsOfSkips(sparse.Skipped), tpsOfSkips(want.Skipped)) {
			t.Fatalf("%s: renumbered brokers give another plan:\n%s\nwant\n%s", name, fmtChanges(sparse.Changes), fmtChanges(want.Changes))
		}
		if checkShedVsClusterOnly(t, name, s, req, got) {
			improved++
		}
		changes += len(got.Changes)
		if n := checkShedOptimal(t, name, s, req, got); n > 0 {
			optimal++
			if n >= 3 {
				hard++
			}
		}
	}
	if optimal < 500 || hard < 100 || changes < 1000 || protectedRuns < 200 || improved < 10 {
		t.Errorf("only %d cases brute-forced (%d with 3 choices or more), %d changes, %d with a protected topic, %d balanced per topic better than cluster-wide only: the generator is too weak",
			optimal, hard, changes, protectedRuns, improved)
	}
	t.Logf("%d cases compared with the brute force (%d with 3 choices or more), %d changes, %d balanced per topic better than cluster-wide only", optimal, hard, changes, improved)
}

// TestShedPerTopicRandom checks the rules of Shed on random clusters with more topics and
// partitions than TestShedRandom's, so that the per-topic balance has more to do, against
// the planner that balances the cluster-wide counts only (as good cluster-wide, never
// worse per topic) and, on the small ones, against the brute force.
func TestShedPerTopicRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 2026))
	improved, changes, brute, bruteImproved := 0, 0, 0, 0
	for i := range 1000 {
		var (
			s   *model.Snapshot
			req ShedRequest
		)
		small := i%2 == 0
		if small {
			s, req = randomShedCluster(r, 3+r.IntN(2), 2+r.IntN(2), 4)
		} else {
			s, req = randomShedCluster(r, 3+r.IntN(6), 2+r.IntN(8), 5+r.IntN(30))
		}
		name := fmt.Sprintf("case %d (broker %d, request %+v)", i, req.Broker, req)
		got, err := Shed(s, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if again, _ := Shed(s, req); !reflect.DeepEqual(got, again) {
			t.Fatalf("%s: two plans of the same input differ", name)
		}
		checkShedRules(t, name, s, req, got)
		better := checkShedVsClusterOnly(t, name, s, req, got)
		if better {
			improved++
		}
		changes += len(got.Changes)
		if small && checkShedOptimal(t, name, s, req, got) > 0 {
			brute++
			if better {
				bruteImproved++
			}
		}
	}
	if improved < 250 || changes < 10000 || brute < 300 || bruteImproved < 60 {
		t.Errorf("only %d cases balanced per topic better than cluster-wide only, %d changes, %d brute-forced (%d better): the generator is too weak",
			improved, changes, brute, bruteImproved)
	}
	t.Logf("%d of 1000 cases balanced per topic better than cluster-wide only, %d changes; %d brute-forced (%d better)", improved, changes, brute, bruteImproved)
}

// randomShedCluster is a cluster of live brokers 1..nb with the given topics and
// partitions each (replication factor 2 to 4, leadership skewed to broker 1, some replicas
// out of sync, a few partitions under reassignment) and a request to shed broker 1.
func randomShedCluster(r *rand.Rand, nb, topics, partitions int) (*model.Snapshot, ShedRequest) {
	s := &model.Snapshot{Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{}, Missing: map[string]error{}}
	for id := int32(1); id <= int32(nb); id++ {
		s.Brokers[id] = model.Broker{ID: id}
	}
	for ti := range topics {
		name := fmt.Sprintf("t%02d", ti)
		ps := make([]model.Partition, 1+r.IntN(partitions))
		for pi := range ps {
			p := model.Partition{TopicPartition: stp(name, int32(pi))}
			for _, k := range r.Perm(nb)[:min(nb, 2+r.IntN(3))] {
				p.Replicas = append(p.Replicas, int32(k+1))
			}
			for k, id := range p.Replicas {
				if k == 0 || r.IntN(8) > 0 {
					p.ISR = append(p.ISR, id)
				}
			}
			p.Leader = p.ISR[0]
			if p.InSync(1) && r.IntN(3) > 0 {
				p.Leader = 1
			}
			if r.IntN(40) == 0 {
				p.Adding = []int32{int32(1 + r.IntN(nb))}
			}
			ps[pi] = p
		}
		s.Topics[name] = ps
	}
	req := ShedRequest{Broker: 1, DemoteToEnd: r.IntN(2) == 0}
	if r.IntN(4) == 0 {
		req.Avoid = []int32{int32(2 + r.IntN(nb-1))}
	}
	if r.IntN(4) == 0 {
		req.MaxPartitions = 1 + r.IntN(40)
	}
	return s, req
}

func randomShedCase(r *rand.Rand) (*model.Snapshot, ShedRequest) {
	nb := 2 + r.IntN(4) // broker ids 1..nb, some of them down
	b := int32(1 + r.IntN(nb))
	s := &model.Snapshot{Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{}, Missing: map[string]error{}}
	for id := int32(1); id <= int32(nb); id++ {
		if r.IntN(8) > 0 {
			s.Brokers[id] = model.Broker{ID: id}
		}
	}
	var names []string
	for ti := range 1 + r.IntN(3) {
		name := fmt.Sprintf("t%d", ti)
		names = append(names, name)
		ps := make([]model.Partition, 1+r.IntN(6))
		for pi := range ps {
			p := model.Partition{TopicPartition: stp(name, int32(pi)), Leader: -1}
			for _, k := range r.Perm(nb)[:1+r.IntN(min(nb, 4))] {
				p.Replicas = append(p.Replicas, int32(k+1))
			}
			if r.IntN(3) == 0 && !slices.Contains(p.Replicas, b) { // make b a replica more often
				p.Replicas[r.IntN(len(p.Replicas))] = b
			}
			for _, id := range p.Replicas {
				if r.IntN(5) > 0 {
					p.ISR = append(p.ISR, id)
				}
			}
			if len(p.ISR) > 0 && r.IntN(8) > 0 {
				p.Leader = p.ISR[r.IntN(len(p.ISR))]
				if p.InSync(b) && r.IntN(2) == 0 {
					p.Leader = b
				}
			}
			if r.IntN(10) == 0 {
				p.Adding = []int32{int32(1 + r.IntN(nb))}
			}
			ps[pi] = p
		}
		s.Topics[name] = ps
	}
	req := ShedRequest{Broker: b, DemoteToEnd: r.IntN(2) == 0, WaitBlocked: r.IntN(2) == 0}
	if r.IntN(4) == 0 {
		req.Topics = []string{names[r.IntN(len(names))]}
	}
	if r.IntN(4) == 0 {
		req.ExcludeTopics = []string{names[r.IntN(len(names))]}
	}
	if r.IntN(4) == 0 {
		req.MaxPartitions = 1 + r.IntN(4)
	}
	for id := range int32(nb) {
		if r.IntN(5) == 0 {
			req.Avoid = append(req.Avoid, id+1)
		}
	}
	if r.IntN(3) == 0 {
		req.Protected = protect("^" + names[r.IntN(len(names))] + "$")
	}
	return s, req
}

func renumberID(id, scale int32) int32 {
	if id < 0 {
		return id
	}
	return id * scale
}

func renumberIDs(ids []int32, scale int32) []int32 {
	if ids == nil {
		return nil
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = renumberID(id, scale)
	}
	return out
}

// renumber returns a copy of s with every broker id multiplied by scale (same order).
func renumber(s *model.Snapshot, scale int32) *model.Snapshot {
	c := copySnapshot(s)
	c.Brokers = map[int32]model.Broker{}
	for id, b := range s.Brokers {
		b.ID = renumberID(id, scale)
		c.Brokers[b.ID] = b
	}
	for _, ps := range c.Topics {
		for i := range ps {
			p := &ps[i]
			p.Replicas, p.ISR, p.Offline = renumberIDs(p.Replicas, scale), renumberIDs(p.ISR, scale), renumberIDs(p.Offline, scale)
			p.Adding, p.Removing, p.Leader = renumberIDs(p.Adding, scale), renumberIDs(p.Removing, scale), renumberID(p.Leader, scale)
		}
	}
	return c
}

func renumberRequest(req ShedRequest, scale int32) ShedRequest {
	req.Broker, req.Avoid = renumberID(req.Broker, scale), renumberIDs(req.Avoid, scale)
	return req
}

func renumberPlan(p Plan, scale int32) Plan {
	out := p
	out.Changes = nil
	for _, c := range p.Changes {
		c.ReplicasBefore, c.ReplicasAfter = renumberIDs(c.ReplicasBefore, scale), renumberIDs(c.ReplicasAfter, scale)
		c.LeaderBefore, c.LeaderAfter = renumberID(c.LeaderBefore, scale), renumberID(c.LeaderAfter, scale)
		out.Changes = append(out.Changes, c)
	}
	return out
}

func isShedBroker(s *model.Snapshot, b int32) bool {
	if _, ok := s.Brokers[b]; ok {
		return true
	}
	for _, ps := range s.Topics {
		for _, p := range ps {
			if p.Leader == b || slices.Contains(p.Replicas, b) {
				return true
			}
		}
	}
	return false
}

// shedCandidates restates the candidate rule: in the ISR and the AR, not b, live; without
// the avoided brokers unless they are all there is. It returns both lists, ascending.
func shedCandidates(s *model.Snapshot, p model.Partition, req ShedRequest) (all, eligible []int32) {
	for _, r := range p.Replicas {
		if _, live := s.Brokers[r]; r != req.Broker && live && p.InSync(r) && !slices.Contains(all, r) {
			all = append(all, r)
		}
	}
	slices.Sort(all)
	for _, r := range all {
		if !slices.Contains(req.Avoid, r) {
			eligible = append(eligible, r)
		}
	}
	if len(eligible) == 0 {
		eligible = all
	}
	return all, eligible
}

// shedSelected lists the selected partitions that b leads or heads, in (topic, partition) order.
func shedSelected(s *model.Snapshot, req ShedRequest) []model.Partition {
	var out []model.Partition
	for name, ps := range s.Topics {
		if len(req.Topics) > 0 && !slices.Contains(req.Topics, name) || slices.Contains(req.ExcludeTopics, name) {
			continue
		}
		for _, p := range ps {
			if p.Leader == req.Broker || len(p.Replicas) > 0 && p.Replicas[0] == req.Broker {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b model.Partition) int { return compareTP(a.TopicPartition, b.TopicPartition) })
	return out
}

func checkShedRules(t *testing.T, name string, s *model.Snapshot, req ShedRequest, got Plan) {
	t.Helper()
	b := req.Broker
	changes := map[model.TopicPartition]Change{}
	for _, c := range got.Changes {
		changes[c.TopicPartition] = c
	}
	skips := map[model.TopicPartition]string{}
	codes := map[model.TopicPartition]SkipCode{}
	for _, sk := range got.Skipped {
		skips[sk.TopicPartition] = sk.Reason
		codes[sk.TopicPartition] = sk.Code
	}
	for _, list := range [][]model.TopicPartition{tpsOf(got.Changes), tpsOfSkips(got.Skipped), got.Blocked} {
		if !slices.IsSortedFunc(list, compareTP) || len(slices.CompactFunc(slices.Clone(list), func(a, b model.TopicPartition) bool { return a == b })) != len(list) {
			t.Errorf("%s: %v is not sorted by topic, partition without repeats", name, list)
		}
	}
	seen, changeable := 0, 0
	for _, p := range shedSelected(s, req) {
		seen++
		tp := p.TopicPartition
		c, changed := changes[tp]
		reason, skipped := skips[tp]
		blocked := slices.Contains(got.Blocked, tp)
		if n := btoi(changed) + btoi(skipped) + btoi(blocked); n != 1 {
			t.Errorf("%s: %s is in %d of changes, skipped and blocked", name, tp, n)
			continue
		}
		all, eligible := shedCandidates(s, p, req)
		_, protected := req.Protected.match(tp.Topic)
		switch {
		case p.Reassigning() && protected:
			if codes[tp] != SkipProtected {
				t.Errorf("%s: %s protected and under reassignment: blocked %v, skipped %q (%s), want skipped protected", name, tp, blocked, reason, codes[tp])
			}
			continue
		case p.Reassigning():
			if req.WaitBlocked && !blocked || !req.WaitBlocked && !strings.HasPrefix(reason, "under reassignment") {
				t.Errorf("%s: %s under reassignment: blocked %v, skipped %q", name, tp, blocked, reason)
			}
			continue
		case len(all) == 0:
			if !strings.HasPrefix(reason, "no in-sync replica other than broker") && !strings.HasPrefix(reason, "no live in-sync replica other than broker") {
				t.Errorf("%s: %s has no candidate, got reason %q (changed %v)", name, tp, reason, changed)
			}
			continue
		case protected:
			if codes[tp] != SkipProtected {
				t.Errorf("%s: %s is protected: changed %v, skipped %q (%s), want skipped protected", name, tp, changed, reason, codes[tp])
			}
			continue
		}
		if codes[tp] == SkipProtected {
			t.Errorf("%s: %s skipped as protected, but it is not", name, tp)
		}
		changeable++
		if !changed {
			if req.MaxPartitions == 0 || changeable <= req.MaxPartitions || reason != fmt.Sprintf("beyond max_partitions %d", req.MaxPartitions) {
				t.Errorf("%s: %s not changed (skipped %q, changeable #%d)", name, tp, reason, changeable)
			}
			continue
		}
		if req.MaxPartitions > 0 && changeable > req.MaxPartitions {
			t.Errorf("%s: %s changed beyond max_partitions", name, tp)
		}
		if !slices.Equal(c.ReplicasBefore, p.Replicas) || c.LeaderBefore != p.Leader {
			t.Errorf("%s: %s before = %v leader %d, snapshot says %v leader %d", name, tp, c.ReplicasBefore, c.LeaderBefore, p.Replicas, p.Leader)
		}
		to := c.LeaderAfter
		keep := p.Leader != b && slices.Contains(all, p.Leader)
		switch {
		case keep && to != p.Leader:
			t.Errorf("%s: %s: the leader %d is a candidate and should stay, got %d", name, tp, p.Leader, to)
		case !keep && !slices.Contains(eligible, to):
			t.Errorf("%s: %s: new leader %d is not among the eligible %v (all %v, avoid %v)", name, tp, to, eligible, all, req.Avoid)
		}
		if to == b || !p.InSync(to) {
			t.Errorf("%s: %s: new leader %d is b or not in sync %v", name, tp, to, p.ISR)
		}
		want := slices.Clone(p.Replicas)
		j := slices.Index(want, to)
		want[0], want[j] = want[j], want[0]
		if req.DemoteToEnd {
			if k := slices.Index(want, b); k >= 0 {
				want = append(slices.Delete(want, k, k+1), b)
			}
		}
		if !slices.Equal(c.ReplicasAfter, want) {
			t.Errorf("%s: %s: after = %v, want %v", name, tp, c.ReplicasAfter, want)
		}
		x, y := slices.Clone(c.ReplicasBefore), slices.Clone(c.ReplicasAfter)
		slices.Sort(x)
		slices.Sort(y)
		if !slices.Equal(x, y) || c.ReplicasAfter[0] != to {
			t.Errorf("%s: %s: %v is not a permutation of %v headed by %d", name, tp, c.ReplicasAfter, c.ReplicasBefore, to)
		}
	}
	if n := len(got.Changes) + len(got.Skipped) + len(got.Blocked); n != seen {
		t.Errorf("%s: plan lists %d partitions, %d are led or headed by %d", name, n, seen, b)
	}
}

// checkShedVsClusterOnly compares the plan with the planner that balances the cluster-wide
// counts only (shed without perTopic): the same partitions changed, skipped and blocked;
// exactly as good cluster-wide (the same sorted counts); per topic never worse, and
// different only when better. It reports whether the plan is better per topic.
func checkShedVsClusterOnly(t *testing.T, name string, s *model.Snapshot, req ShedRequest, got Plan) bool {
	t.Helper()
	old, err := shed(s, req, false)
	if err != nil {
		t.Fatalf("%s: cluster-wide only: %v", name, err)
	}
	if !slices.Equal(tpsOf(got.Changes), tpsOf(old.Changes)) || !reflect.DeepEqual(got.Skipped, old.Skipped) || !reflect.DeepEqual(got.Blocked, old.Blocked) {
		t.Errorf("%s: another set of partitions than cluster-wide only:\n%s\nwant\n%s", name, fmtChanges(got.Changes), fmtChanges(old.Changes))
	}
	c, tc := shedCounts(s, req.Broker, got)
	oc, otc := shedCounts(s, req.Broker, old)
	if !slices.Equal(sortedDesc(c), sortedDesc(oc)) {
		t.Errorf("%s: cluster-wide counts %v (sorted), cluster-wide only %v", name, sortedDesc(c), sortedDesc(oc))
	}
	sq, osq := topicSquares(tc), topicSquares(otc)
	switch {
	case sq > osq:
		t.Errorf("%s: per-topic square sum %d, cluster-wide only %d", name, sq, osq)
	case sq == osq && !reflect.DeepEqual(got, old):
		t.Errorf("%s: as good per topic as cluster-wide only, yet another plan:\n%s\nwant\n%s", name, fmtChanges(got.Changes), fmtChanges(old.Changes))
	}
	return sq < osq
}

// checkShedOptimal compares the leader counts after the plan with the best that any choice
// of eligible candidates gives (brute force), when that is small enough to enumerate: the
// cluster-wide counts first, then, among the choices as good for those, the per-topic
// square sum. It returns how many choices it compared (0: none).
func checkShedOptimal(t *testing.T, name string, s *model.Snapshot, req ShedRequest, got Plan) int {
	t.Helper()
	brokers := shedOthers(s, req.Broker)
	pos := func(id int32) int { return slices.Index(brokers, id) }
	planned, plannedT := shedCounts(s, req.Broker, got)
	base := slices.Clone(planned)
	topicBase := map[string][]int{}
	for name, c := range plannedT {
		topicBase[name] = slices.Clone(c)
	}
	var (
		sets    [][]int
		topicOf []string
	)
	size := 1
	for _, c := range got.Changes {
		p, _ := s.Partition(c.TopicPartition)
		all, eligible := shedCandidates(s, p, req)
		if p.Leader != req.Broker && slices.Contains(all, p.Leader) {
			continue // the leader stays: no choice
		}
		var set []int
		for _, id := range eligible {
			set = append(set, pos(id))
		}
		sets = append(sets, set)
		topicOf = append(topicOf, c.Topic)
		base[pos(c.LeaderAfter)]--
		topicBase[c.Topic][pos(c.LeaderAfter)]--
		size *= len(set)
	}
	if len(sets) == 0 || size > 50_000 {
		return 0
	}
	names := slices.Sorted(maps.Keys(topicBase))
	tb := make([][]int, len(names))
	for i, n := range names {
		tb[i] = topicBase[n]
	}
	ti := make([]int, len(topicOf))
	for i, n := range topicOf {
		ti[i] = slices.Index(names, n)
	}
	best, bestS := bruteTopics(base, tb, sets, ti)
	if got := sortedDesc(planned); slices.Compare(got, best) != 0 {
		t.Errorf("%s: leader counts %v (sorted), the best is %v", name, got, best)
	}
	_, bestSpread := bruteBalance(base, sets)
	if sp := spread(planned); sp != bestSpread {
		t.Errorf("%s: leader count spread %d, the best is %d", name, sp, bestSpread)
	}
	if sq := topicSquares(plannedT); sq != bestS {
		t.Errorf("%s: per-topic square sum %d (%v), the best is %d", name, sq, plannedT, bestS)
	}
	return len(sets)
}

// shedOthers lists the live brokers other than b, ascending.
func shedOthers(s *model.Snapshot, b int32) []int32 {
	var brokers []int32
	for id := range s.Brokers {
		if id != b {
			brokers = append(brokers, id)
		}
	}
	slices.Sort(brokers)
	return brokers
}

// shedCounts counts the leaders of the live brokers other than b (shedOthers) once the
// plan is made, in the whole cluster and in each topic.
func shedCounts(s *model.Snapshot, b int32, p Plan) (cluster []int, topics map[string][]int) {
	brokers := shedOthers(s, b)
	after := map[model.TopicPartition]int32{}
	for _, c := range p.Changes {
		after[c.TopicPartition] = c.LeaderAfter
	}
	cluster, topics = make([]int, len(brokers)), map[string][]int{}
	for name, ps := range s.Topics {
		tc := make([]int, len(brokers))
		for _, part := range ps {
			l, ok := after[part.TopicPartition]
			if !ok {
				l = part.Leader
			}
			if k := slices.Index(brokers, l); k >= 0 {
				cluster[k]++
				tc[k]++
			}
		}
		topics[name] = tc
	}
	return cluster, topics
}

// topicSquares is the per-topic square sum of counts: Σ n(t,b)².
func topicSquares(topics map[string][]int) int {
	sum := 0
	for _, c := range topics {
		for _, n := range c {
			sum += n * n
		}
	}
	return sum
}

// bruteBalance tries every assignment of items to their candidates and returns the
// smallest sorted (largest first) load vector and the smallest max-min spread.
func bruteBalance(base []int, sets [][]int) (best []int, bestSpread int) {
	load := slices.Clone(base)
	bestSpread = -1
	var walk func(i int)
	walk = func(i int) {
		if i == len(sets) {
			if v := sortedDesc(load); best == nil || slices.Compare(v, best) < 0 {
				best = v
			}
			if sp := spread(load); bestSpread < 0 || sp < bestSpread {
				bestSpread = sp
			}
			return
		}
		for _, k := range sets[i] {
			load[k]++
			walk(i + 1)
			load[k]--
		}
	}
	walk(0)
	return best, bestSpread
}

func sortedDesc(v []int) []int {
	out := slices.Clone(v)
	slices.SortFunc(out, func(a, b int) int { return cmp.Compare(b, a) })
	return out
}

func spread(v []int) int {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v) - slices.Min(v)
}

// TestBalanceOptimal checks balance alone on arbitrary candidate sets and starting loads,
// harder than what clusters produce, against the brute force.
func TestBalanceOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 1))
	for i := range 1500 {
		nb := 2 + r.IntN(4)
		load := make([]int, nb)
		for k := range load {
			load[k] = r.IntN(4)
		}
		cands := make([][]int32, 1+r.IntN(7))
		sets := make([][]int, len(cands))
		for j := range cands {
			for len(cands[j]) == 0 {
				for k := range nb {
					if r.IntN(3) == 0 {
						cands[j] = append(cands[j], int32(k))
						sets[j] = append(sets[j], k)
					}
				}
			}
		}
		start := slices.Clone(load)
		choice := balance(load, cands)
		check := slices.Clone(start)
		for j, c := range choice {
			if !slices.Contains(cands[j], c) {
				t.Fatalf("case %d: item %d got %d, not among %v", i, j, c, cands[j])
			}
			check[c]++
		}
		if !slices.Equal(check, load) {
			t.Fatalf("case %d: loads %v do not match the choices (%v)", i, load, check)
		}
		best, bestSpread := bruteBalance(start, sets)
		if got := sortedDesc(load); slices.Compare(got, best) != 0 || spread(load) != bestSpread {
			t.Fatalf("case %d: start %v, candidates %v: loads %v (spread %d), best %v (spread %d)", i, start, cands, load, spread(load), best, bestSpread)
		}
	}
}

func tpsOf(cs []Change) []model.TopicPartition {
	out := make([]model.TopicPartition, len(cs))
	for i, c := range cs {
		out[i] = c.TopicPartition
	}
	return out
}

func tpsOfSkips(ss []Skip) []model.TopicPartition {
	out := make([]model.TopicPartition, len(ss))
	for i, s := range ss {
		out[i] = s.TopicPartition
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// goldenCluster is a small realistic cluster: brokers 1–4 on racks r1 (1, 2) and r2 (3, 4),
// three topics placed rack-aware round robin, leadership skewed to broker 1, with an ISR
// that shrank, a partition only broker 1 has in sync, one under reassignment, and two that
// broker 1 heads without leading.
func goldenCluster() *model.Snapshot {
	s := &model.Snapshot{Controller: 2, Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{}, Missing: map[string]error{}}
	for _, b := range []model.Broker{{ID: 1, Rack: "r1"}, {ID: 2, Rack: "r1"}, {ID: 3, Rack: "r2"}, {ID: 4, Rack: "r2"}} {
		s.Brokers[b.ID] = b
	}
	seq := []int32{1, 3, 2, 4} // racks alternate
	for _, t := range []struct {
		name       string
		n, rf, off int
	}{{"orders", 12, 3, 0}, {"payments", 10, 3, 1}, {"audit", 8, 2, 2}} {
		ps := make([]model.Partition, t.n)
		for i := range ps {
			p := model.Partition{TopicPartition: stp(t.name, int32(i))}
			for k := range t.rf {
				p.Replicas = append(p.Replicas, seq[(i+t.off+k)%len(seq)])
			}
			p.ISR = slices.Clone(p.Replicas)
			p.Leader = p.Replicas[0]
			if slices.Contains(p.Replicas, 1) && i%4 != 3 {
				p.Leader = 1
			}
			ps[i] = p
		}
		s.Topics[t.name] = ps
	}
	o, pay, a := s.Topics["orders"], s.Topics["payments"], s.Topics["audit"]
	o[4].ISR = o[4].ISR[:2]                      // shrank
	pay[3].ISR = []int32{1}                      // only broker 1 in sync
	a[5].Adding = []int32{3}                     // under reassignment
	o[8].Leader = 3                              // headed by 1, led by 3
	pay[7].ISR, pay[7].Leader = []int32{3, 2}, 2 // headed by 1 (out of sync), led by 2
	return s
}

type goldenShed struct {
	Request struct {
		Broker        int32    `json:"broker"`
		Topics        []string `json:"topics,omitempty"`
		ExcludeTopics []string `json:"exclude_topics,omitempty"`
		MaxPartitions int      `json:"max_partitions,omitempty"`
		DemoteToEnd   bool     `json:"demote_to_end,omitempty"`
		Avoid         []int32  `json:"avoid,omitempty"`
		WaitBlocked   bool     `json:"wait_blocked,omitempty"`
		Protected     []string `json:"protected,omitempty"` // RE2 patterns
	} `json:"request"`
	// Leaders counts the partitions each broker leads, before and after the plan.
	Leaders []struct {
		Broker int32 `json:"broker"`
		Before int   `json:"before"`
		After  int   `json:"after"`
	} `json:"leaders"`
	Elections []model.TopicPartition `json:"elections"`
	Plan      Plan                   `json:"plan"`
}

func TestShedGolden(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       ShedRequest
		protected []string
	}{
		{"shed-basic", ShedRequest{Broker: 1}, nil},
		{"shed-demote-avoid-cap", ShedRequest{Broker: 1, ExcludeTopics: []string{"audit"}, MaxPartitions: 8, DemoteToEnd: true, Avoid: []int32{3}}, nil},
		{"shed-topics-wait", ShedRequest{Broker: 1, Topics: []string{"orders", "audit"}, WaitBlocked: true, DemoteToEnd: true}, nil},
		// payments is protected: its leaders stay; audit's partition under reassignment is
		// protected too, so it is skipped rather than waited for.
		{"shed-protected", ShedRequest{Broker: 1, WaitBlocked: true, DemoteToEnd: true}, []string{"^pay", "^audit$"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := goldenCluster()
			if tc.protected != nil {
				tc.req.Protected = protect(tc.protected...)
			}
			p, err := Shed(s, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var g goldenShed
			g.Request.Broker, g.Request.Topics, g.Request.ExcludeTopics = tc.req.Broker, tc.req.Topics, tc.req.ExcludeTopics
			g.Request.MaxPartitions, g.Request.DemoteToEnd, g.Request.Avoid, g.Request.WaitBlocked = tc.req.MaxPartitions, tc.req.DemoteToEnd, tc.req.Avoid, tc.req.WaitBlocked
			g.Request.Protected = tc.protected
			after := map[model.TopicPartition]int32{}
			for _, c := range p.Changes {
				after[c.TopicPartition] = c.LeaderAfter
			}
			for _, id := range []int32{1, 2, 3, 4} {
				var row struct {
					Broker int32 `json:"broker"`
					Before int   `json:"before"`
					After  int   `json:"after"`
				}
				row.Broker = id
				for _, ps := range s.Topics {
					for _, part := range ps {
						l, ok := after[part.TopicPartition]
						if !ok {
							l = part.Leader
						}
						row.Before += btoi(part.Leader == id)
						row.After += btoi(l == id)
					}
				}
				g.Leaders = append(g.Leaders, row)
			}
			g.Elections, g.Plan = p.Elections(), p
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tc.name+".golden.json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/plan -run Golden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("plan differs from %s (rerun with -update if intended):\n%s", path, got)
			}
		})
	}
}
