package approval

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

func tp(p int32) events.TopicPartition { return events.TopicPartition{Topic: "orders", Partition: p} }

func TestDiff(t *testing.T) {
	was := Fingerprint{
		Partitions: []PartitionState{
			{TopicPartition: tp(3), Replicas: []int32{2, 3}, ISR: []int32{3, 2}, Leader: 2},
			{TopicPartition: tp(1), Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, Dirs: map[int32]string{1: "/a"}},
		},
		Configs: map[string]string{"topic orders min.insync.replicas": "2"},
		Brokers: []Broker{{ID: 1, Rack: "r1"}, {ID: 2, Rack: "r1"}, {ID: 3, Rack: "r2"}},
	}
	for _, tc := range []struct {
		name string
		now  func(f *Fingerprint)
		want []string
	}{
		{"same, in another order", func(f *Fingerprint) {
			f.Partitions[0], f.Partitions[1] = f.Partitions[1], f.Partitions[0]
			f.Partitions[1].ISR = []int32{2, 3}
		}, nil},
		{"leader moved", func(f *Fingerprint) { f.Partitions[0].Leader = 3 }, []string{"orders-3: leader 2 → 3"}},
		{"isr shrank, reassignment began", func(f *Fingerprint) {
			f.Partitions[1].ISR = []int32{1}
			f.Partitions[1].Adding = []int32{4}
		}, []string{"orders-1: isr [1 2] → [1]", "orders-1: reassignment none → adding [4] removing []"}},
		{"replicas reordered, no leader", func(f *Fingerprint) {
			f.Partitions[0].Replicas = []int32{3, 2}
			f.Partitions[0].Leader = -1
		}, []string{"orders-3: replicas [2 3] → [3 2]", "orders-3: leader 2 → none"}},
		{"partition gone", func(f *Fingerprint) { f.Partitions = f.Partitions[1:] }, []string{"orders-3: gone"}},
		{"log dir moved", func(f *Fingerprint) { f.Partitions[1].Dirs = map[int32]string{1: "/a→/b"} },
			[]string{"orders-1: log dir of broker 1 /a → /a→/b"}},
		{"config and brokers", func(f *Fingerprint) {
			f.Configs = map[string]string{"topic orders min.insync.replicas": ""}
			f.Brokers = []Broker{{ID: 1, Rack: "r2"}, {ID: 2, Rack: "r1"}, {ID: 4}}
		}, []string{"topic orders min.insync.replicas: 2 → unset", "broker 1: rack r1 → r2", "brokers: 4 added", "brokers: 3 gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := clone(was)
			tc.now(&now)
			if got := Diff(was, now); !slices.Equal(got, tc.want) {
				t.Errorf("Diff:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func clone(f Fingerprint) Fingerprint {
	out := f
	out.Partitions = nil
	for _, p := range f.Partitions {
		p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
		out.Partitions = append(out.Partitions, p)
	}
	out.Brokers = slices.Clone(f.Brokers)
	return out
}

func TestConsistent(t *testing.T) {
	b := int32(1)
	f := Fingerprint{Partitions: []PartitionState{
		{TopicPartition: tp(0), Replicas: []int32{1, 2}, Leader: 1},
		{TopicPartition: tp(1), Replicas: []int32{1, 2}, Leader: 2, Dirs: map[int32]string{1: "/a"}},
	}}
	ok := []events.Change{{TopicPartition: tp(0), ReplicasBefore: []int32{1, 2}, LeaderBefore: 1},
		{TopicPartition: tp(1), Broker: &b, DirBefore: "/a", DirAfter: "/b"}}
	if got := Consistent(ok, f); len(got) != 0 {
		t.Errorf("Consistent: %q", got)
	}
	bad := []events.Change{{TopicPartition: tp(1), ReplicasBefore: []int32{1, 2}, LeaderBefore: 1}, {TopicPartition: tp(9)}}
	want := []string{"orders-1: leader 2, the plan has 1", "orders-9: not read"}
	if got := Consistent(bad, f); !slices.Equal(got, want) {
		t.Errorf("Consistent:\n got %q\nwant %q", got, want)
	}
}

func TestPolicy(t *testing.T) {
	p := Policy{Approvers: []string{"ops"}, Rules: []Rule{
		{Clusters: []string{"prod"}, Types: []string{events.TypeReplicaChangeRequested}, Require: Above, Partitions: 100, Bytes: 1 << 30, ReplicationFactorLowered: true},
		{Clusters: []string{"prod"}, Require: Always},
		{Types: []string{events.TypePartitionOffline}, Require: Above, Unclean: true},
	}}
	rc, po := events.TypeReplicaChangeRequested, events.TypePartitionOffline
	for _, tc := range []struct {
		cluster, typ string
		asked        bool
		size         Size
		want         string
	}{
		{"prod", rc, false, Size{Partitions: 100, Bytes: 1 << 30}, ""},
		{"prod", rc, false, Size{Partitions: 500}, "500 partitions touched, over 100"},
		{"prod", rc, false, Size{Partitions: 1, Bytes: 2 << 30, ReplicationFactorLowered: 1},
			"2147483648 bytes to copy, over 1073741824; the replication factor of 1 partitions lowered"},
		{"prod", events.TypeBrokerDrain, false, Size{Partitions: 1}, "the policy requires approval of every plan of broker-drain on prod"},
		{"dev", rc, false, Size{Partitions: 5000}, ""},
		{"dev", rc, true, Size{Partitions: 1}, "the event asks for approval (data.approval)"},
		{"dev", rc, true, Size{}, ""},
		{"dev", po, false, Size{Partitions: 2, Unclean: 1}, "1 unclean elections"},
		{"dev", po, false, Size{Partitions: 2}, ""},
	} {
		if got := p.Requires(tc.cluster, tc.typ, tc.asked, tc.size); got != tc.want {
			t.Errorf("Requires(%s, %s, %v, %+v) = %q, want %q", tc.cluster, tc.typ, tc.asked, tc.size, got, tc.want)
		}
	}
	if !p.Approver("ops") || p.Approver("alertmanager") || !(&Policy{Approvers: []string{"*"}}).Approver("x") {
		t.Error("Approver")
	}
}

func TestPolicyProblems(t *testing.T) {
	p := Policy{Expiry: 30 * 24 * time.Hour, Rules: []Rule{
		{Clusters: []string{"nope"}, Types: []string{events.TypeClusterPause}, Require: Above},
		{Require: "sometimes"},
	}}
	var got []string
	for _, pr := range p.Problems([]string{"prod"}) {
		got = append(got, pr.Field+": "+pr.Err.Error())
	}
	for _, want := range []string{
		"approval.expiry: 720h0m0s: must be between",
		`approval.rules[0].clusters[0]: "nope" is not a configured cluster`,
		`approval.rules[0].types[0]: "cluster-pause": plans of this type cannot wait`,
		"approval.rules[0].require: above needs at least one threshold",
		"approval.rules[0].require: plans would wait for approval, but approval.approvers lists no source",
		`approval.rules[1].require: "sometimes": want never, always or above`,
	} {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, want)
		}
		if !found {
			t.Errorf("no problem %q in %q", want, got)
		}
	}
}

func TestSizeOf(t *testing.T) {
	b := int32(2)
	got := SizeOf([]events.Change{
		{TopicPartition: tp(0), ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: 1, LeaderAfter: 1},
		{TopicPartition: tp(1), ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 3}, LeaderBefore: 1, LeaderAfter: 2},
		{TopicPartition: tp(2), Broker: &b, Bytes: 100},
		{TopicPartition: tp(3), LeaderBefore: -1, LeaderAfter: 3, LostOffsets: &events.OffsetRange{From: 5}},
	}, 1000)
	want := Size{Partitions: 4, Bytes: 1100, LeadersMoved: 2, ReplicationFactorLowered: 1, Unclean: 1}
	if got != want {
		t.Errorf("SizeOf = %+v, want %+v", got, want)
	}
}

// FuzzDiff: a fingerprint never differs from itself, however its lists are ordered, and
// a difference is found both ways.
func FuzzDiff(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{1, 2, 3, 4, 5, 6, 7, 9})
	f.Add([]byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fa, fb := fingerprintOf(a), fingerprintOf(b)
		if d := Diff(fa, fa); len(d) != 0 {
			t.Fatalf("Diff(f, f) = %q", d)
		}
		rev := clone(fa)
		slices.Reverse(rev.Partitions)
		slices.Reverse(rev.Brokers)
		for i := range rev.Partitions {
			slices.Reverse(rev.Partitions[i].ISR)
		}
		if d := Diff(fa, rev); len(d) != 0 {
			t.Fatalf("Diff(f, reordered f) = %q", d)
		}
		// A partition the plan does not touch is no difference (only was's partitions are
		// compared): with the same partitions, a difference shows both ways.
		if samePartitions(fa, fb) && (len(Diff(fa, fb)) == 0) != (len(Diff(fb, fa)) == 0) {
			t.Fatalf("a difference one way only: %q / %q", Diff(fa, fb), Diff(fb, fa))
		}
	})
}

