package plan

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

func rep(topic string, p int32, size int64) LogDirReplica {
	return LogDirReplica{TopicPartition: model.TopicPartition{Topic: topic, Partition: p}, Size: size}
}

func future(topic string, p int32, size int64) LogDirReplica {
	r := rep(topic, p, size)
	r.Future = true
	return r
}

func tpp(topic string, p int32) *model.TopicPartition {
	return &model.TopicPartition{Topic: topic, Partition: p}
}

func TestLogDirMovesRejects(t *testing.T) {
	two := []LogDir{
		{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 100), rep("t", 1, 50)}},
		{Path: "/b", Replicas: []LogDirReplica{rep("u", 0, 10)}},
	}
	withOffline := []LogDir{two[0], two[1], {Path: "/c", Err: "KAFKA_STORAGE_ERROR"}}
	moving := []LogDir{two[0], {Path: "/b", Replicas: []LogDirReplica{future("t", 1, 20)}}}
	for _, tc := range []struct {
		name string
		dirs []LogDir
		req  LogDirRequest
		want string
	}{
		{"unknown target", two, LogDirRequest{Broker: 1, Replica: tpp("t", 0), To: "/x"}, `to_dir "/x" is not a log directory of broker 1 (its directories: /a, /b)`},
		{"offline target", withOffline, LogDirRequest{Broker: 1, Replica: tpp("t", 0), To: "/c"}, `to_dir "/c" of broker 1 is offline: KAFKA_STORAGE_ERROR`},
		{"not on broker", withOffline, LogDirRequest{Broker: 1, Replica: tpp("v", 0), To: "/b"}, `v-0 has no replica on broker 1 (or it is on an offline directory: /c)`},
		{"explicit in progress", moving, LogDirRequest{Broker: 1, Replica: tpp("t", 1), To: "/a"}, `a move of t-1 to "/b" is already in progress on broker 1`},
		{"same dirs", two, LogDirRequest{Broker: 1, From: "/a", To: "/a"}, `from_dir and to_dir are the same directory "/a"`},
		{"unknown source", two, LogDirRequest{Broker: 1, From: "/x", To: "/b"}, `from_dir "/x" is not a log directory`},
		{"offline source", withOffline, LogDirRequest{Broker: 1, From: "/c", To: "/b"}, `from_dir "/c" of broker 1 is offline`},
		{"one dir", two[:1], LogDirRequest{Broker: 1}, `broker 1 has 1 online log directories (/a): nothing to balance`},
		{"one online dir", []LogDir{two[0], {Path: "/c", Err: "KAFKA_STORAGE_ERROR"}}, LogDirRequest{Broker: 1}, `has 1 online log directories (/a, /c (offline))`},
		{"balance in progress", moving, LogDirRequest{Broker: 1}, `moves between log directories are in progress on broker 1 (t-1 → /b)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LogDirMoves(tc.dirs, tc.req)
			var re *RejectError
			if err == nil || !asReject(err, &re) {
				t.Fatalf("err = %v, want a rejection", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func asReject(err error, re **RejectError) bool {
	r, ok := err.(*RejectError)
	*re = r
	return ok
}

func TestLogDirMovesExplicit(t *testing.T) {
	dirs := []LogDir{
		{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 100), rep("t", 1, 50)}},
		{Path: "/b", Replicas: []LogDirReplica{rep("u", 0, 10)}},
	}
	p, err := LogDirMoves(dirs, LogDirRequest{Broker: 1, Replica: tpp("t", 1), To: "/b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || p.Changes[0].DirBefore != "/a" || p.Changes[0].DirAfter != "/b" || p.Changes[0].Bytes != 50 || *p.Changes[0].Broker != 1 {
		t.Fatalf("changes = %+v", p.Changes)
	}
	if p.FromBytesAfter != 100 || p.ToBytesAfter != 60 {
		t.Errorf("after = %d/%d, want 100/60", p.FromBytesAfter, p.ToBytesAfter)
	}
	p, err = LogDirMoves(dirs, LogDirRequest{Broker: 1, Replica: tpp("u", 0), To: "/b"})
	if err != nil || len(p.Changes) != 0 || len(p.Noop) != 1 {
		t.Fatalf("already there: plan %+v, err %v; want a noop", p, err)
	}
}

func TestLogDirMovesBalance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dirs      []LogDir
		req       LogDirRequest
		wantMoves []string // topic-partition
		reached   bool
	}{
		{
			name: "within tolerance",
			dirs: []LogDir{{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 105)}}, {Path: "/b", Replicas: []LogDirReplica{rep("t", 1, 95)}}},
			req:  LogDirRequest{Broker: 1, Tolerance: 0.1}, reached: true,
		},
		{
			// d = 100, allowed 10: move x in [45, 55]; 50 alone beats 30+20 (same bytes) by order, 60 overshoots.
			name: "smallest sum in range",
			dirs: []LogDir{{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 60), rep("t", 1, 30), rep("t", 2, 20), rep("t", 3, 47)}}, {Path: "/b", Replicas: []LogDirReplica{rep("t", 9, 57)}}},
			req:  LogDirRequest{Broker: 1, Tolerance: 0.05}, wantMoves: []string{"t-3"}, reached: true,
		},
		{
			name: "fullest to emptiest of three",
			dirs: []LogDir{
				{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 10)}},
				{Path: "/b", Replicas: []LogDirReplica{rep("t", 1, 40), rep("t", 2, 40)}},
				{Path: "/c"},
			},
			req: LogDirRequest{Broker: 1, Tolerance: 0.01}, wantMoves: []string{"t-1"}, reached: true,
		},
		{
			// One replica larger than the imbalance: moving it makes things worse.
			name: "nothing improves",
			dirs: []LogDir{{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 200)}}, {Path: "/b", Replicas: []LogDirReplica{rep("t", 2, 150)}}},
			req:  LogDirRequest{Broker: 1, From: "/a", To: "/b", Tolerance: 0.01}, reached: false,
		},
		{
			// d = 100, range [49, 51] unreachable with 40 and 70: 40 leaves 20, 70 leaves 40.
			name: "best improvement when out of reach",
			dirs: []LogDir{{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 40), rep("t", 1, 70)}}, {Path: "/b", Replicas: []LogDirReplica{rep("t", 2, 10)}}},
			req:  LogDirRequest{Broker: 1, Tolerance: 0.01}, wantMoves: []string{"t-0"}, reached: false,
		},
		{
			name: "explicit source and target",
			dirs: []LogDir{{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 10)}}, {Path: "/b", Replicas: []LogDirReplica{rep("t", 1, 30), rep("t", 2, 30)}}, {Path: "/c", Replicas: []LogDirReplica{rep("t", 3, 90)}}},
			req:  LogDirRequest{Broker: 1, From: "/b", To: "/a", Tolerance: 0.2}, wantMoves: []string{"t-1"}, reached: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := LogDirMoves(tc.dirs, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ch := range p.Changes {
				got = append(got, ch.TopicPartition.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.wantMoves, ",") {
				t.Errorf("moves = %v, want %v", got, tc.wantMoves)
			}
			if p.Reached != tc.reached {
				t.Errorf("reached = %v, want %v", p.Reached, tc.reached)
			}
		})
	}
}

// A protected topic's replicas never move: a balance picks among the others and lists the
// protected replicas it would have moved; an explicit move of one is rejected.
func TestLogDirMovesProtected(t *testing.T) {
	// d = 157 − 57 = 100, allowed 10: move x in [45, 55]. Unprotected, p-3 (47) alone is
	// the smallest sum in range.
	dirs := func() []LogDir {
		return []LogDir{
			{Path: "/a", Replicas: []LogDirReplica{rep("t", 0, 60), rep("t", 1, 30), rep("t", 2, 20), rep("p", 3, 47)}},
			{Path: "/b", Replicas: []LogDirReplica{rep("u", 0, 57)}},
		}
	}
	for _, tc := range []struct {
		name      string
		dirs      []LogDir
		req       LogDirRequest
		wantMoves []string
		wantSkips []string // topic-partition: reason
		reached   bool
		reject    string
	}{
		{
			name: "without guardrails",
			dirs: dirs(), req: LogDirRequest{Broker: 1, Tolerance: 0.05},
			wantMoves: []string{"p-3"}, reached: true,
		},
		{
			name: "the protected replica it would move is skipped; the balance picks among the others",
			dirs: dirs(), req: LogDirRequest{Broker: 1, Tolerance: 0.05, Protected: protect("^p$")},
			wantMoves: []string{"t-1", "t-2"}, reached: true,
			wantSkips: []string{`p-3: topic "p" is protected: it matches "^p$" (guardrails.protected_topics)`},
		},
		{
			name: "a protected replica it would not move is not listed",
			dirs: dirs(), req: LogDirRequest{Broker: 1, Tolerance: 0.05, Protected: protect("^t$")},
			wantMoves: []string{"p-3"}, reached: true,
		},
		{
			name: "everything protected: nothing moves, what would have is listed",
			dirs: dirs(), req: LogDirRequest{Broker: 1, Tolerance: 0.05, Protected: protect(".")},
			wantSkips: []string{`p-3: topic "p" is protected`},
		},
		{
			// d = 100, allowed 8: [46, 54]. Unprotected: t-1 + t-2 = 50. Without them only
			// q-3 (80) is left: out of range, but it brings the two closer.
			name: "several would have moved: each listed, the best without them moves",
			dirs: []LogDir{
				{Path: "/a", Replicas: []LogDirReplica{rep("t", 2, 30), rep("q", 3, 80), rep("t", 1, 20)}},
				{Path: "/b", Replicas: []LogDirReplica{rep("u", 0, 30)}},
			},
			req:       LogDirRequest{Broker: 1, Tolerance: 0.05, Protected: protect("^t$")},
			wantMoves: []string{"q-3"}, reached: false,
			wantSkips: []string{`t-1: topic "t" is protected`, `t-2: topic "t" is protected`},
		},
		{
			name: "within the tolerance: nothing to skip",
			dirs: []LogDir{{Path: "/a", Replicas: []LogDirReplica{rep("p", 0, 105)}}, {Path: "/b", Replicas: []LogDirReplica{rep("t", 1, 95)}}},
			req:  LogDirRequest{Broker: 1, Tolerance: 0.1, Protected: protect("^p$")}, reached: true,
		},
		{
			name:   "explicit move of a protected replica",
			dirs:   dirs(),
			req:    LogDirRequest{Broker: 1, Replica: tpp("p", 3), To: "/b", Protected: protect("^p$")},
			reject: `guardrails.protected_topics: topic "p" matches "^p$"`,
		},
		{
			name: "explicit move of another replica",
			dirs: dirs(), req: LogDirRequest{Broker: 1, Replica: tpp("t", 1), To: "/b", Protected: protect("^p$")},
			wantMoves: []string{"t-1"}, reached: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := LogDirMoves(tc.dirs, tc.req)
			if tc.reject != "" {
				var re *RejectError
				if err == nil || !asReject(err, &re) || err.Error() != tc.reject {
					t.Fatalf("err = %v, want the rejection %q", err, tc.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ch := range p.Changes {
				got = append(got, ch.TopicPartition.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.wantMoves, ",") {
				t.Errorf("moves = %v, want %v", got, tc.wantMoves)
			}
			if p.Reached != tc.reached {
				t.Errorf("reached = %v, want %v", p.Reached, tc.reached)
			}
			if len(p.Skipped) != len(tc.wantSkips) {
				t.Fatalf("skipped = %+v, want %q", p.Skipped, tc.wantSkips)
			}
			for i, sk := range p.Skipped {
				if s := sk.TopicPartition.String() + ": " + sk.Reason; !strings.HasPrefix(s, tc.wantSkips[i]) || sk.Code != SkipProtected {
					t.Errorf("skipped[%d] = %q (%s), want prefix %q (protected)", i, s, sk.Code, tc.wantSkips[i])
				}
			}
		})
	}
}

// TestLogDirBalanceProtectedRandom checks, on random directories with protected topics,
// that no protected replica moves, that the skips are exactly the protected replicas the
// same balance would move unprotected, and that the moves are the best among the others.
func TestLogDirBalanceProtectedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 2026))
	skipsSeen := 0
	for iter := range 400 {
		n := 1 + rng.IntN(12)
		if iter%10 == 0 {
			n = 33 + rng.IntN(60) // the greedy planner
		}
		var from []LogDirReplica
		for i := range n {
			from = append(from, rep([]string{"p", "q", "t"}[rng.IntN(3)], int32(i), 1+rng.Int64N(1000)))
		}
		dirs := []LogDir{{Path: "/a", Replicas: from}, {Path: "/b", Replicas: []LogDirReplica{rep("u", 0, rng.Int64N(500))}}}
		tol := []float64{0, 0.01, 0.05, 0.2}[rng.IntN(4)]
		req := LogDirRequest{Broker: 1, From: "/a", To: "/b", Tolerance: tol}
		open, err := LogDirMoves(dirs, req)
		if err != nil {
			t.Fatal(err)
		}
		req.Protected = protect("^[pq]$")
		got, err := LogDirMoves(dirs, req)
		if err != nil {
			t.Fatal(err)
		}
		var wantSkips, gotSkips []string
		for _, ch := range open.Changes {
			if ch.Topic != "t" {
				wantSkips = append(wantSkips, ch.TopicPartition.String())
			}
		}
		for _, sk := range got.Skipped {
			gotSkips = append(gotSkips, sk.TopicPartition.String())
		}
		slices.Sort(wantSkips)
		slices.Sort(gotSkips)
		if !slices.Equal(gotSkips, wantSkips) {
			t.Fatalf("iter %d: skipped %v, want the protected moves of the unprotected plan %v", iter, gotSkips, wantSkips)
		}
		skipsSeen += len(gotSkips)
		var x int64
		for _, ch := range got.Changes {
			if ch.Topic != "t" {
				t.Fatalf("iter %d: moves %s, of a protected topic", iter, ch.TopicPartition)
			}
			x += ch.Bytes
		}
		if n > exactLimit {
			continue
		}
		var sizes []int64
		for _, r := range from {
			if r.Topic == "t" {
				sizes = append(sizes, r.Size)
			}
		}
		d := dirs[0].Size() - dirs[1].Size()
		if d <= got.Allowed {
			continue
		}
		best, inRange := bruteDirBalance(sizes, d, (d-got.Allowed+1)/2, (d+got.Allowed)/2)
		if x != best || got.Reached != inRange {
			t.Fatalf("iter %d: moved %d (reached %v), the best among unprotected replicas is %d (in range %v)", iter, x, got.Reached, best, inRange)
		}
	}
	if skipsSeen < 100 {
		t.Errorf("only %d protected replicas skipped: the generator is too weak", skipsSeen)
	}
}

// bruteDirBalance is the best a balance can move of replicas of sizes with imbalance d and
// tolerance range [lo, hi], over every subset: the smallest sum in range, else the sum that
// brings the two closest (fewer bytes on a tie), never d or more.
func bruteDirBalance(sizes []int64, d, lo, hi int64) (best int64, inRange bool) {
	best = -1
	for m := 1; m < 1<<len(sizes); m++ {
		var s int64
		for i := range sizes {
			if m&(1<<i) != 0 {
				s += sizes[i]
			}
		}
		if s >= d {
			continue
		}
		in := s >= lo && s <= hi
		switch {
		case best < 0, in && !inRange:
			best, inRange = s, in
		case in && inRange && s < best:
			best = s
		case !in && !inRange && (abs(d-2*s) < abs(d-2*best) || abs(d-2*s) == abs(d-2*best) && s < best):
			best = s
		}
	}
	return max(best, 0), inRange
}

// TestLogDirBalanceMinimal checks the exact planner against every subset, and the greedy
// planner's bounds, on random directories.
func TestLogDirBalanceMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 400 {
		n := 1 + rng.IntN(12)
		if iter%10 == 0 {
			n = 33 + rng.IntN(60) // the greedy planner
		}
		var from []LogDirReplica
		for i := range n {
			from = append(from, rep("t", int32(i), 1+rng.Int64N(1000)))
		}
		to := []LogDirReplica{rep("u", 0, rng.Int64N(500))}
		tol := []float64{0, 0.01, 0.05, 0.2}[rng.IntN(4)]
		dirs := []LogDir{{Path: "/a", Replicas: from}, {Path: "/b", Replicas: to}}
		p, err := LogDirMoves(dirs, LogDirRequest{Broker: 1, From: "/a", To: "/b", Tolerance: tol})
		if err != nil {
			t.Fatal(err)
		}
		fb, tb := dirs[0].Size(), dirs[1].Size()
		d := fb - tb
		var x int64
		for _, ch := range p.Changes {
			x += ch.Bytes
		}
		if d > 0 && x > d {
			t.Fatalf("iter %d: moved %d bytes, more than the imbalance %d", iter, x, d)
		}
		if d > p.Allowed && x > 0 && abs(d-2*x) >= d {
			t.Fatalf("iter %d: moving %d of imbalance %d does not improve it", iter, x, d)
		}
		lo, hi := (d-p.Allowed+1)/2, (d+p.Allowed)/2
		if d <= p.Allowed {
			if len(p.Changes) != 0 {
				t.Fatalf("iter %d: within tolerance, yet moves %d", iter, len(p.Changes))
			}
			continue
		}
		if n > exactLimit {
			if p.Reached && (x < lo || x > hi) {
				t.Fatalf("iter %d (greedy): reached with x=%d outside [%d,%d]", iter, x, lo, hi)
			}
			continue
		}
		// Brute force: the smallest sum in range, else the best improvement.
		sizes := make([]int64, n)
		for i, r := range from {
			sizes[i] = r.Size
		}
		best, inRange := bruteDirBalance(sizes, d, lo, hi)
		if x != best || p.Reached != inRange {
			t.Fatalf("iter %d: moved %d (reached %v), brute force %d (in range %v); d=%d range [%d,%d]", iter, x, p.Reached, best, inRange, d, lo, hi)
		}
	}
}
