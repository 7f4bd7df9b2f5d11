package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/kafkamender/kafkamender/internal/model"
)

// LogDirReplica is one replica in a log directory, as DescribeLogDirs reports it.
type LogDirReplica struct {
	model.TopicPartition
	Size int64
	// Future: the future replica of a move in progress (AlterReplicaLogDirs), not yet
	// swapped in.
	Future bool
}

// LogDir is one log directory (disk) of a broker.
type LogDir struct {
	Path string
	// Err is why the directory cannot be used (offline: KAFKA_STORAGE_ERROR); "" when online.
	Err      string
	Replicas []LogDirReplica
}

// Size is the bytes of the directory's current (not future) replicas.
func (d LogDir) Size() int64 {
	var n int64
	for _, r := range d.Replicas {
		if !r.Future {
			n += r.Size
		}
	}
	return n
}

// LogDirRequest is a logdir-move-requested event, for one broker.
type LogDirRequest struct {
	Broker int32
	// Replica, when set, is an explicit move of that replica to To.
	Replica *model.TopicPartition
	// From and To are the directories of a balance move; empty: the fullest and the
	// emptiest online directory.
	From, To string
	// Tolerance is how close the two directories must end, as a fraction of their combined
	// size: |from − to| ≤ Tolerance × (from + to). Balance moves only.
	Tolerance float64
	// Protected topics are never moved (guardrails.protected_topics); nil: none.
	Protected Protected
}

// LogDirPlan is a plan of log-dir moves: Changes carry Broker, DirBefore, DirAfter and
// Bytes (the planner knows no replica lists: the caller fills them in).
type LogDirPlan struct {
	Plan
	From, To string
	// FromBytes and ToBytes are the directories' sizes now; …After what the plan leaves.
	FromBytes, ToBytes           int64
	FromBytesAfter, ToBytesAfter int64
	// Allowed is the difference the tolerance allows, in bytes.
	Allowed int64
	// Reached says whether the plan ends within the tolerance (false: no set of replicas
	// reaches it, and the plan is the best improvement there is).
	Reached bool
}

// exactLimit is the number of candidate replicas up to which the balance planner searches
// every subset (meet in the middle: 2 × 2^(n/2) sums).
const exactLimit = 32

// LogDirMoves plans a logdir-move-requested event from the broker's directories. It is a
// pure function.
//
// An explicit move (req.Replica) moves that replica to req.To: noop when it is there already.
//
// A balance move picks replicas of From to move to To so that the two directories end
// within the tolerance while moving as few bytes as reach it: with d the difference in
// size and t the difference the tolerance allows, it moves x bytes with
// (d − t)/2 ≤ x ≤ (d + t)/2, the smallest such x. Up to 32 candidate replicas every
// subset is searched (the result is the minimum); beyond, a greedy fill (largest replicas
// that do not overshoot the lower bound, then the smallest one that reaches it) lands
// within the tolerance above the minimum. It never moves more than the imbalance: when no
// set of replicas reaches the tolerance, it moves the set that brings the two directories
// closest (each replica smaller than d improves the balance; larger ones would make it
// worse and are never moved), and says so (Reached false). Directories already within the
// tolerance: nothing to do.
//
// Replicas of a topic req.Protected protects are never moved. A balance plans without
// them and lists in Skipped (SkipProtected) those that the same balance would have moved
// had they not been protected: not every protected replica of the directory.
//
// Rejected, with the reason: an unknown or offline directory, the same directory as source
// and target, a replica not on the broker, a move already in progress (a future replica of
// the partition, for an explicit move; any future replica on the broker, for a balance:
// one source directory at a time, and the sizes are in flux meanwhile), an explicit move
// of a protected topic's replica.
func LogDirMoves(dirs []LogDir, req LogDirRequest) (LogDirPlan, error) {
	byPath := map[string]*LogDir{}
	var online []string
	for i := range dirs {
		byPath[dirs[i].Path] = &dirs[i]
		if dirs[i].Err == "" {
			online = append(online, dirs[i].Path)
		}
	}
	sort.Strings(online)
	usable := func(field, path string) (*LogDir, error) {
		d, ok := byPath[path]
		if !ok {
			return nil, reject("%s %q is not a log directory of broker %d (its directories: %s)", field, path, req.Broker, listDirs(dirs))
		}
		if d.Err != "" {
			return nil, reject("%s %q of broker %d is offline: %s", field, path, req.Broker, d.Err)
		}
		return d, nil
	}
	if req.Replica != nil {
		return explicitMove(dirs, req, usable)
	}
	if req.From != "" && req.From == req.To {
		return LogDirPlan{}, reject("from_dir and to_dir are the same directory %q", req.From)
	}
	if len(online) < 2 {
		return LogDirPlan{}, reject("broker %d has %d online log directories (%s): nothing to balance", req.Broker, len(online), listDirs(dirs))
	}
	if moving := futures(dirs); len(moving) > 0 {
		return LogDirPlan{}, reject("moves between log directories are in progress on broker %d (%s): wait until they finish", req.Broker, strings.Join(moving, ", "))
	}
	from, to, err := pickDirs(byPath, online, req, usable)
	if err != nil {
		return LogDirPlan{}, err
	}
	return balanceDirs(from, to, req), nil
}

