package kafka

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/znodes")

func znodeFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "znodes", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// golden compares got with testdata/znodes/name (rewritten with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "znodes", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/kafka -run Golden -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (rerun with -update if intended)\n got %s\nwant %s", path, got, want)
	}
}

// fakeZK is a ZooKeeper tree for readers: path -> data (version 3 each).
type fakeZK map[string]string

func (f fakeZK) Get(p string) ([]byte, *zk.Stat, error) {
	d, ok := f[p]
	if !ok {
		return nil, nil, zk.ErrNoNode
	}
	return []byte(d), &zk.Stat{Version: 3}, nil
}

// /admin/reassign_partitions as the 2.3 controller rewrites it and as a tool writes it
// (with log_dirs, fields in another order): each partition's target replicas.
func TestDecodeReassignZnodeGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		want map[TopicPartition][]int32
	}{
		{"reassign_partitions.kafka-2.3.json", map[TopicPartition][]int32{{Topic: "orders", Partition: 0}: {1, 2, 3}}},
		{"reassign_partitions.tool.json", map[TopicPartition][]int32{{Topic: "orders", Partition: 3}: {3, 1, 2}, {Topic: "events", Partition: 0}: {2, 1}}},
	} {
		got, err := DecodeReassignZnode(znodeFile(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.file, got, tc.want)
		}
		for tp, rs := range tc.want {
			if !slices.Equal(got[tp], rs) {
				t.Errorf("%s: %s -> %v, want %v", tc.file, tp, got[tp], rs)
			}
		}
	}
	for _, bad := range []struct{ data, error string }{
		{`{"version":2,"partitions":[]}`, "version 2"},
		{`{"partitions":[]}`, "version missing"},
		{`{"version":1}`, "no partitions"},
		{`{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}`, "no topic"},
		{`{"version":1,"partitions":[{"topic":"t","replicas":[1]}]}`, "no partition"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0}]}`, "no replicas"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`, "no replicas"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`, "t-0 is listed twice"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}`, "unexpected EOF"},
	} {
		if _, err := DecodeReassignZnode([]byte(bad.data)); err == nil || !strings.Contains(err.Error(), bad.error) {
			t.Errorf("decode %s = %v, want an error with %q", bad.data, err, bad.error)
		}
	}
	if got, err := DecodeReassignZnode([]byte(`{"version":1,"partitions":[]}`)); err != nil || len(got) != 0 {
		t.Errorf("an empty list = %v, %v", got, err)
	}
}

// What the worker writes: the reassignment and election znodes.
func TestEncodeZnodesGolden(t *testing.T) {
	targets := map[TopicPartition][]int32{
		{Topic: "orders", Partition: 3}: {1, 2, 3},
		{Topic: "events", Partition: 0}: {2, 1, 3},
		{Topic: "orders", Partition: 1}: {3, 1, 2},
	}
	data, err := EncodeReassignZnode(targets)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "reassign_partitions.golden.json", data)
	back, err := DecodeReassignZnode(data)
	if err != nil || len(back) != len(targets) {
		t.Fatalf("decode what we encode: %v, %v", back, err)
	}
	for tp, rs := range targets {
		if !slices.Equal(back[tp], rs) {
			t.Errorf("round trip %s: %v, want %v", tp, back[tp], rs)
		}
	}
	if _, err := EncodeReassignZnode(nil); err == nil {
		t.Error("an empty reassignment encoded")
	}
	if _, err := EncodeReassignZnode(map[TopicPartition][]int32{{Topic: "t"}: nil}); err == nil {
		t.Error("a reassignment to no replicas encoded")
	}

	data, err = EncodeElectionZnode([]TopicPartition{{Topic: "orders", Partition: 3}, {Topic: "events", Partition: 0}})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "preferred_replica_election.golden.json", data)
	if _, err := EncodeElectionZnode(nil); !errors.Is(err, ErrEmptyElection) {
		t.Errorf("an empty election = %v, want ErrEmptyElection", err)
	}
}

// /controller of a 2.3 controller, of a 3.9 ZooKeeper controller, and of a KRaft controller
// during a ZooKeeper migration: only the last refuses ZooKeeper writes.
func TestControllerGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		id    int32
		kraft bool
	}{
		{"controller.zk-2.3.json", 1, false},
		{"controller.zk-3.9.json", 3, false},
		{"controller.kraft-migration.json", 3000, true},
	} {
		data := znodeFile(t, tc.file)
		c, err := ParseController(data)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if c.BrokerID != tc.id || c.KRaft() != tc.kraft {
			t.Errorf("%s: broker %d kraft %v, want %d %v", tc.file, c.BrokerID, c.KRaft(), tc.id, tc.kraft)
		}
		err = CheckZKController(t.Context(), fakeZK{"/legacy/controller": string(data)}, "/legacy")
		if tc.kraft != errors.Is(err, ErrKRaftController) || !tc.kraft && err != nil {
			t.Errorf("%s: CheckZKController = %v", tc.file, err)
		}
		if tc.kraft && !strings.Contains(err.Error(), "KRaft controller 3000 (kraftControllerEpoch 7)") {
			t.Errorf("%s: %v does not name the controller", tc.file, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := CheckZKController(ctx, fakeZK{}, "/legacy"); !errors.Is(err, ErrNoController) {
		t.Errorf("no /controller: %v, want ErrNoController", err)
	}
	if _, err := ParseController([]byte(`{"brokerid":1}`)); err == nil {
		t.Error("a /controller without version accepted")
	}
}

func TestPartitionReassignment(t *testing.T) {
	api := Partition{Replicas: []int32{1, 2, 3}, Adding: []int32{3}}
	legacy := Partition{Replicas: []int32{1, 2, 3}, Target: []int32{1, 2, 3}}
	trim := Partition{Replicas: []int32{1, 2, 3}, Target: []int32{1, 2}, Removing: []int32{3}}
	for _, tc := range []struct {
		p    Partition
		want string
	}{
		{api, "adding [3], removing []"},
		{legacy, "to [1 2 3], removing [] (/admin/reassign_partitions)"},
		{trim, "to [1 2], removing [3] (/admin/reassign_partitions)"},
	} {
		if !tc.p.Reassigning() || tc.p.Reassignment() != tc.want {
			t.Errorf("%+v: reassigning %v, %q; want %q", tc.p, tc.p.Reassigning(), tc.p.Reassignment(), tc.want)
		}
	}
	if (Partition{Replicas: []int32{1}}).Reassigning() {
		t.Error("a partition without a reassignment reads as reassigning")
	}
}
