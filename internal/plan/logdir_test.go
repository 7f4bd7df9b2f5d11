package plan

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/kafka"
)

func rep(topic string, p int32, size int64) LogDirReplica {
	return LogDirReplica{TopicPartition: kafka.TopicPartition{Topic: topic, Partition: p}, Size: size}
}

func future(topic string, p int32, size int64) LogDirReplica {
	r := rep(topic, p, size)
	r.Future = true
	return r
}

func tpp(topic string, p int32) *kafka.TopicPartition {
	return &kafka.TopicPartition{Topic: topic, Partition: p}
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
		best := int64(-1)
		inRange := false
		for m := 1; m < 1<<n; m++ {
			var s int64
			for i := range n {
				if m&(1<<i) != 0 {
					s += from[i].Size
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
		if best < 0 {
			best = 0
		}
		if x != best || p.Reached != inRange {
			t.Fatalf("iter %d: moved %d (reached %v), brute force %d (in range %v); d=%d range [%d,%d]", iter, x, p.Reached, best, inRange, d, lo, hi)
		}
	}
}
