package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name           string
		runs           []time.Duration
		median, lo, hi time.Duration
		spread         float64
	}{
		{"odd", ms(30, 10, 20), 20 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 1},
		{"even: mean of the middle two", ms(40, 10, 20, 30), 25 * time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond, 1.2},
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 0},
		{"outlier does not move the median", ms(10, 11, 1000), 11 * time.Millisecond, 10 * time.Millisecond, 1000 * time.Millisecond, 990.0 / 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.runs)
			s := summarize(tc.runs)
			if s.median != tc.median || s.min != tc.lo || s.max != tc.hi || s.n != len(tc.runs) {
				t.Errorf("summarize(%v) = %+v; want median %s, min %s, max %s", tc.runs, s, tc.median, tc.lo, tc.hi)
			}
			if d := s.spread() - tc.spread; d > 1e-9 || d < -1e-9 {
				t.Errorf("spread %v, want %v", s.spread(), tc.spread)
			}
			if !slices.Equal(in, tc.runs) {
				t.Errorf("summarize reordered its input: %v", tc.runs)
			}
		})
	}
	if s := summarize(nil); s.n != 0 || s.String() != "—" {
		t.Errorf("no runs: %+v %q", s, s.String())
	}
}

func TestSummaryString(t *testing.T) {
	s := summarize([]time.Duration{1234567 * time.Microsecond, 987654 * time.Microsecond, 12345 * time.Millisecond})
	if got, want := s.String(), "1.23s (988ms–12.3s)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// Over as many runs as contenders, each contender runs once at each position.
func TestOrderRotates(t *testing.T) {
	cs := []string{"kafkamender", "cli", "floor"}
	at := map[string]map[int]bool{}
	for run := range len(cs) {
		o := order(run, cs)
		if len(o) != len(cs) {
			t.Fatalf("run %d: %v", run, o)
		}
		for pos, c := range o {
			if at[c] == nil {
				at[c] = map[int]bool{}
			}
			if at[c][pos] {
				t.Errorf("%s at position %d twice by run %d", c, pos, run)
			}
			at[c][pos] = true
		}
	}
	for _, c := range cs {
		if len(at[c]) != len(cs) {
			t.Errorf("%s ran at positions %v, want each of %d", c, at[c], len(cs))
		}
	}
	if got := order(1, []int{1, 2}); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("two contenders, second run: %v", got)
	}
}

func TestRatio(t *testing.T) {
	a, b := summarize(ms(30)), summarize(ms(20))
	if got := ratio(a, b); got != "1.50×" {
		t.Errorf("ratio %q", got)
	}
	if got := ratio(a, summary{}); got != "—" {
		t.Errorf("ratio to nothing %q", got)
	}
}

func TestTable(t *testing.T) {
	got := table([][]string{{"a", "long header"}, {"wide cell", "x"}, {"é"}})
	want := "" +
		"| a         | long header |\n" +
		"| --------- | ----------- |\n" +
		"| wide cell | x           |\n" +
		"| é         |             |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestBenchMetrics(t *testing.T) {
	out := strings.Join([]string{
		"goos: linux",
		"BenchmarkAlertStorm-2   	       1	12345678 ns/op	       812.5 events/s	      1000 noops/s	         1.000 operations",
		"    storm_test.go:12: BenchmarkAlertStorm said something",
		"BenchmarkAlertStormX-2 1 5 ns/op 3 other",
		"BenchmarkAlertStorm 1 99 ns/op 2.000 operations",
		"PASS",
	}, "\n")
	got := benchMetrics(out, "BenchmarkAlertStorm")
	if len(got) != 2 {
		t.Fatalf("got %d result lines: %v", len(got), got)
	}
	if got[0]["events/s"] != 812.5 || got[0]["noops/s"] != 1000 || got[0]["operations"] != 1 || got[0]["ns/op"] != 12345678 {
		t.Errorf("first line: %v", got[0])
	}
	if got[1]["operations"] != 2 {
		t.Errorf("second line: %v", got[1])
	}
}

func TestReassignmentDone(t *testing.T) {
	for out, want := range map[string]bool{
		"Status of partition reassignment:\nReassignment of partition t-0 is completed.\nReassignment of partition t-1 is completed.\n":         true,
		"Status of partition reassignment:\nReassignment of partition t-0 is completed.\nReassignment of partition t-1 is still in progress.\n": false,
		"Status of partition reassignment:\nThere is no active reassignment of partition t-0, but replica set is [1, 2] rather than [2, 1].\n":  false,
		"": false,
	} {
		if got := reassignmentDone(out); got != want {
			t.Errorf("reassignmentDone(%q) = %v", out, got)
		}
	}
}

