package kafka

import (
	"encoding/json"
	"slices"
	"testing"
)

func sp(s string) *string { return &s }

func TestMergeReplicas(t *testing.T) {
	for _, tc := range []struct {
		name string
		prev *string
		ours map[int32][]int32
		want string
	}{
		{"none before", nil, map[int32][]int32{0: {1, 2}, 1: {3}}, "0:1,0:2,1:3"},
		{"merged and deduplicated", sp("0:1,5:4"), map[int32][]int32{0: {1, 2}}, "0:1,0:2,5:4"},
		{"spaces and empty entries", sp(" 0:1 , ,2:2,"), map[int32][]int32{1: {1}}, "0:1,1:1,2:2"},
		{"star stays star", sp("*"), map[int32][]int32{0: {1}}, "*"},
		{"star among entries", sp("0:1, *"), map[int32][]int32{0: {1}}, "*"},
		{"empty before", sp(""), map[int32][]int32{0: {1}}, "0:1"},
		{"nothing of ours", sp("1:2,0:1"), nil, "0:1,1:2"},
		{"nothing at all", nil, nil, ""},
	} {
		if got := mergeReplicas(tc.prev, tc.ours); got != tc.want {
			t.Errorf("%s: mergeReplicas = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSameValue(t *testing.T) {
	for _, tc := range []struct {
		key  string
		a, b *string
		want bool
	}{
		{LeaderThrottledRate, nil, nil, true},
		{LeaderThrottledRate, nil, sp("1"), false},
		{LeaderThrottledRate, sp("1"), nil, false},
		{LeaderThrottledRate, sp("100"), sp(" 100"), true},
		{LeaderThrottledRate, sp("100"), sp("1000"), false},
		{LeaderThrottledReplicas, sp("1:2,0:1"), sp("0:1, 1:2"), true},
		{FollowerThrottledReplicas, sp("0:1"), sp("0:1,0:2"), false},
		{FollowerThrottledReplicas, sp("*"), sp(" *"), true},
		{FollowerThrottledReplicas, sp(""), nil, false}, // set to empty is not unset
		{"other", sp("1:2,0:1"), sp("0:1,1:2"), false},
	} {
		if got := sameValue(tc.key, tc.a, tc.b); got != tc.want {
			t.Errorf("sameValue(%s, %v, %v) = %v, want %v", tc.key, str(tc.a), str(tc.b), got, tc.want)
		}
	}
}

func str(v *string) string {
	if v == nil {
		return "<nil>"
	}
	return *v
}

func TestSortThrottleKeys(t *testing.T) {
	keys := []ThrottleKey{
		{Entity: EntityTopic, Name: "b", Key: LeaderThrottledReplicas},
		{Entity: EntityBroker, Name: "10", Key: LeaderThrottledRate},
		{Entity: EntityTopic, Name: "a", Key: LeaderThrottledReplicas},
		{Entity: EntityBroker, Name: "2", Key: LeaderThrottledRate},
		{Entity: EntityBroker, Name: "2", Key: FollowerThrottledRate},
		{Entity: EntityTopic, Name: "a", Key: FollowerThrottledReplicas},
	}
	sortThrottleKeys(keys)
	var got []string
	for _, k := range keys {
		got = append(got, k.String())
	}
	want := []string{
		"broker 2 " + FollowerThrottledRate, "broker 2 " + LeaderThrottledRate, "broker 10 " + LeaderThrottledRate,
		"topic a " + FollowerThrottledReplicas, "topic a " + LeaderThrottledReplicas, "topic b " + LeaderThrottledReplicas,
	}
	if !slices.Equal(got, want) {
		t.Errorf("sorted = %q, want %q", got, want)
	}
}

func TestBrokersOf(t *testing.T) {
	if got := brokersOf(map[int32][]int32{0: {3, 1}, 1: {1, 2}, 2: nil}); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Errorf("brokersOf = %v", got)
	}
	if got := brokersOf(nil); len(got) != 0 {
		t.Errorf("brokersOf(nil) = %v", got)
	}
}

// The keys are journal data: they must survive JSON exactly, an unset Before included.
func TestThrottleKeyJSON(t *testing.T) {
	keys := []KeptThrottle{
		{ThrottleKey: ThrottleKey{Entity: EntityBroker, Name: "3", Key: LeaderThrottledRate, Before: nil, Ours: "1000"}, Current: sp("5")},
		{ThrottleKey: ThrottleKey{Entity: EntityTopic, Name: "t", Key: LeaderThrottledReplicas, Before: sp(""), Ours: "0:1"}, Current: nil},
	}
	data, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"entity":"broker","name":"3","key":"leader.replication.throttled.rate","before":null,"ours":"1000","current":"5"},` +
		`{"entity":"topic","name":"t","key":"leader.replication.throttled.replicas","before":"","ours":"0:1","current":null}]`
	if string(data) != want {
		t.Errorf("JSON\n%s\nwant\n%s", data, want)
	}
	var back []KeptThrottle
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		a, b := keys[i], back[i]
		if a.Entity != b.Entity || a.Name != b.Name || a.Key != b.Key || a.Ours != b.Ours ||
			str(a.Before) != str(b.Before) || (a.Before == nil) != (b.Before == nil) ||
			str(a.Current) != str(b.Current) || (a.Current == nil) != (b.Current == nil) {
			t.Errorf("key %d: %+v came back as %+v", i, a, b)
		}
	}
}

func TestCheckThrottleKeys(t *testing.T) {
	ok := []ThrottleKey{
		{Entity: EntityBroker, Name: "0", Key: LeaderThrottledRate, Ours: "1"},
		{Entity: EntityTopic, Name: "t", Key: LeaderThrottledReplicas, Ours: "*"},
		{Entity: EntityTopic, Name: "u", Key: LeaderThrottledReplicas, Ours: "*"},
	}
	if err := checkThrottleKeys(ok); err != nil {
		t.Error(err)
	}
	for _, bad := range []ThrottleKey{
		{Entity: "Broker", Name: "1", Key: LeaderThrottledRate},
		{Entity: EntityBroker, Name: "-1", Key: LeaderThrottledRate},
		{Entity: EntityBroker, Name: "x", Key: LeaderThrottledRate},
		{Entity: EntityTopic, Name: "", Key: LeaderThrottledReplicas},
		{Entity: EntityTopic, Name: "t", Key: ""},
		ok[1], // twice
	} {
		if err := checkThrottleKeys(append(slices.Clone(ok[:2]), bad)); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
