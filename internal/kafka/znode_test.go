package kafka

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParseController(t *testing.T) {
	for _, tc := range []struct {
		data  string
		id    int32
		kraft bool
	}{
		{`{"version":1,"brokerid":3,"timestamp":"1700000000000"}`, 3, false},
		{`{"version":2,"brokerid":2,"timestamp":"1700000000000","kraftControllerEpoch":-1}`, 2, false},
		// During a ZooKeeper-to-KRaft migration a KRaft controller writes itself here.
		{`{"version":2,"brokerid":3000,"timestamp":"1700000000000","kraftControllerEpoch":7}`, 3000, true},
	} {
		c, err := ParseController([]byte(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		if c.BrokerID != tc.id || c.KRaft() != tc.kraft {
			t.Errorf("%s: broker %d kraft %v", tc.data, c.BrokerID, c.KRaft())
		}
	}
	if _, err := ParseController([]byte(`{"brokerid":`)); err == nil {
		t.Error("truncated /controller accepted")
	}
}

// Rewriting a topic znode keeps every field it was read with, unknown ones included,
// and numbers exactly.
func TestTopicZnodeKeepsEveryField(t *testing.T) {
	in := `{"version":3,"topic_id":"UtM_5KzGRsCJ_iOFMwXrcA","partitions":{"0":[1,2,3],"1":[2,3,1]},` +
		`"adding_replicas":{},"removing_replicas":{"1":[]},"future_field":{"x":12345678901234567890}}`
	z, err := DecodeTopicZnode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := z.Replicas(1); !slices.Equal(r, []int32{2, 3, 1}) {
		t.Fatalf("replicas %v", r)
	}
	if z.Reassigning(0) || z.Reassigning(1) {
		t.Fatal("empty adding/removing lists read as a reassignment")
	}
	z.SetReplicas(0, []int32{3, 2, 1})
	out, err := z.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	_ = json.Unmarshal(out, &got)
	_ = json.Unmarshal([]byte(strings.Replace(in, `"0":[1,2,3]`, `"0":[3,2,1]`, 1)), &want)
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("rewritten znode\n got %s\nwant %s", gj, wj)
	}
	if !strings.Contains(string(out), "12345678901234567890") {
		t.Fatalf("a large number lost precision: %s", out)
	}
	if _, err := z.Replicas(9); err == nil {
		t.Fatal("a missing partition read without error")
	}

	z, err = DecodeTopicZnode([]byte(`{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{"0":[2]},"removing_replicas":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !z.Reassigning(0) {
		t.Fatal("adding_replicas not seen as a reassignment")
	}
	if _, err := DecodeTopicZnode([]byte(`{"version":1}`)); err == nil {
		t.Fatal("a znode without partitions accepted")
	}
}

func TestChoose(t *testing.T) {
	modern := Capabilities{ElectLeaders: true, AlterPartitionAssignment: true, ListReassignments: true}
	legacy := Capabilities{ElectLeaders: true}
	for _, tc := range []struct {
		want  Strategy
		caps  Capabilities
		zk    bool
		got   Strategy
		error string
	}{
		{StrategyAuto, modern, true, StrategyAPI, ""},
		{StrategyAuto, legacy, true, StrategyZKReassign, ""},
		{StrategyAuto, legacy, false, "", "no zookeeper is configured"},
		{StrategyAPI, legacy, true, "", "needs AlterPartitionReassignments"},
		{StrategyZKNudge, modern, false, "", "needs the cluster's zookeeper"},
		{StrategyZKNudge, modern, true, StrategyZKNudge, ""},
	} {
		got, err := Choose(tc.want, tc.caps, tc.zk)
		if got != tc.got || (err == nil) != (tc.error == "") || err != nil && !strings.Contains(err.Error(), tc.error) {
			t.Errorf("Choose(%s, %+v, zk=%v) = %q, %v", tc.want, tc.caps, tc.zk, got, err)
		}
	}
}
