package kafka

import (
	"strings"
	"testing"
)

// What the worker writes to change a throttle: a config change notification, and a
// broker's config znode with our throttle changed and its encoded password written back
// byte for byte.
func TestEncodeConfigZnodesGolden(t *testing.T) {
	data, err := EncodeConfigChange(resourceRef{EntityTopic, "orders"}.entityPath())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config_change.topic.golden.json", data)

	z, err := DecodeConfigZnode(znodeFile(t, "config-broker.password.json"))
	if err != nil {
		t.Fatal(err)
	}
	if v := z.Get(LeaderThrottledRate); v == nil || *v != "7777777" {
		t.Fatalf("leader rate %v", v)
	}
	ours := "150002"
	z.Set(FollowerThrottledRate, &ours)
	z.Set(LeaderThrottledRate, nil)
	data, err = z.Encode()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config-broker.password.ours.golden.json", data)
}

func TestDecodeConfigZnodeGolden(t *testing.T) {
	z, err := DecodeConfigZnode(znodeFile(t, "config-broker.kafka-2.3.json"))
	if err != nil {
		t.Fatal(err)
	}
	if v := z.Get(FollowerThrottledRate); v == nil || *v != "100000" {
		t.Errorf("follower rate %v, want 100000", v)
	}
	if v := z.Get(LeaderThrottledRate); v != nil {
		t.Errorf("leader rate %v, want unset", *v)
	}
	for _, bad := range []struct{ data, error string }{
		{`{"version":2,"config":{}}`, "version"},
		{`{"version":1}`, "no config object"},
		{`{"version":1,"config":{"a":1}}`, "config a is not a string"},
		{`{"version":1,"config":`, "unexpected EOF"},
	} {
		if _, err := DecodeConfigZnode([]byte(bad.data)); err == nil || !strings.Contains(err.Error(), bad.error) {
			t.Errorf("decode %s = %v, want an error with %q", bad.data, err, bad.error)
		}
	}
}

// Reading throttles from config znodes: a broker's znode (another key kept), a broker
// without one (nothing set, created on write), a topic whose config znode is missing but
// which exists, and a topic that does not.
func TestReadConfigZnodes(t *testing.T) {
	tree := fakeZK{
		"/legacy/config/brokers/1":  string(znodeFile(t, "config-broker.password.json")),
		"/legacy/brokers/topics/t":  `{"version":1,"partitions":{"0":[1,2]}}`,
		"/legacy/brokers/topics/u":  `{"version":1,"partitions":{"0":[1,2]}}`,
		"/legacy/config/topics/u":   `{"version":1,"config":{"follower.replication.throttled.replicas":"0:2"}}`,
		"/legacy/config/brokers/9x": `{"version":1,"config":{"x":1}}`,
	}
	refs := []configRef{
		{EntityBroker, "1", LeaderThrottledRate}, {EntityBroker, "1", FollowerThrottledRate},
		{EntityBroker, "2", LeaderThrottledRate},
		{EntityTopic, "t", LeaderThrottledReplicas}, {EntityTopic, "u", FollowerThrottledReplicas},
		{EntityTopic, "gone", LeaderThrottledReplicas},
	}
	cur, err := readConfigZnodes(tree, "/legacy", refs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[configRef]string{refs[0]: "7777777", refs[4]: "0:2"}
	for _, r := range refs {
		got, ok := cur.values[r]
		if w, exp := want[r]; exp != ok || ok && *got != w {
			t.Errorf("%s = %v, want %q (set %v)", r, got, w, exp)
		}
	}
	if !cur.missing["gone"] || cur.missing["t"] || cur.missing["u"] {
		t.Errorf("missing %v, want only gone", cur.missing)
	}
	for res, version := range map[resourceRef]int32{{EntityBroker, "1"}: 3, {EntityBroker, "2"}: -1, {EntityTopic, "t"}: -1, {EntityTopic, "u"}: 3} {
		if z := cur.znodes[res]; z == nil || z.version != version {
			t.Errorf("%v: znode %+v, want version %d", res, z, version)
		}
	}
	if _, err := readConfigZnodes(tree, "/legacy", []configRef{{EntityBroker, "9x", LeaderThrottledRate}}); err == nil {
		t.Error("a config znode with a number value read without error")
	}
}

func TestChooseConfigs(t *testing.T) {
	for _, tc := range []struct {
		caps  Capabilities
		zk    bool
		want  ConfigMechanism
		error string
	}{
		{Capabilities{IncrementalAlterConfigs: true}, true, ConfigZnodes, ""},
		{Capabilities{}, true, ConfigZnodes, ""},
		{Capabilities{IncrementalAlterConfigs: true}, false, ConfigIncremental, ""},
		{Capabilities{}, false, "", "AlterConfigs would erase"},
	} {
		got, err := ChooseConfigs(tc.caps, tc.zk)
		if got != tc.want || (err == nil) != (tc.error == "") || err != nil && !strings.Contains(err.Error(), tc.error) {
			t.Errorf("ChooseConfigs(%+v, zk=%v) = %q, %v", tc.caps, tc.zk, got, err)
		}
	}
}