func explicitMove(dirs []LogDir, req LogDirRequest, usable func(string, string) (*LogDir, error)) (LogDirPlan, error) {
	tp := *req.Replica
	if pattern, ok := req.Protected.match(tp.Topic); ok {
		return LogDirPlan{}, reject("guardrails.protected_topics: topic %q matches %q", tp.Topic, pattern)
	}
	to, err := usable("to_dir", req.To)
	if err != nil {
		return LogDirPlan{}, err
	}
	var cur *LogDir
	var size int64
	for i := range dirs {
		for _, r := range dirs[i].Replicas {
			if r.TopicPartition != tp {
				continue
			}
			if r.Future {
				return LogDirPlan{}, reject("a move of %s to %q is already in progress on broker %d", tp, dirs[i].Path, req.Broker)
			}
			cur, size = &dirs[i], r.Size
		}
	}
	if cur == nil {
		var offline []string
		for _, d := range dirs {
			if d.Err != "" {
				offline = append(offline, d.Path)
			}
		}
		why := ""
		if len(offline) > 0 {
			why = fmt.Sprintf(" (or it is on an offline directory: %s)", strings.Join(offline, ", "))
		}
		return LogDirPlan{}, reject("%s has no replica on broker %d%s", tp, req.Broker, why)
	}
	p := LogDirPlan{From: cur.Path, To: to.Path, FromBytes: cur.Size(), ToBytes: to.Size(), Reached: true}
	if cur.Path == to.Path {
		p.Noop = []model.TopicPartition{tp}
		p.FromBytesAfter, p.ToBytesAfter = p.FromBytes, p.ToBytes
		return p, nil
	}
	p.Changes = []Change{dirChange(tp, req.Broker, cur.Path, to.Path, size)}
	p.FromBytesAfter, p.ToBytesAfter = p.FromBytes-size, p.ToBytes+size
	return p, nil
}

// pickDirs resolves the balance's source and target: given, or the fullest and the
// emptiest online directory (ties by path).
func pickDirs(byPath map[string]*LogDir, online []string, req LogDirRequest, usable func(string, string) (*LogDir, error)) (*LogDir, *LogDir, error) {
	var from, to *LogDir
	var err error
	if req.From != "" {
		if from, err = usable("from_dir", req.From); err != nil {
			return nil, nil, err
		}
	}
	if req.To != "" {
		if to, err = usable("to_dir", req.To); err != nil {
			return nil, nil, err
		}
	}
	// extreme is the online directory other than except that sorts first by better.
	extreme := func(except *LogDir, better func(a, b *LogDir) bool) *LogDir {
		var pick *LogDir
		for _, path := range online { // sorted: ties go to the first path
			if d := byPath[path]; d != except && (pick == nil || better(d, pick)) {
				pick = d
			}
		}
		return pick
	}
	if from == nil {
		from = extreme(to, func(a, b *LogDir) bool { return a.Size() > b.Size() })
	}
	if to == nil {
		to = extreme(from, func(a, b *LogDir) bool { return a.Size() < b.Size() })
	}
	return from, to, nil
}

