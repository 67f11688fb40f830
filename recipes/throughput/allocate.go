package throughput

import "math/bits"

// Want is one member's input to Allocate.
type Want struct {
	// Weight is the member's relative weight; below 1 counts as 1, above
	// MaxWeight as MaxWeight.
	Weight int64
	// Demand is the most the member wants; negative means unlimited.
	Demand int64
}

// MaxWeight is the largest weight a member may have.
const MaxWeight = 1_000_000

func (c Want) weight() uint64 {
	return uint64(min(max(c.Weight, 1), MaxWeight))
}

func (c Want) limited() bool { return c.Demand >= 0 }

// Allocate splits limit among wants (in join order) and returns one integer
// share per want. It is a pure function with these guarantees, whatever the
// input (a negative limit counts as 0):
//
//   - The shares are never negative and sum exactly to limit (when there is at
//     least one want).
//   - Without demands, shares are proportional to weight: each member gets
//     floor(limit*weight/totalWeight), and the units left over (fewer than the
//     number of members) go one each to the earliest members.
//   - With demands, the split is max-min fair by weight (water-filling): while
//     any member's demand is unmet, nobody gets more than it demands, and the
//     members whose demand is unmet share what is left by weight, as above.
//   - When every demand is met, the surplus beyond all demands is spread over
//     every member by weight, as above.
//
// Products are computed in 128 bits, so no input overflows.
func Allocate(limit int64, wants []Want) []int64 {
	shares := make([]int64, len(wants))
	if len(wants) == 0 {
		return shares
	}
	rest := uint64(max(limit, 0))
	active := make([]int, 0, len(wants))
	for i := range wants {
		active = append(active, i)
	}
	// Water-filling: at the fair level rest/weight(active), every limited member
	// whose demand fits below its fair share is met exactly and leaves; meeting
	// them only raises the level for the others, so repeat until nobody fits.
	for len(active) > 0 {
		var total uint64
		for _, i := range active {
			total += wants[i].weight()
		}
		kept := active[:0]
		met := false
		for _, i := range active {
			c := wants[i]
			// demand/weight <= rest/total, i.e. demand*total <= rest*weight.
			if c.limited() && !mulGreater128(uint64(c.Demand), total, rest, c.weight()) {
				shares[i] = c.Demand
				rest -= uint64(c.Demand)
				met = true
				continue
			}
			kept = append(kept, i)
		}
		active = kept
		if !met {
			break
		}
	}
	if len(active) == 0 {
		// Every demand is met: the surplus goes to everyone by weight.
		active = active[:0]
		for i := range wants {
			active = append(active, i)
		}
	}
	splitByWeight(rest, wants, active, shares)
	return shares
}

// splitByWeight adds rest to the shares of members (in join order) in proportion to
// their weights, flooring, then gives the units left one each to the earliest.
func splitByWeight(rest uint64, wants []Want, members []int, shares []int64) {
	var total uint64
	for _, i := range members {
		total += wants[i].weight()
	}
	left := rest
	for _, i := range members {
		// rest*weight/total <= rest, so the quotient fits in 64 bits.
		hi, lo := bits.Mul64(rest, wants[i].weight())
		q, _ := bits.Div64(hi, lo, total)
		shares[i] += int64(q)
		left -= q
	}
	for _, i := range members {
		if left == 0 {
			break
		}
		shares[i]++
		left--
	}
}

// mulGreater128 reports whether a*b > c*d, in 128 bits.
func mulGreater128(a, b, c, d uint64) bool {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	return h1 > h2 || (h1 == h2 && l1 > l2)
}
