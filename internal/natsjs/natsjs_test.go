package natsjs_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

func TestReplicasOnASingleServer(t *testing.T) {
	_, nc := testenv.InProcessNATS(t)
	for _, tc := range []struct{ configured, want int }{{0, 1}, {1, 1}, {3, 3}, {5, 5}} {
		if got := natsjs.Replicas(nc, tc.configured); got != tc.want {
			t.Errorf("Replicas(single server, %d) = %d, want %d", tc.configured, got, tc.want)
		}
	}
	if got := natsjs.Replicas(nil, 0); got != 1 {
		t.Errorf("Replicas(no connection, 0) = %d, want 1", got)
	}
}

// An asset that exists with fewer replicas than wanted keeps them through every way the
// worker binds it, and is reported (once in the log); a new one gets the count wanted.
func TestExistingAssetsKeepTheirReplicas(t *testing.T) {
	_, nc := testenv.InProcessNATS(t)
	ctx := t.Context()
	plain, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.CreateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OLDKV"}); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zap.WarnLevel)
	js, err := natsjs.New(nc, 3, zap.New(core)) // a single server cannot hold 3: only updates can succeed
	if err != nil {
		t.Fatal(err)
	}
	if js.Want() != 3 {
		t.Fatalf("Want() = %d, want 3 as configured", js.Want())
	}
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}, Description: "updated"})
	if err != nil {
		t.Fatalf("update of an R1 stream by a worker that wants 3: %v", err)
	}
	if got := s.CachedInfo().Config; got.Replicas != 1 || got.Description != "updated" {
		t.Errorf("stream after the update: replicas %d, description %q; want 1 (kept) and the update applied", got.Replicas, got.Description)
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OLDKV", History: 2}); err != nil {
		t.Fatalf("update of an R1 bucket: %v", err)
	}
	if _, err := js.KeyValue(ctx, "OLDKV"); err != nil { // bound as it is, twice: logged once
		t.Fatal(err)
	}
	want := []natsjs.Shortfall{{Asset: "KV_OLDKV", Replicas: 1, Want: 3}, {Asset: "OLD", Replicas: 1, Want: 3}}
	got := js.Shortfalls()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Shortfalls() = %+v, want %+v", got, want)
	}
	if n := logs.FilterMessageSnippet("fewer replicas").Len(); n != 2 {
		t.Errorf("%d warnings logged, want 2 (one per asset): %v", n, logs.All())
	}

	// A new asset gets the replicas asked: 3 is refused by a single server, which shows
	// they were asked for; with 1 configured it is created.
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "NEW"}); err == nil {
		t.Error("a single server created an R3 bucket: the replicas were not asked for")
	}
	one, err := natsjs.New(nc, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "NEW", Subjects: []string{"new.>"}}); err != nil {
		t.Fatal(err)
	}
	if len(one.Shortfalls()) != 0 {
		t.Errorf("Shortfalls() = %v after creating with the count wanted", one.Shortfalls())
	}
}