func samePartitions(a, b Fingerprint) bool {
	names := func(f Fingerprint) []string {
		var out []string
		for _, p := range f.Partitions {
			out = append(out, p.TopicPartition.String())
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(names(a), names(b))
}

// fingerprintOf makes a small fingerprint from bytes: partitions of 3 bytes (replicas,
// isr mask, leader) of distinct numbers, brokers from the rest.
func fingerprintOf(b []byte) Fingerprint {
	var f Fingerprint
	seen := map[int32]bool{}
	for i := 0; i+3 <= len(b) && len(f.Partitions) < 8; i += 3 {
		n := int32(b[i] % 16)
		if seen[n] {
			continue
		}
		seen[n] = true
		replicas := []int32{int32(b[i+1]%4) + 1, int32(b[i+1]%4) + 2}
		var isr []int32
		for j, r := range replicas {
			if b[i+2]&(1<<j) != 0 {
				isr = append(isr, r)
			}
		}
		f.Partitions = append(f.Partitions, PartitionState{TopicPartition: tp(n), Replicas: replicas, ISR: isr, Leader: int32(b[i+2]>>4) - 1})
	}
	for i, c := range b {
		if i%5 == 0 {
			f.Brokers = append(f.Brokers, Broker{ID: int32(i), Rack: string('a' + rune(c%3))})
		}
	}
	return f
}