func TestParseKafkaLog(t *testing.T) {
	for msg, want := range map[string]struct {
		kind      string
		write, ok bool
	}{
		"wrote ElectLeaders v2":                        {"ElectLeaders", true, true},
		"read Metadata v12":                            {"Metadata", false, true},
		"wrote ElectLeaders":                           {},
		"read from broker errored, killing connection": {},
		"initializing producer id":                     {},
	} {
		kind, write, ok := parseKafkaLog(msg)
		if kind != want.kind || write != want.write || ok != want.ok {
			t.Errorf("parseKafkaLog(%q) = %q %v %v", msg, kind, write, ok)
		}
	}
}

func TestOverhead(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	call := func(ms int, cluster string, write bool, kind string) kafkaCall {
		return kafkaCall{at: at(ms), cluster: cluster, write: write, kind: kind}
	}
	calls := []kafkaCall{
		call(-5, "local", true, "ElectLeaders"), // before the receipt: another event
		call(2, "kraft", true, "ElectLeaders"),  // another cluster
		call(3, "local", true, "Metadata"),      // a read request: not the first write
		call(4, "local", false, "Metadata"),
		call(9, "local", true, "AlterPartitionAssignments"),
		call(10, "local", false, "AlterPartitionAssignments"),
		call(12, "local", true, "ElectLeaders"),
		call(30, "local", false, "Metadata"),                           // the verifying read
		{at: at(35), cluster: "local", kind: "published", phase: true}, // an engine phase: no request
		call(41, "local", false, "Metadata"),                           // after the result: not this event's
	}
	before, after, ok := overhead(calls, "local", at(0), at(40))
	if !ok || before != 9*time.Millisecond || after != 10*time.Millisecond {
		t.Errorf("overhead = %s, %s, %v; want 9ms, 10ms", before, after, ok)
	}
	if _, _, ok := overhead(calls[:4], "local", at(0), at(40)); ok {
		t.Error("no mutating write: want ok false")
	}
}

func TestSummarizeF(t *testing.T) {
	s := summarizeF([]float64{8104, 7000, 9000, 7500})
	if s.median != 7802 || s.min != 7000 || s.max != 9000 || s.n != 4 {
		t.Errorf("%+v", s)
	}
	if got := s.format("%.0f"); got != "7802 (7000–9000)" {
		t.Errorf("format %q", got)
	}
	if got := summarizeF(nil).format("%.0f"); got != "—" {
		t.Errorf("empty %q", got)
	}
}

func TestCopied(t *testing.T) {
	sizes := map[int32]int64{0: 100, 1: 10}
	before := map[int32][]int32{0: {1, 2}, 1: {2, 3}}
	// Partition 0 gains one replica (100); partition 1 moves entirely to three new ones (30).
	after := map[int32][]int32{0: {1, 2, 3}, 1: {4, 1, 5}}
	if got := copied(sizes, before, after); got != 130 {
		t.Errorf("copied %d, want 130", got)
	}
	if got := copied(sizes, before, before); got != 0 {
		t.Errorf("no change copied %d", got)
	}
}

// Every partition is headed by the demoted broker, with distinct replicas, and the other
// brokers hold equal shares of the followers.
func TestLedBy(t *testing.T) {
	for _, brokers := range [][]int32{{1, 2, 3, 4}, {1, 2, 3}} {
		a := ledBy(1, brokers, 12)
		count := map[int32]int{}
		for i, r := range a {
			if len(r) != 3 || r[0] != 1 || r[1] == r[2] || r[1] == 1 || r[2] == 1 {
				t.Fatalf("brokers %v, partition %d: %v", brokers, i, r)
			}
			count[r[1]]++
			count[r[2]]++
		}
		for _, b := range brokers[1:] {
			if count[b] != 2*12/(len(brokers)-1) {
				t.Errorf("brokers %v: broker %d follows %d partitions (%v)", brokers, b, count[b], count)
			}
		}
	}
}

func TestRFAssignment(t *testing.T) {
	a := rfAssignment([]int32{1, 2, 3, 4})
	if len(a) != rfPartitions {
		t.Fatalf("%d partitions", len(a))
	}
	for i, r := range a {
		if len(r) != 2 || r[0] == r[1] {
			t.Errorf("partition %d: %v", i, r)
		}
	}
}
