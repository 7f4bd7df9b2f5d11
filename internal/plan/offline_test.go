package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
)

func TestOffline(t *testing.T) {
	offline := func(replicas, isr []int32) model.Partition { return part(replicas, isr, -1) }
	// Log end offsets by broker; a broker absent cannot be read.
	leos := func(m map[int32]int64) func(int32, model.TopicPartition) (int64, error) {
		return func(b int32, _ model.TopicPartition) (int64, error) {
			if o, ok := m[b]; ok {
				return o, nil
			}
			return 0, errors.New("connection refused")
		}
	}
	to := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name    string
		brokers map[int32]string
		topics  map[string][]model.Partition
		req     OfflineRequest
		changes []Change // LeaderAfter, LostOffsets and the replicas are compared
		skips   []string // "topic-partition code: reason prefix"
		refused int
		noop    int
		reject  string
	}{
		{
			name:    "clean: the first live replica of the last ISR (KRaft)",
			brokers: without(norack(4), 1, 2),
			topics:  map[string][]model.Partition{"t": {offline(ids(1, 3, 4), ids(1, 4)), insync(3, 4)}},
			req:     OfflineRequest{Topic: "t"},
			changes: []Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0}, LeaderAfter: 4}},
			noop:    1,
		},
		{
			name:    "clean on a ZooKeeper controller only when the live in-sync replica is first",
			brokers: without(norack(4), 1),
			topics:  map[string][]model.Partition{"t": {offline(ids(2, 1), ids(1, 2)), offline(ids(1, 2), ids(1, 2))}},
			req:     OfflineRequest{ZKController: true},
			changes: []Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0}, LeaderAfter: 2}},
			skips:   []string{"t-1 clean_election_not_possible: in-sync replica 2 is alive, but a ZooKeeper controller's preferred election elects only the first replica (1, replicas [1 2])"},
		},
		{
			name:    "unclean not allowed: refused with the last ISR, the candidates and their log end offsets",
			brokers: without(norack(4), 3),
			topics:  map[string][]model.Partition{"t": {offline(ids(3, 4, 1), ids(3))}},
			req:     OfflineRequest{LogEnd: leos(map[int32]int64{4: 10})},
			skips:   []string{"t-0 unclean_not_allowed: last ISR [3] (none alive), live candidates 4 (log end offset 10), 1 (log end offset unknown: connection refused)"},
			refused: 1,
		},
		{
			name:    "unclean: the first live replica, the offsets from its log end",
			brokers: without(norack(4), 3),
			topics:  map[string][]model.Partition{"t": {offline(ids(3, 4, 1), ids(3))}},
			req:     OfflineRequest{Unclean: true, LogEnd: leos(map[int32]int64{4: 10, 1: 7})},
			changes: []Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0}, LeaderAfter: 4, LostOffsets: &events.OffsetRange{From: 10}}},
		},
		{
			name:    "unclean: the last ISR's log end when it can be read (a fenced broker that answers)",
			brokers: without(norack(4), 3),
			topics:  map[string][]model.Partition{"t": {offline(ids(4, 3), ids(3))}},
			req:     OfflineRequest{Unclean: true, LogEnd: leos(map[int32]int64{4: 10, 3: 25})},
			changes: []Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0}, LeaderAfter: 4, LostOffsets: &events.OffsetRange{From: 10, To: to(25)}}},
		},
		{
			name:    "unclean, but the candidate's offsets cannot be read: not elected",
			brokers: without(norack(4), 3),
			topics:  map[string][]model.Partition{"t": {offline(ids(4, 3), ids(3))}},
			req:     OfflineRequest{Unclean: true, LogEnd: leos(nil)},
			skips:   []string{"t-0 unclean_not_allowed: last ISR [3] (none alive), live candidates 4 (log end offset unknown: connection refused): the offsets at risk cannot be known"},
			refused: 1,
		},
		{
			name:    "unclean on a cluster that cannot",
			brokers: without(norack(4), 3),
			topics:  map[string][]model.Partition{"t": {offline(ids(4, 3), ids(3))}},
			req:     OfflineRequest{Unclean: true, UncleanUnsupported: "needs Kafka 2.4+", LogEnd: leos(map[int32]int64{4: 3})},
			skips:   []string{"t-0 unclean_not_allowed: last ISR [3] (none alive), live candidates 4 (log end offset 3); needs Kafka 2.4+"},
			refused: 1,
		},
		{
			name:    "the last ISR from the state znode when the metadata shows none (Kafka before 2.4)",
			brokers: without(norack(3), 2),
			topics:  map[string][]model.Partition{"t": {offline(ids(2, 3), nil)}},
			req: OfflineRequest{LogEnd: leos(map[int32]int64{3: 5}),
				LastISR: func(model.TopicPartition) ([]int32, error) { return ids(2), nil }},
			skips:   []string{"t-0 unclean_not_allowed: last ISR [2] (none alive), live candidates 3 (log end offset 5)"},
			refused: 1,
		},
		{
			name:    "the last ISR cannot be read: nothing is known to be clean",
			brokers: without(norack(3), 2),
			topics:  map[string][]model.Partition{"t": {offline(ids(2, 3), nil)}},
			req: OfflineRequest{Unclean: true, LogEnd: leos(map[int32]int64{3: 5}),
				LastISR: func(model.TopicPartition) ([]int32, error) { return nil, errors.New("no zookeeper") }},
			skips:   []string{"t-0 unclean_not_allowed: the last ISR is unknown (no zookeeper)"},
			refused: 1,
		},
		{
			name:    "no live replica; protected; the others filtered out",
			brokers: without(norack(4), 1, 2),
			topics: map[string][]model.Partition{"t": {offline(ids(1, 2), ids(1)), offline(ids(3, 1), ids(3))},
				"p": {offline(ids(3, 1), ids(3))}},
			req:     OfflineRequest{Partitions: nil, Protected: func(topic string) (string, bool) { return "^p$", topic == "p" }},
			changes: []Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 1}, LeaderAfter: 3}},
			skips: []string{`p-0 protected: topic "p" is protected`,
				"t-0 no_live_replica: no replica is alive (replicas [1 2], last ISR [1])"},
		},
		{name: "no such topic", brokers: norack(2), topics: map[string][]model.Partition{}, req: OfflineRequest{Topic: "x"}, reject: `topic "x" does not exist`},
		{name: "no such partition", brokers: norack(2), topics: map[string][]model.Partition{"t": {insync(1, 2)}}, req: OfflineRequest{Topic: "t", Partitions: ids(1)}, reject: `topic "t" has no partition 1 (it has 1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rfSnap(tc.brokers, tc.topics)
			got, err := Offline(s, tc.req)
			if tc.reject != "" {
				var re *RejectError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.reject) {
					t.Fatalf("err %v, want a rejection %q", err, tc.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Changes) != len(tc.changes) {
				t.Fatalf("changes %+v, want %+v", got.Changes, tc.changes)
			}
			for i, w := range tc.changes {
				g := got.Changes[i]
				p, _ := s.Partition(g.TopicPartition)
				if g.TopicPartition != w.TopicPartition || g.LeaderBefore != -1 || g.LeaderAfter != w.LeaderAfter ||
					!slices.Equal(g.ReplicasBefore, p.Replicas) || !slices.Equal(g.ReplicasAfter, p.Replicas) || !sameRange(g.LostOffsets, w.LostOffsets) || g.Note == "" {
					t.Errorf("change %+v (lost %v), want %+v (lost %v), replicas kept, a note", g, g.LostOffsets, w, w.LostOffsets)
				}
			}
			if len(got.Skipped) != len(tc.skips) {
				t.Fatalf("skipped %+v, want %q", got.Skipped, tc.skips)
			}
			for i, w := range tc.skips {
				if s := got.Skipped[i].TopicPartition.String() + " " + string(got.Skipped[i].Code) + ": " + got.Skipped[i].Reason; !strings.HasPrefix(s, w) {
					t.Errorf("skip %q, want prefix %q", s, w)
				}
			}
			if len(got.Refused) != tc.refused || len(got.Noop) != tc.noop {
				t.Errorf("refused %d, noop %d; want %d, %d", len(got.Refused), len(got.Noop), tc.refused, tc.noop)
			}
		})
	}
}

func sameRange(a, b *events.OffsetRange) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.From != b.From:
		return false
	case a.To == nil || b.To == nil:
		return a.To == b.To
	}
	return *a.To == *b.To
}
