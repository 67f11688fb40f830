package partition

import "sort"

// Weighted is one live member as the plan sees it: its id and weight (>= 1),
// given in join order.
type Weighted struct {
	ID     string
	Weight int64
}

// Plan deals n partitions (0..n-1) among members (in join order) and returns
// each partition's member id. prev holds each partition's member id in the
// previous plan ("" or an id no longer live: none); it may be shorter than n
// (new partitions) or nil. Plan is pure and deterministic:
//
//   - every partition goes to exactly one member (none when members is empty);
//   - balanced: member i gets floor(n*w_i/W) or that plus one partitions (W the
//     sum of the weights), so with equal weights sizes differ by at most one;
//   - sticky: of all balanced plans, it keeps the most partitions where prev
//     had them, so a join or a leave moves as few partitions as possible.
//
// The plus-ones (n minus the sum of the floors) go first to members that held
// more than their floor (each such one keeps one more partition), then by the
// largest remainder, then in join order. Each member keeps its lowest-numbered
// previous partitions; the rest are dealt in partition order to members in
// join order.
func Plan(n int, members []Weighted, prev []string) []string {
	out := make([]string, n)
	if len(members) == 0 || n == 0 {
		return out
	}
	held := Held(n, members, prev)
	target := Targets(n, members, held)
	index := make(map[string]int, len(members))
	for i, m := range members {
		index[m.ID] = i
	}
	kept := make([]int, len(members))
	var free []int
	for p := 0; p < n; p++ {
		i, ok := -1, false
		if p < len(prev) {
			i, ok = index[prev[p]]
		}
		if ok && kept[i] < target[i] {
			kept[i]++
			out[p] = members[i].ID
			continue
		}
		free = append(free, p)
	}
	next := 0
	for i, m := range members {
		for ; kept[i] < target[i]; kept[i]++ {
			out[free[next]] = m.ID
			next++
		}
	}
	return out
}

// Held counts the partitions (of n) each member holds in prev.
func Held(n int, members []Weighted, prev []string) []int {
	index := make(map[string]int, len(members))
	for i, m := range members {
		index[m.ID] = i
	}
	held := make([]int, len(members))
	for p := 0; p < n && p < len(prev); p++ {
		if i, ok := index[prev[p]]; ok {
			held[i]++
		}
	}
	return held
}

// Targets is how many partitions each member gets: its floor of n*w/W, plus
// one for as many members (with a remainder) as n exceeds the sum of the
// floors, chosen as Plan says.
func Targets(n int, members []Weighted, held []int) []int {
	var total int64
	for _, m := range members {
		total += m.Weight
	}
	target := make([]int, len(members))
	rem := make([]int64, len(members))
	left := n
	for i, m := range members {
		exact := int64(n) * m.Weight
		target[i] = int(exact / total)
		rem[i] = exact % total
		left -= target[i]
	}
	var order []int
	for i := range members {
		if rem[i] > 0 {
			order = append(order, i)
		}
	}
	gains := func(i int) bool { return held[i] > target[i] }
	sort.SliceStable(order, func(a, b int) bool {
		i, j := order[a], order[b]
		if gains(i) != gains(j) {
			return gains(i)
		}
		return rem[i] > rem[j]
	})
	for _, i := range order[:left] {
		target[i]++
	}
	return target
}