func balanceDirs(from, to *LogDir, req LogDirRequest) LogDirPlan {
	fb, tb := from.Size(), to.Size()
	p := LogDirPlan{From: from.Path, To: to.Path, FromBytes: fb, ToBytes: tb, FromBytesAfter: fb, ToBytesAfter: tb}
	p.Allowed = int64(math.Floor(req.Tolerance * float64(fb+tb)))
	d := fb - tb
	if d <= p.Allowed {
		p.Reached = true
		return p
	}
	var cands []LogDirReplica
	for _, r := range from.Replicas {
		if !r.Future && r.Size > 0 && r.Size < d {
			cands = append(cands, r)
		}
	}
	slices.SortFunc(cands, func(a, b LogDirReplica) int {
		if c := cmp.Compare(b.Size, a.Size); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	lo, hi := (d-p.Allowed+1)/2, (d+p.Allowed)/2
	choose := func(cands []LogDirReplica) []LogDirReplica {
		if len(cands) <= exactLimit {
			return exactPick(cands, lo, hi, d)
		}
		return greedyPick(cands, lo, hi, d)
	}
	if req.Protected != nil {
		allowed := make([]LogDirReplica, 0, len(cands))
		for _, r := range cands {
			if _, ok := req.Protected(r.Topic); !ok {
				allowed = append(allowed, r)
			}
		}
		if len(allowed) < len(cands) {
			// Skip the protected replicas the balance would have moved, then balance without
			// any.
			for _, r := range choose(cands) {
				if pattern, ok := req.Protected(r.Topic); ok {
					p.Skipped = append(p.Skipped, protectedSkip(r.TopicPartition, pattern))
				}
			}
			slices.SortFunc(p.Skipped, func(x, y Skip) int { return compareTP(x.TopicPartition, y.TopicPartition) })
			cands = allowed
		}
	}
	pick := choose(cands)
	var x int64
	for _, r := range pick {
		x += r.Size
		p.Changes = append(p.Changes, dirChange(r.TopicPartition, req.Broker, from.Path, to.Path, r.Size))
	}
	p.FromBytesAfter, p.ToBytesAfter = fb-x, tb+x
	p.Reached = x >= lo && x <= hi
	return p
}

// exactPick returns the subset of cands with the smallest sum in [lo, hi]; when there is
// none, the one whose sum x brings |d − 2x| lowest (x < d), fewer bytes on a tie.
func exactPick(cands []LogDirReplica, lo, hi, d int64) []LogDirReplica {
	half := len(cands) / 2
	a, b := subsetSums(cands[:half]), subsetSums(cands[half:])
	slices.SortFunc(a, func(x, y sum) int { return cmp.Compare(x.n, y.n) })
	best, bestMask := int64(-1), [2]uint32{}
	better := func(x int64) bool {
		if best < 0 {
			return true
		}
		in, bin := x >= lo && x <= hi, best >= lo && best <= hi
		switch {
		case in != bin:
			return in
		case in:
			return x < best
		}
		dx, db := abs(d-2*x), abs(d-2*best)
		return dx < db || dx == db && x < best
	}
	for _, s := range b {
		// The smallest a ≥ lo − s, and the largest a < lo − s: the best candidates with s.
		i := sort.Search(len(a), func(i int) bool { return a[i].n >= lo-s.n })
		for _, j := range []int{i, i - 1} {
			if j < 0 || j >= len(a) {
				continue
			}
			x := a[j].n + s.n
			if x <= 0 || x >= d {
				continue
			}
			if better(x) {
				best, bestMask = x, [2]uint32{a[j].mask, s.mask}
			}
		}
	}
	if best < 0 {
		return nil
	}
	var out []LogDirReplica
	for i := range cands[:half] {
		if bestMask[0]&(1<<i) != 0 {
			out = append(out, cands[i])
		}
	}
	for i := range cands[half:] {
		if bestMask[1]&(1<<i) != 0 {
			out = append(out, cands[half+i])
		}
	}
	return out
}

type sum struct {
	n    int64
	mask uint32
}

func subsetSums(items []LogDirReplica) []sum {
	out := make([]sum, 1<<len(items))
	for m := 1; m < len(out); m++ {
		low := m & -m
		i := 0
		for 1<<i != low {
			i++
		}
		out[m] = sum{out[m^low].n + items[i].Size, uint32(m)}
	}
	return out
}

// greedyPick fills up to lo with the largest replicas that do not overshoot it, then adds
// the smallest replica that reaches lo without passing hi; when none does, it stops below
// lo if that is closer to balance than overshooting would be.
func greedyPick(cands []LogDirReplica, lo, hi, d int64) []LogDirReplica {
	var out []LogDirReplica
	used := make([]bool, len(cands))
	var x int64
	for i, r := range cands { // largest first
		if x+r.Size <= lo {
			out, used[i], x = append(out, r), true, x+r.Size
		}
	}
	if x >= lo {
		return out
	}
	finish := -1
	for i := len(cands) - 1; i >= 0; i-- { // smallest first
		if !used[i] && x+cands[i].Size >= lo && x+cands[i].Size <= hi {
			finish = i
			break
		}
	}
	if finish < 0 {
		// Nothing lands in range: overshoot with the smallest unused replica only if that
		// ends closer to balance.
		for i := len(cands) - 1; i >= 0; i-- {
			if !used[i] && x+cands[i].Size < d && abs(d-2*(x+cands[i].Size)) < abs(d-2*x) {
				finish = i
				break
			}
		}
	}
	if finish >= 0 {
		out = append(out, cands[finish])
	}
	return out
}

func dirChange(tp model.TopicPartition, broker int32, from, to string, size int64) Change {
	b := broker
	return Change{TopicPartition: tp, Broker: &b, DirBefore: from, DirAfter: to, Bytes: size}
}

func futures(dirs []LogDir) []string {
	var out []string
	for _, d := range dirs {
		for _, r := range d.Replicas {
			if r.Future {
				out = append(out, fmt.Sprintf("%s → %s", r.TopicPartition, d.Path))
			}
		}
	}
	sort.Strings(out)
	return out
}

func listDirs(dirs []LogDir) string {
	var out []string
	for _, d := range dirs {
		s := d.Path
		if d.Err != "" {
			s += " (offline)"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none reported"
	}
	return strings.Join(out, ", ")
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
