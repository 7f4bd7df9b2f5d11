package journal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// largeStores runs test against the journal in JetStream (an in-process nats-server at its
// default limits: max_payload 1 MiB) and in memory whose writes hold 64 KiB at most.
func largeStores(t *testing.T, test func(t *testing.T, s *journal.Store)) {
	t.Run("jetstream", func(t *testing.T) {
		_, nc := testenv.InProcessNATS(t)
		if nc.MaxPayload() != 1<<20 {
			t.Fatalf("max_payload %d, want the default 1 MiB", nc.MaxPayload())
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		test(t, journal.New(js))
	})
	t.Run("memory-64KiB", func(t *testing.T) {
		s, _ := journal.NewMemoryMaxValue(64 << 10)
		test(t, s)
	})
}

// shed is the entry of a shed of a broker leading n partitions, with a request of
// requestBytes: every change about 120 bytes of JSON.
func shed(event string, n, requestBytes int) journal.Entry {
	changes := make([]plan.Change, n)
	for i := range changes {
		changes[i] = plan.Change{TopicPartition: model.TopicPartition{Topic: fmt.Sprintf("orders-%03d", i/100), Partition: int32(i % 100)},
			ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 3, 1}, LeaderBefore: 1, LeaderAfter: 2}
	}
	request, _ := json.Marshal(map[string]any{"subject": "kafkamender.events.c1.broker-overloaded",
		"data": strings.Repeat("x", requestBytes)})
	return journal.Entry{Event: event, Type: "broker-overloaded", Cluster: "c1", Worker: "w1", Attempt: 1,
		Request: request, Strategy: "api", Changes: changes}
}

// sameEntry fails unless got is want (as encoded: times as stored).
func sameEntry(t *testing.T, what string, got *journal.Record, want journal.Entry) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no entry", what)
	}
	g, _ := json.Marshal(got.Entry)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("%s: read back %d bytes, not the %d written", what, len(g), len(w))
	}
}

