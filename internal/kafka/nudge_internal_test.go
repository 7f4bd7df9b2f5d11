package kafka

import (
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

const (
	nudgeOrig   = `{"version":3,"topic_id":"AbC","partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{}}`
	nudgeOurs   = `{"version":3,"topic_id":"AbC","partitions":{"0":[3,2,1],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{}}`
	nudgeBoth   = `{"version":3,"topic_id":"AbC","partitions":{"0":[3,2,1],"1":[1,3,2]},"adding_replicas":{},"removing_replicas":{}}`
	nudgeOther  = `{"version":3,"topic_id":"AbC","partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"adding_replicas":{},"removing_replicas":{}}`
	nudgeEvents = `{"version":1,"partitions":{"0":[1,2,3]}}`
	nudgePath   = "/kafka/brokers/topics/orders"
)

func topicZnode(t *testing.T, path, data string, version int32) *TopicZnode {
	t.Helper()
	z, err := DecodeTopicZnode([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	z.Path, z.Stat = path, &zk.Stat{Version: version}
	return z
}

// What a zk-nudge attempt journals and writes, from what an earlier attempt journaled and
// what the znode holds now. Above all: a journaled Before is never replaced.
func TestPlanNudge(t *testing.T) {
	reorder0 := map[TopicPartition][]int32{{Topic: "orders", Partition: 0}: {3, 2, 1}}
	reorderBoth := map[TopicPartition][]int32{{Topic: "orders", Partition: 0}: {3, 2, 1}, {Topic: "orders", Partition: 1}: {1, 3, 2}}
	other := NudgeZnode{Path: "/kafka/brokers/topics/events", Before: nudgeEvents, After: nudgeEvents, Version: 4}
	for _, tc := range []struct {
		name    string
		prior   *NudgeState
		current string
		orders  map[TopicPartition][]int32
		want    []NudgeZnode
		write   string // the data written; "" for none
		wantErr string
	}{
		{name: "first attempt", current: nudgeOrig, orders: reorder0,
			want: []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs}}, write: nudgeOurs},
		{name: "written, its record failed: keep Before, write nothing", current: nudgeOurs, orders: reorder0,
			prior: &NudgeState{Znodes: []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs}}},
			want:  []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs, Version: 7}}},
		{name: "journaled, not written", current: nudgeOrig, orders: reorder0,
			prior: &NudgeState{Znodes: []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs}}},
			want:  []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs}}, write: nudgeOurs},
		{name: "written, now with more orders: Before stays the original", current: nudgeOurs, orders: reorderBoth,
			prior: &NudgeState{Znodes: []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs, Version: 7}}},
			want:  []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeBoth}}, write: nudgeBoth},
		{name: "changed by someone else since journaled", current: nudgeOther, orders: reorder0,
			prior:   &NudgeState{Znodes: []NudgeZnode{{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs}}},
			wantErr: "changed since an earlier attempt journaled it"},
		{name: "a znode journaled for another topic is kept", current: nudgeOrig, orders: reorder0,
			prior: &NudgeState{ControllerEpoch: 9, Znodes: []NudgeZnode{other}},
			want:  []NudgeZnode{other, {Path: nudgePath, Before: nudgeOrig, After: nudgeOurs}}, write: nudgeOurs},
		{name: "nothing to change", current: nudgeOurs, orders: reorder0,
			want: []NudgeZnode{{Path: nudgePath, Before: nudgeOurs, After: nudgeOurs, Version: 7}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topics := map[string]*TopicZnode{"orders": topicZnode(t, nudgePath, tc.current, 7)}
			st, writes, err := planNudge(tc.prior, tc.orders, topics)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Znodes) != len(tc.want) {
				t.Fatalf("journal %+v, want %+v", st.Znodes, tc.want)
			}
			for i, w := range tc.want {
				g := st.Znodes[i]
				if g.Path != w.Path || !jsonEqual([]byte(g.Before), []byte(w.Before)) || !jsonEqual([]byte(g.After), []byte(w.After)) || g.Version != w.Version {
					t.Errorf("journal entry %d = %+v, want %+v", i, g, w)
				}
			}
			if tc.prior != nil && st.ControllerEpoch != tc.prior.ControllerEpoch {
				t.Errorf("controller epoch %d, journaled %d", st.ControllerEpoch, tc.prior.ControllerEpoch)
			}
			switch {
			case tc.write == "" && len(writes) > 0:
				t.Errorf("writes %d znodes, want none", len(writes))
			case tc.write != "" && (len(writes) != 1 || writes[0].path != nudgePath || writes[0].version != 7 || !jsonEqual(writes[0].data, []byte(tc.write))):
				t.Errorf("writes %+v, want %s at version 7", writes, tc.write)
			}
		})
	}
}

// What a rollback does with a znode, by its content: only our order is put back.
func TestRestoreAction(t *testing.T) {
	z := NudgeZnode{Path: nudgePath, Before: nudgeOrig, After: nudgeOurs} // no version: the record after the write failed
	// The same document as Kafka may render it: other key order, spaces.
	oursReordered := `{"partitions":{"1":[2,3,1],"0":[3,2,1]},"removing_replicas":{},"adding_replicas":{},"topic_id":"AbC","version":3}`
	for _, tc := range []struct {
		name    string
		z       NudgeZnode
		current string
		want    nudgeRestoreAction
	}{
		{"holds our order", z, nudgeOurs, nudgePutBack},
		{"holds our order, rendered otherwise", z, oursReordered, nudgePutBack},
		{"holds the order before", z, nudgeOrig, nudgeUnchanged},
		{"changed by someone else", z, nudgeOther, nudgeKept},
		{"not JSON", z, "garbage", nudgeKept},
		{"nothing was to change", NudgeZnode{Path: nudgePath, Before: nudgeOurs, After: nudgeOurs}, nudgeOurs, nudgeUnchanged},
	} {
		if got := restoreAction(tc.z, []byte(tc.current)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The text of a rollback says "put back" only of znodes a write put back.
func TestNudgeRestoreString(t *testing.T) {
	for _, tc := range []struct {
		r    NudgeRestore
		want string
	}{
		{NudgeRestore{}, "no topic znode to put back"},
		{NudgeRestore{PutBack: []string{"/a", "/b"}}, "topic znodes put back: /a, /b"},
		{NudgeRestore{Kept: []string{"/a"}}, "left /a: changed by someone else since our write"},
		{NudgeRestore{Unchanged: []string{"/a"}}, "/a already held the data before: nothing to put back"},
		{NudgeRestore{PutBack: []string{"/a"}, Kept: []string{"/b"}, Unchanged: []string{"/c"}},
			"topic znodes put back: /a; left /b: changed by someone else since our write; /c already held the data before: nothing to put back"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}
