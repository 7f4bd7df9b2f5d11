package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteTopics tries every assignment of items to their candidates and returns the
// smallest sorted (largest first) load vector and, among the assignments that give it, the
// smallest per-topic square sum (topicBase[t][k]: topic t's leaders on broker k that stay).
func bruteTopics(base []int, topicBase [][]int, sets [][]int, topicOf []int) (best []int, bestS int) {
	load := slices.Clone(base)
	tl := make([][]int, len(topicBase))
	for t := range tl {
		tl[t] = slices.Clone(topicBase[t])
	}
	bestS = -1
	var walk func(i int)
	walk = func(i int) {
		if i == len(sets) {
			v := sortedDesc(load)
			c := -1
			if best != nil {
				c = slices.Compare(v, best)
			}
			if s := squares(tl); c < 0 || c == 0 && s < bestS {
				best, bestS = v, s
			}
			return
		}
		for _, k := range sets[i] {
			load[k]++
			tl[topicOf[i]][k]++
			walk(i + 1)
			load[k]--
			tl[topicOf[i]][k]--
		}
	}
	walk(0)
	return best, bestS
}

func squares(counts [][]int) int {
	s := 0
	for _, row := range counts {
		for _, n := range row {
			s += n * n
		}
	}
	return s
}

// TestBalanceTopicsOptimal checks balance followed by balanceTopics on arbitrary candidate
// sets, topics and starting counts against the brute force: the cluster-wide counts are
// as good as balance's, the per-topic square sum is the least among those, and when
// balance's choice was already the least, nothing changes.
func TestBalanceTopicsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 2))
	const cases = 3000
	improved := 0
	for i := range cases {
		nb := 2 + r.IntN(4)
		nt := 1 + r.IntN(3)
		load := make([]int, nb)
		for k := range load {
			load[k] = r.IntN(5)
		}
		leaders := make([][]int32, nt)
		topicBase := make([][]int, nt)
		for tt := range nt {
			topicBase[tt] = make([]int, nb)
			for range r.IntN(6) {
				k := r.IntN(nb)
				leaders[tt] = append(leaders[tt], int32(k))
				topicBase[tt][k]++
			}
		}
		n := 1 + r.IntN(8)
		cands := make([][]int32, n)
		sets := make([][]int, n)
		topicOf := make([]int32, n)
		topicOfI := make([]int, n)
		for j := range cands {
			topicOf[j] = int32(r.IntN(nt))
			topicOfI[j] = int(topicOf[j])
			for len(cands[j]) == 0 {
				for k := range nb {
					if r.IntN(2) == 0 {
						cands[j] = append(cands[j], int32(k))
						sets[j] = append(sets[j], k)
					}
				}
			}
		}
		start := slices.Clone(load)
		choice := balance(load, cands)
		old, oldLoad := slices.Clone(choice), slices.Clone(load)
		balanceTopics(load, cands, topicOf, leaders, choice)

		check := slices.Clone(start)
		tl := make([][]int, nt)
		oldTL := make([][]int, nt)
		for tt := range tl {
			tl[tt], oldTL[tt] = slices.Clone(topicBase[tt]), slices.Clone(topicBase[tt])
		}
		for j, c := range choice {
			if !slices.Contains(cands[j], c) {
				t.Fatalf("case %d: item %d got %d, not among %v", i, j, c, cands[j])
			}
			check[c]++
			tl[topicOf[j]][c]++
			oldTL[topicOf[j]][old[j]]++
		}
		if !slices.Equal(check, load) {
			t.Fatalf("case %d: loads %v do not match the choices (%v)", i, load, check)
		}
		best, bestS := bruteTopics(start, topicBase, sets, topicOfI)
		if got := sortedDesc(load); slices.Compare(got, best) != 0 || slices.Compare(got, sortedDesc(oldLoad)) != 0 {
			t.Fatalf("case %d: loads %v, balance alone %v, best %v", i, load, oldLoad, best)
		}
		s, oldS := squares(tl), squares(oldTL)
		if s != bestS {
			t.Fatalf("case %d: start %v, candidates %v, topics %v, topic base %v: square sum %d (%v), balance alone %d (%v), best %d",
				i, start, cands, topicOf, topicBase, s, choice, oldS, old, bestS)
		}
		if oldS == bestS && !slices.Equal(choice, old) {
			t.Fatalf("case %d: balance's choice %v was already best, changed to %v", i, old, choice)
		}
		if s < oldS {
			improved++
		}
	}
	if improved < 300 {
		t.Errorf("only %d cases improved on balance alone: the generator is too weak", improved)
	}
	t.Logf("%d of %d cases improved on balance alone", improved, cases)
}