// chunkKeys lists the keys under the store's chunking that are chunks.
func chunkKeys(t *testing.T, s *journal.Store) []string {
	t.Helper()
	keys, err := journal.RawKeys(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range keys {
		if strings.Contains(k, ".chunks.") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// chunkSets lists the nonces of the chunk sets under the store's chunking.
func chunkSets(t *testing.T, s *journal.Store) []string {
	t.Helper()
	var out []string
	for _, k := range chunkKeys(t, s) {
		if n := strings.Split(k, ".")[2]; !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// A shed of a broker leading 25,000 partitions, with a request of 900 KiB, is journaled at
// NATS's default limits: begun, read back whole, saved as it runs, taken over, closed; the
// list shows one entry; nothing of its chunks remains.
func TestLargeEntry(t *testing.T) {
	largeStores(t, func(t *testing.T, s *journal.Store) {
		ctx := t.Context()
		e := shed("e1", 25000, 900<<10)
		if err := journal.CheckFits(&e); err != nil {
			t.Fatalf("check at plan time: %v", err)
		}
		op, err := s.Begin(ctx, held, nil, e)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		sameEntry(t, "after begin", r, op.Entry)
		if r.Revision != op.Revision() {
			t.Fatalf("revision %d, the op wrote %d", r.Revision, op.Revision())
		}
		if n := len(chunkKeys(t, s)); n < 4 {
			t.Fatalf("%d chunk keys for an entry of about 4 MiB", n)
		}

		for i, step := range []journal.Step{journal.StepReordering, journal.StepElecting, journal.StepCopying, journal.StepDone} {
			op.Entry.Step = step
			op.Entry.Reassignments = append(op.Entry.Reassignments, model.TopicPartition{Topic: "orders-000", Partition: int32(i)})
			if step == journal.StepDone {
				for _, c := range op.Entry.Changes {
					op.Entry.Left = append(op.Entry.Left, model.Seen{TopicPartition: c.TopicPartition, Replicas: c.ReplicasAfter, Leader: c.LeaderAfter, LeaderEpoch: 3})
				}
			}
			if err := op.Save(ctx); err != nil {
				t.Fatalf("save at %s: %v", step, err)
			}
			r, err := s.Get(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			sameEntry(t, "after save at "+string(step), r, op.Entry)
		}
		if list, err := s.List(ctx); err != nil || len(list) != 1 || list[0].Cluster != "c1" {
			t.Fatalf("list: %d entries, %v", len(list), err)
		}

		r, err = s.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		taken, err := s.TakeOver(ctx, held, r, "w2", 2)
		if err != nil {
			t.Fatal(err)
		}
		// The former holder is fenced before it writes a chunk.
		before := chunkKeys(t, s)
		if err := op.Save(ctx); !errors.Is(err, journal.ErrFenced) {
			t.Fatalf("save by the former holder: %v, want ErrFenced", err)
		}
		if after := chunkKeys(t, s); !slices.Equal(before, after) {
			t.Fatalf("a fenced save left chunks: %d before, %d after", len(before), len(after))
		}
		r, err = s.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		sameEntry(t, "after take-over", r, taken.Entry)
		if r.Worker != "w2" || len(r.Left) != 25000 {
			t.Fatalf("after take-over: worker %s, %d left", r.Worker, len(r.Left))
		}

		if err := s.Close(ctx, r); err != nil {
			t.Fatal(err)
		}
		r, err = s.Get(ctx, "c1")
		if err != nil || r == nil || r.Open() || len(r.Left) != 25000 || len(r.Changes) != 0 {
			t.Fatalf("after close: %v", err)
		}
		// Closed, the entry (what the operation left) is still larger than a message; its
		// chunks are the only ones.
		if sets := chunkSets(t, s); len(sets) != 1 {
			t.Fatalf("after close: chunk sets %v, want the closed entry's", sets)
		}
		// A new operation, small, over the closed entry: no chunk remains.
		op2, err := s.Begin(ctx, held, r, entry("e2"))
		if err != nil {
			t.Fatal(err)
		}
		if keys := chunkKeys(t, s); len(keys) != 0 {
			t.Fatalf("after a small entry replaced a large one: chunk keys %v", keys)
		}
		r, _ = s.Get(ctx, "c1")
		sameEntry(t, "small after large", r, op2.Entry)
	})
}

// A reader during rewrites gets the old value or the new one, whole, never a mix.
func TestReadDuringRewrites(t *testing.T) {
	largeStores(t, func(t *testing.T, s *journal.Store) {
		ctx := t.Context()
		gen := func(g int) journal.Entry {
			e := shed("e1", 9000+g*100, 100<<10)
			e.Notes = []string{fmt.Sprint(g)}
			for i := range e.Changes {
				e.Changes[i].LeaderAfter = int32(g)
			}
			return e
		}
		op, err := s.Begin(ctx, held, nil, gen(0))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		var reads, errs sync.Map
		for reader := range 2 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					r, err := s.Get(ctx, "c1")
					if err != nil {
						errs.Store(reader, err)
						return
					}
					g := r.Notes[0]
					if len(r.Changes) != 9000+100*atoi(g) {
						errs.Store(reader, fmt.Errorf("generation %s with %d changes", g, len(r.Changes)))
						return
					}
					for _, c := range r.Changes {
						if fmt.Sprint(c.LeaderAfter) != g {
							errs.Store(reader, fmt.Errorf("generation %s holds a change of generation %d", g, c.LeaderAfter))
							return
						}
					}
					reads.Store(g, true)
				}
			})
		}
		for g := 1; g <= 15; g++ {
			op.Entry = gen(g)
			if err := op.Save(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(done)
		wg.Wait()
		errs.Range(func(k, v any) bool {
			t.Errorf("reader %v: %v", k, v)
			return true
		})
		n := 0
		reads.Range(func(any, any) bool { n++; return true })
		t.Logf("readers saw %d generations of 16", n)
		if sets := chunkSets(t, s); len(sets) != 1 {
			t.Fatalf("after the rewrites: chunk sets %v, want the last value's only", sets)
		}
	})
}

func atoi(s string) int {
	var n int
	_, _ = fmt.Sscan(s, &n)
	return n
}

// Chunks a writer left when it died between its chunks and its head are removed by the
// next write of the key, small or large; a chunk set never referenced does not show in the
// list, and an entry written whole by an earlier version reads as before.
func TestStaleChunksAreCleaned(t *testing.T) {
	largeStores(t, func(t *testing.T, s *journal.Store) {
		ctx := t.Context()
		old, _ := json.Marshal(entry("e1"))
		if err := journal.PutRaw(ctx, s, "c1", old); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, "c1")
		if err != nil || r == nil || r.Event != "e1" || len(r.Changes) != 1 {
			t.Fatalf("an entry written whole: %+v %v", r, err)
		}
		for i := range 3 {
			if err := journal.PutRaw(ctx, s, fmt.Sprintf("c1.chunks.DEAD.%d", i), bytes.Repeat([]byte("x"), 1000)); err != nil {
				t.Fatal(err)
			}
		}
		if list, err := s.List(ctx); err != nil || len(list) != 1 {
			t.Fatalf("list: %d entries, %v", len(list), err)
		}
		op, err := s.TakeOver(ctx, held, r, "w2", 2)
		if err != nil {
			t.Fatal(err)
		}
		if keys := chunkKeys(t, s); len(keys) != 0 {
			t.Fatalf("after a small write: chunk keys %v", keys)
		}

		// Dead chunks again, then a large write: only its own chunks remain.
		for i := range 2 {
			if err := journal.PutRaw(ctx, s, fmt.Sprintf("c1.chunks.DEAD2.%d", i), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		op.Entry = shed("e1", 25000, 0)
		if err := op.Save(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range chunkKeys(t, s) {
			if strings.Contains(k, "DEAD") {
				t.Fatalf("after a large write: %s remains", k)
			}
		}
		r, err = s.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		sameEntry(t, "after the large write", r, op.Entry)
	})
}

// A large write whose head fails stores nothing: no entry change, no chunk left.
func TestFailedLargeWrite(t *testing.T) {
	s, mem := journal.NewMemoryMaxValue(64 << 10)
	ctx := t.Context()
	op, err := s.Begin(ctx, held, nil, shed("e1", 25000, 0))
	if err != nil {
		t.Fatal(err)
	}
	before := chunkKeys(t, s)
	for _, failing := range []string{"c1", "c1.chunks."} {
		mem.FailWrites(func(_, key string) error {
			if strings.HasPrefix(key, failing) {
				return errors.New("storage full")
			}
			return nil
		})
		op.Entry.Step = journal.StepCopying
		if err := op.Save(ctx); err == nil || !retry.IsTransient(err) {
			t.Fatalf("failing %s: save %v, want a transient error", failing, err)
		}
		if after := chunkKeys(t, s); !slices.Equal(before, after) {
			t.Fatalf("failing %s: chunks %d before, %d after", failing, len(before), len(after))
		}
	}
	mem.FailWrites(nil)
	if r, _ := s.Get(ctx, "c1"); r == nil || r.Step != journal.StepPlanned || len(r.Changes) != 25000 {
		t.Fatalf("a failed write changed the entry")
	}
}

// What cannot be stored is refused at plan time, permanently: an event id too long for
// the subjects of its result's parts, an entry over MaxEntryBytes as it grows.
func TestCheckFits(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    journal.Entry
		want string
	}{
		{"25000 changes and a request of 1 MiB", shed("e1", 25000, 1<<20), ""},
		{"a long event id", journal.Entry{Event: strings.Repeat("a", 4000), Cluster: "c1"}, "event id"},
		{"a long cluster name", journal.Entry{Event: "e1", Cluster: strings.Repeat("c", 4000)}, "cluster name"},
		{"300000 changes", shed("e1", 300000, 0), "journal entry of 300000 changes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := journal.CheckFits(&tc.e)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case !errors.Is(err, journal.ErrTooLarge) || retry.IsTransient(err) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("got %v, want a permanent ErrTooLarge about %s", err, tc.want)
			}
		})
	}
	// A write over the limit fails as permanently.
	s, _ := journal.NewMemory()
	huge := entry("e1")
	huge.Notes = []string{strings.Repeat("x", journal.MaxEntryBytes)}
	_, err := s.Begin(t.Context(), held, nil, huge)
	if !errors.Is(err, journal.ErrTooLarge) || retry.IsTransient(err) {
		t.Fatalf("begin of an entry over the limit: %v", err)
	}
}

// Entries in chunks, as stored in JetStream at default limits: what a shed of 25,000
// partitions (with a request of 900 KiB) costs to write (Save) and read (Get), in time and
// in bytes the bucket's stream holds.
func BenchmarkLargeEntry(b *testing.B) {
	_, nc := testenv.InProcessNATS(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	s := journal.New(js)
	ctx := context.Background()
	op, err := s.Begin(ctx, held, nil, shed("e1", 25000, 900<<10))
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(op.Entry)
	stream, err := js.Stream(ctx, "KV_"+journal.Bucket)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			if err := op.Save(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(raw)), "entry-bytes")
		info, err := stream.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		keys, _ := journal.RawKeys(ctx, s)
		b.ReportMetric(float64(info.State.Bytes), "stored-bytes")
		b.ReportMetric(float64(len(keys)), "keys")
	})
	b.Run("read-raw", func(b *testing.B) {
		for b.Loop() {
			if _, err := journal.GetRaw(ctx, s, "c1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "c1"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(raw)), "entry-bytes")
	})
}

// Chunks a worker left when it died mid-write are removed by the first write of the key by
// the worker that takes the entry over, even a write whole.
func TestTakeOverCleansADeadWritersChunks(t *testing.T) {
	_, nc := testenv.InProcessNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	dead := journal.New(js)
	if _, err := dead.Begin(ctx, held, nil, entry("e1")); err != nil {
		t.Fatal(err)
	}
	// It died after writing the chunks of its next write, before the head.
	for i := range 2 {
		if err := journal.PutRaw(ctx, dead, fmt.Sprintf("c1.chunks.DEAD.%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	next := journal.New(js)
	r, err := next.Get(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.TakeOver(ctx, held, r, "w2", 2); err != nil {
		t.Fatal(err)
	}
	if keys := chunkKeys(t, next); len(keys) != 0 {
		t.Fatalf("after the take-over: chunk keys %v", keys)
	}
}
