package kafka

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestLimitsDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want Limits
	}{
		{Limits{}, Limits{Partitions: DefaultBatchPartitions, ZnodeBytes: DefaultZnodeBytes}},
		{Limits{Partitions: -1, ZnodeBytes: -1}, Limits{Partitions: DefaultBatchPartitions, ZnodeBytes: DefaultZnodeBytes}},
		{Limits{Partitions: 5, ZnodeBytes: 300}, Limits{Partitions: 5, ZnodeBytes: 300}},
	} {
		if got := tc.in.withDefaults(); got != tc.want {
			t.Errorf("%+v.withDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	// Under a KRaft controller's cap of 10,000 records per request, and under ZooKeeper's
	// default jute.maxbuffer.
	if DefaultBatchPartitions > 10000 || DefaultZnodeBytes >= 0xfffff {
		t.Errorf("defaults %d partitions, %d bytes: above what a controller accepts", DefaultBatchPartitions, DefaultZnodeBytes)
	}
}

func tpsN(topic string, n int) []TopicPartition {
	out := make([]TopicPartition, n)
	for i := range out {
		out[i] = TopicPartition{Topic: topic, Partition: int32(i)}
	}
	return out
}

// Requests of a partition list: split by count, in order, nothing lost or repeated.
func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		items, n int
		want     []int // the size of each chunk
	}{
		{0, 5, nil},
		{1, 5, []int{1}},
		{5, 5, []int{5}},
		{12, 5, []int{5, 5, 2}},
		{15, 5, []int{5, 5, 5}},
		{25000, DefaultBatchPartitions, []int{5000, 5000, 5000, 5000, 5000}},
		{7, 0, []int{7}}, // no limit: one
		{3, 1, []int{1, 1, 1}},
	} {
		t.Run(fmt.Sprintf("%d by %d", tc.items, tc.n), func(t *testing.T) {
			items := tpsN("t", tc.items)
			got := chunks(items, tc.n)
			var sizes []int
			var all []TopicPartition
			for _, c := range got {
				sizes = append(sizes, len(c))
				all = append(all, c...)
			}
			if !slices.Equal(sizes, tc.want) {
				t.Errorf("chunk sizes %v, want %v", sizes, tc.want)
			}
			if !slices.Equal(all, items) {
				t.Errorf("chunks joined differ from the items")
			}
		})
	}
}

func TestUniqueSorted(t *testing.T) {
	in := []TopicPartition{{Topic: "b", Partition: 1}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}, {Topic: "a", Partition: 0}}
	want := []TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}
	if got := uniqueSorted(in); !slices.Equal(got, want) {
		t.Errorf("uniqueSorted = %v, want %v", got, want)
	}
	if in[0].Topic != "b" {
		t.Error("uniqueSorted changed its argument")
	}
}

