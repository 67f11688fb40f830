package partition

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// minMoves is the fewest partitions any balanced plan moves from prev,
// computed by trying every balanced size vector (each member its floor or,
// with a remainder, its floor plus one, summing to n): moves = n minus the
// most partitions kept, and a member keeps at most min(held, size).
func minMoves(n int, members []Weighted, prev []string) int {
	var total int64
	for _, m := range members {
		total += m.Weight
	}
	floors := make([]int, len(members))
	var extra []int
	left := n
	for i, m := range members {
		floors[i] = int(int64(n) * m.Weight / total)
		if int64(n)*m.Weight%total != 0 {
			extra = append(extra, i)
		}
		left -= floors[i]
	}
	held := make([]int, len(members))
	for p := 0; p < n && p < len(prev); p++ {
		for i, m := range members {
			if prev[p] == m.ID {
				held[i]++
			}
		}
	}
	best := -1
	for mask := 0; mask < 1<<len(extra); mask++ {
		sizes := slices.Clone(floors)
		count := 0
		for b, i := range extra {
			if mask&(1<<b) != 0 {
				sizes[i]++
				count++
			}
		}
		if count != left {
			continue
		}
		kept := 0
		for i := range members {
			kept += min(held[i], sizes[i])
		}
		best = max(best, kept)
	}
	return n - best
}

func moved(prev, next []string) int {
	n := 0
	for p := range next {
		if p >= len(prev) || prev[p] != next[p] {
			n++
		}
	}
	return n
}

// checkBalanced checks that every partition has one live member and that
// sizes are balanced (equal weights: differ by at most one).
func checkBalanced(n int, members []Weighted, plan []string) error {
	size := map[string]int{}
	var total int64
	equal := true
	for _, m := range members {
		total += m.Weight
		equal = equal && m.Weight == members[0].Weight
		size[m.ID] = 0
	}
	for p, id := range plan {
		if _, ok := size[id]; !ok {
			return fmt.Errorf("partition %d goes to %q, not a live member", p, id)
		}
		size[id]++
	}
	lo, hi := n, 0
	for _, m := range members {
		s := size[m.ID]
		floor := int(int64(n) * m.Weight / total)
		if s != floor && !(s == floor+1 && int64(n)*m.Weight%total != 0) {
			return fmt.Errorf("member %s (weight %d of %d) has %d of %d", m.ID, m.Weight, total, s, n)
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	if equal && hi-lo > 1 {
		return fmt.Errorf("equal weights, sizes from %d to %d", lo, hi)
	}
	return nil
}

// The plan over random joins, leaves, weight changes and set sizes: every
// partition to one live member, balanced, deterministic, and moving exactly
// the fewest partitions a balanced plan can.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(15))
	for run := 0; run < 300; run++ {
		n := 1 + rng.Intn(60)
		weighted := run%2 == 1
		var members []Weighted
		var plan []string
		next := 0
		for step := 0; step < 25; step++ {
			switch op := rng.Intn(10); {
			case op < 4 || len(members) == 0:
				w := int64(1)
				if weighted {
					w = 1 + rng.Int63n(4)
				}
				members = append(members, Weighted{ID: fmt.Sprintf("m%d", next), Weight: w})
				next++
			case op < 7:
				i := rng.Intn(len(members))
				members = slices.Delete(members, i, i+1)
			case op < 8 && weighted:
				members[rng.Intn(len(members))].Weight = 1 + rng.Int63n(4)
			case op < 9:
				n = 1 + rng.Intn(60)
			}
			if len(members) > 10 {
				members = members[1:]
			}
			if len(members) == 0 {
				continue
			}
			got := Plan(n, members, plan)
			if again := Plan(n, slices.Clone(members), slices.Clone(plan)); !slices.Equal(got, again) {
				t.Fatalf("run %d step %d: not deterministic", run, step)
			}
			if err := checkBalanced(n, members, got); err != nil {
				t.Fatalf("run %d step %d: %v (members %v)", run, step, err, members)
			}
			if m, want := moved(plan, got), minMoves(n, members, plan); m != want {
				t.Fatalf("run %d step %d: moved %d partitions, the fewest is %d (members %v, prev %v, got %v)", run, step, m, want, members, plan, got)
			}
			plan = got
		}
	}
}

// A leave moves only the leaver's partitions; a join takes only its share.
func TestPlanJoinAndLeave(t *testing.T) {
	ms := []Weighted{{"a", 1}, {"b", 1}, {"c", 1}}
	p := Plan(9, ms, nil)
	want := []string{"a", "a", "a", "b", "b", "b", "c", "c", "c"}
	if !slices.Equal(p, want) {
		t.Fatalf("first plan %v", p)
	}
	p2 := Plan(9, ms[:2], p)
	if moved(p, p2) != 3 {
		t.Fatalf("a leave moved %d: %v", moved(p, p2), p2)
	}
	p3 := Plan(9, append(slices.Clone(ms), Weighted{"d", 1}), p)
	if moved(p, p3) != 2 {
		t.Fatalf("a join moved %d: %v", moved(p, p3), p3)
	}
	if p := Plan(4, []Weighted{{"a", 3}, {"b", 1}}, nil); !slices.Equal(p, []string{"a", "a", "a", "b"}) {
		t.Fatalf("weights: %v", p)
	}
}

func BenchmarkPlan(b *testing.B) {
	ms := make([]Weighted, 100)
	for i := range ms {
		ms[i] = Weighted{ID: fmt.Sprintf("m%d", i), Weight: 1}
	}
	prev := Plan(10000, ms, nil)
	for b.Loop() {
		Plan(10000, ms[1:], prev)
	}
}