// Admin znodes: split by entries and by encoded size; every document decodes as Kafka
// reads it, stays within the limit, and together they list every partition once, in order.
func TestSplitAdminZnode(t *testing.T) {
	targets := func(topic string, n int) map[TopicPartition][]int32 {
		m := map[TopicPartition][]int32{}
		for _, tp := range tpsN(topic, n) {
			m[tp] = []int32{3, 2, 1}
		}
		return m
	}
	// One entry of topic "t": {"topic":"t","partition":N,"replicas":[3,2,1]}.
	entry := func(p int) int {
		return len(fmt.Sprintf(`{"topic":"t","partition":%d,"replicas":[3,2,1]}`, p))
	}
	if entry(0) != len(mustMarshal(reassignPartDoc{Topic: "t", Replicas: []int32{3, 2, 1}})) {
		t.Fatal("entry size model is wrong")
	}
	// A document of partitions 0..9 of "t": 29 bytes of frame, 10 entries of 42 bytes, 9 commas.
	ten := emptyAdminZnode + 10*entry(0) + 9
	long := strings.Repeat("x", 249)
	for _, tc := range []struct {
		name    string
		targets map[TopicPartition][]int32
		limits  Limits
		want    []int // partitions per znode
		wantErr string
	}{
		{name: "small: one znode", targets: targets("t", 3), want: []int{3}},
		{name: "by count", targets: targets("t", 12), limits: Limits{Partitions: 5}, want: []int{5, 5, 2}},
		{name: "by size, exactly full", targets: targets("t", 10), limits: Limits{ZnodeBytes: ten}, want: []int{10}},
		{name: "by size, one more", targets: targets("t", 11), limits: Limits{ZnodeBytes: ten}, want: []int{10, 1}},
		{name: "by size, one byte short", targets: targets("t", 10), limits: Limits{ZnodeBytes: ten - 1}, want: []int{9, 1}},
		// Partitions 10 and up take a byte more each.
		{name: "by size, longer entries", targets: targets("t", 20), limits: Limits{ZnodeBytes: ten}, want: []int{10, 9, 1}},
		{name: "count tighter than size", targets: targets("t", 10), limits: Limits{Partitions: 4, ZnodeBytes: ten}, want: []int{4, 4, 2}},
		{name: "size tighter than count", targets: targets("t", 10), limits: Limits{Partitions: 15, ZnodeBytes: ten - 1}, want: []int{9, 1}},
		{name: "long topic names", targets: targets(long, 6), limits: Limits{ZnodeBytes: 700}, want: []int{2, 2, 2}},
		{name: "one entry too big", targets: targets(long, 1), limits: Limits{ZnodeBytes: 200}, wantErr: "alone needs"},
		// The default: 40,000 reorders of 3 replicas in a topic of a realistic name fit in 8
		// znodes of 5,000 entries (under 400 KB each).
		{name: "defaults", targets: targets("payments.events.v2", 40000), want: []int{5000, 5000, 5000, 5000, 5000, 5000, 5000, 5000}},
		// Many replicas and long names: the size bounds it before the count does.
		{name: "defaults, by size", targets: func() map[TopicPartition][]int32 {
			m := map[TopicPartition][]int32{}
			for _, tp := range tpsN(long, 6000) {
				m[tp] = []int32{1001, 1002, 1003, 1004, 1005, 1006}
			}
			return m
		}(), want: []int{2941, 2938, 121}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := reassignEntries(tc.targets)
			if err != nil {
				t.Fatal(err)
			}
			got, err := splitAdminZnode(entries, tc.limits)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			limits := tc.limits.withDefaults()
			var sizes []int
			var all []TopicPartition
			seen := map[TopicPartition][]int32{}
			for i, b := range got {
				sizes = append(sizes, len(b.tps))
				all = append(all, b.tps...)
				if len(b.data) > limits.ZnodeBytes || len(b.tps) > limits.Partitions {
					t.Errorf("znode %d: %d bytes, %d partitions: over %+v", i, len(b.data), len(b.tps), limits)
				}
				// Full: the next partition would not have fitted.
				if i < len(got)-1 {
					next := got[i+1].tps[0]
					n := len(mustMarshal(reassignPartDoc{Topic: next.Topic, Partition: next.Partition, Replicas: tc.targets[next]}))
					if len(b.tps) < limits.Partitions && len(b.data)+1+n <= limits.ZnodeBytes {
						t.Errorf("znode %d (%d bytes, %d partitions) had room for %s", i, len(b.data), len(b.tps), next)
					}
				}
				dec, err := DecodeReassignZnode(b.data)
				if err != nil {
					t.Fatalf("znode %d: %v", i, err)
				}
				if keys := sortedKeys(dec); !slices.Equal(keys, b.tps) {
					t.Errorf("znode %d lists %d partitions, batch says %d", i, len(keys), len(b.tps))
				}
				maps.Copy(seen, dec)
			}
			if !slices.Equal(sizes, tc.want) {
				t.Errorf("partitions per znode %v, want %v", sizes, tc.want)
			}
			if !slices.Equal(all, sortedKeys(tc.targets)) {
				t.Error("the znodes together do not list every partition once, in order")
			}
			if !maps.EqualFunc(seen, tc.targets, slices.Equal) {
				t.Error("the znodes' replica lists differ from the targets")
			}
		})
	}
}

// Election znodes split the same way, each partition once.
func TestSplitElectionZnode(t *testing.T) {
	tps := append(tpsN("t", 12), TopicPartition{Topic: "t", Partition: 3})
	entries, err := electionEntries(tps)
	if err != nil {
		t.Fatal(err)
	}
	got, err := splitAdminZnode(entries, Limits{Partitions: 5})
	if err != nil {
		t.Fatal(err)
	}
	var all []TopicPartition
	for _, b := range got {
		var doc reassignDoc
		if err := json.Unmarshal(b.data, &doc); err != nil || doc.Version != 1 || len(doc.Partitions) != len(b.tps) {
			t.Fatalf("znode %s: %v", b.data, err)
		}
		if strings.Contains(string(b.data), "replicas") {
			t.Errorf("an election znode lists replicas: %s", b.data)
		}
		all = append(all, b.tps...)
	}
	if len(got) != 3 || !slices.Equal(all, tpsN("t", 12)) {
		t.Errorf("%d znodes listing %v", len(got), all)
	}
	if _, err := electionEntries(nil); err != ErrEmptyElection {
		t.Errorf("an empty election = %v", err)
	}
}
