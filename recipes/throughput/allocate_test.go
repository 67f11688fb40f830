package throughput

import (
	"math"
	"math/big"
	"slices"
	"testing"
)

// tpNoLimit is the demand of a member without one.
const tpNoLimit = -1

func tpWants(weights []int64, demands []int64) []Want {
	out := make([]Want, len(weights))
	for i, w := range weights {
		out[i] = Want{Weight: w, Demand: tpNoLimit}
		if demands != nil {
			out[i].Demand = demands[i]
		}
	}
	return out
}

func TestAllocateTable(t *testing.T) {
	cases := []struct {
		name    string
		limit   int64
		weights []int64
		demands []int64 // nil: all tpNoLimit
		want    []int64
	}{
		{"no members", 1000, nil, nil, []int64{}},
		{"one member", 1000, []int64{1}, nil, []int64{1000}},
		{"one member heavy", 7, []int64{5}, nil, []int64{7}},
		{"two equal", 1000, []int64{1, 1}, nil, []int64{500, 500}},
		{"three: remainder to the earliest", 1000, []int64{1, 1, 1}, nil, []int64{334, 333, 333}},
		{"four", 1000, []int64{1, 1, 1, 1}, nil, []int64{250, 250, 250, 250}},
		{"500 over three", 500, []int64{1, 1, 1}, nil, []int64{167, 167, 166}},
		{"remainder of 3 over 4", 7, []int64{1, 1, 1, 1}, nil, []int64{2, 2, 2, 1}},
		{"weights 1:3", 1000, []int64{1, 3}, nil, []int64{250, 750}},
		{"weights 1:2, remainder to the earliest", 10, []int64{1, 2}, nil, []int64{4, 6}},
		{"weights 3:1:1", 11, []int64{3, 1, 1}, nil, []int64{7, 2, 2}},
		{"limit 0", 0, []int64{1, 2, 3}, nil, []int64{0, 0, 0}},
		{"negative limit counts as 0", -5, []int64{1, 1}, nil, []int64{0, 0}},
		{"limit below the member count", 2, []int64{1, 1, 1, 1, 1}, nil, []int64{1, 1, 0, 0, 0}},
		{"weights below 1 count as 1", 10, []int64{0, -3}, nil, []int64{5, 5}},
		{"demand 100 and tpNoLimit", 1000, []int64{1, 1}, []int64{100, tpNoLimit}, []int64{100, 900}},
		{"demand above the fair share is not capped", 1000, []int64{1, 1}, []int64{600, tpNoLimit}, []int64{500, 500}},
		{"max-min: two small demands met, the rest split", 1000, []int64{1, 1, 1, 1}, []int64{100, 200, tpNoLimit, tpNoLimit}, []int64{100, 200, 350, 350}},
		{"max-min cascades", 100, []int64{1, 1, 1}, []int64{10, 40, 1000}, []int64{10, 40, 50}},
		{"all demands met: surplus by weight", 1000, []int64{1, 1}, []int64{100, 200}, []int64{450, 550}},
		{"all demands met exactly", 300, []int64{1, 1}, []int64{100, 200}, []int64{100, 200}},
		{"surplus by weight 1:3", 1000, []int64{1, 3}, []int64{0, 0}, []int64{250, 750}},
		{"demands exceed limit, weighted", 100, []int64{1, 3}, []int64{1000, 1000}, []int64{25, 75}},
		{"weighted water-filling", 100, []int64{1, 3}, []int64{1000, 30}, []int64{70, 30}},
		{"zero demand gets nothing while others unmet", 10, []int64{1, 1}, []int64{0, tpNoLimit}, []int64{0, 10}},
		{"limit 0 with demands", 0, []int64{1, 1}, []int64{5, tpNoLimit}, []int64{0, 0}},
		{"rounding never pushes above demand", 10, []int64{1, 1, 1}, []int64{3, 3, tpNoLimit}, []int64{3, 3, 4}},
		{"huge numbers do not overflow", math.MaxInt64, []int64{MaxWeight, MaxWeight, 1}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := tpWants(c.weights, c.demands)
			got := Allocate(c.limit, in)
			if c.want != nil && !slices.Equal(got, c.want) {
				t.Fatalf("Allocate(%d, %+v) = %v, want %v", c.limit, in, got, c.want)
			}
			checkAllocation(t, c.limit, in, got)
		})
	}
}

// The scenario of the issue, step by step (limit, then each member's weight).
func TestAllocateScenario(t *testing.T) {
	steps := []struct {
		limit int64
		n     int
		want  []int64
	}{
		{1000, 1, []int64{1000}},
		{1000, 2, []int64{500, 500}},
		{1000, 3, []int64{334, 333, 333}},
		{1000, 4, []int64{250, 250, 250, 250}},
		{1000, 3, []int64{334, 333, 333}},
		{1000, 2, []int64{500, 500}},
		{500, 2, []int64{250, 250}},
		{500, 3, []int64{167, 167, 166}},
	}
	for _, s := range steps {
		in := tpWants(make([]int64, s.n), nil)
		if got := Allocate(s.limit, in); !slices.Equal(got, s.want) {
			t.Fatalf("limit %d over %d: %v, want %v", s.limit, s.n, got, s.want)
		}
	}
}

func TestAllocateIsDeterministicAndKeepsInput(t *testing.T) {
	in := tpWants([]int64{3, 1, 4, 1, 5}, []int64{10, tpNoLimit, 7, 0, 100})
	orig := slices.Clone(in)
	a := Allocate(97, in)
	b := Allocate(97, in)
	if !slices.Equal(a, b) || !slices.Equal(in, orig) {
		t.Fatalf("not deterministic or input changed: %v %v %v", a, b, in)
	}
}

// FuzzAllocate checks the invariants on arbitrary inputs. Its seeds run as part
// of the normal test suite.
func FuzzAllocate(f *testing.F) {
	f.Add(int64(1000), []byte{1, 0, 0})
	f.Add(int64(1000), []byte{1, 0, 0, 1, 0, 0, 1, 0, 0})
	f.Add(int64(1000), []byte{1, 0, 0, 3, 0, 0})
	f.Add(int64(1000), []byte{1, 100, 1, 1, 0, 0})
	f.Add(int64(7), []byte{2, 1, 1, 1, 2, 1, 5, 3, 1})
	f.Add(int64(0), []byte{1, 5, 1, 1, 0, 0})
	f.Add(int64(123457), []byte{9, 200, 1, 4, 7, 1, 1, 0, 1, 250, 250, 0})
	f.Add(int64(math.MaxInt64), []byte{255, 255, 1, 1, 1, 0})
	f.Add(int64(-3), []byte{1, 1, 1})
	f.Add(int64(10), []byte{})
	f.Fuzz(func(t *testing.T, limit int64, raw []byte) {
		// Three bytes a want: weight, demand, flags (bit 0: limited).
		var in []Want
		for i := 0; i+2 < len(raw) && len(in) < 64; i += 3 {
			c := Want{Weight: int64(raw[i]) - 2, Demand: tpNoLimit}
			if raw[i+2]&1 == 1 {
				c.Demand = int64(raw[i+1]) * int64(raw[i+1]) * int64(1+raw[i+2]>>1)
			}
			in = append(in, c)
		}
		checkAllocation(t, limit, in, Allocate(limit, in))
	})
}

// checkAllocation asserts every guarantee of Allocate on one answer.
func checkAllocation(t *testing.T, limit int64, in []Want, got []int64) {
	t.Helper()
	if len(got) != len(in) {
		t.Fatalf("%d shares for %d wants", len(got), len(in))
	}
	if len(in) == 0 {
		return
	}
	limit = max(limit, 0)
	checkSum(t, limit, in, got)
	checkFair(t, in, got)
	checkProportional(t, limit, in, got)
}

// checkSum: no share is negative, and the shares sum to the limit.
func checkSum(t *testing.T, limit int64, in []Want, got []int64) {
	t.Helper()
	sum := new(big.Int)
	for i, s := range got {
		if s < 0 {
			t.Fatalf("share %d of member %d is negative: %v", s, i, got)
		}
		sum.Add(sum, big.NewInt(s))
	}
	if sum.Cmp(big.NewInt(limit)) != 0 {
		t.Fatalf("shares %v sum to %s, not the limit %d (wants %+v)", got, sum, limit, in)
	}
}

func tpWeight(in []Want, i int) *big.Int { return new(big.Int).SetUint64(in[i].weight()) }
func tpMul(x, y *big.Int) *big.Int       { return new(big.Int).Mul(x, y) }

// checkFair: while a demand is unmet, nobody gets more than it demands and the
// split is max-min fair by weight; otherwise every demand is met.
func checkFair(t *testing.T, in []Want, got []int64) {
	t.Helper()
	unmet := func(i int) bool { return !in[i].limited() || got[i] < in[i].Demand }
	anyUnmet := false
	for i := range in {
		if unmet(i) {
			anyUnmet = true
		}
	}
	if !anyUnmet {
		for i := range in {
			if got[i] < in[i].Demand {
				t.Fatalf("member %d got %d below its demand %d with every demand met", i, got[i], in[i].Demand)
			}
		}
		return
	}
	for j := range in {
		// Nobody above its demand while someone is unmet.
		if in[j].limited() && got[j] > in[j].Demand {
			t.Fatalf("member %d got %d above its demand %d while another is unmet: %v (wants %+v)", j, got[j], in[j].Demand, got, in)
		}
	}
	// Max-min by weight: nobody gets more per unit of weight than an unmet
	// member, up to one unit of rounding each: (s_j-1)/w_j < (s_i+1)/w_i.
	b := big.NewInt
	for i := range in {
		if !unmet(i) {
			continue
		}
		for j := range in {
			sj := new(big.Int).Sub(b(got[j]), b(1))
			si := new(big.Int).Add(b(got[i]), b(1))
			if tpMul(sj, tpWeight(in, i)).Cmp(tpMul(si, tpWeight(in, j))) >= 0 {
				t.Fatalf("unfair: member %d (unmet, %d, weight %d) vs member %d (%d, weight %d): %v (wants %+v)",
					i, got[i], in[i].weight(), j, got[j], in[j].weight(), got, in)
			}
		}
	}
}

// checkProportional: without demands, floor(limit*w/W) plus at most one unit,
// the extra units going to a prefix of the members (the earliest).
func checkProportional(t *testing.T, limit int64, in []Want, got []int64) {
	t.Helper()
	for _, c := range in {
		if c.limited() {
			return
		}
	}
	b := big.NewInt
	total := new(big.Int)
	for i := range in {
		total.Add(total, tpWeight(in, i))
	}
	extraEnded := false
	for i := range in {
		floor := new(big.Int).Quo(tpMul(b(limit), tpWeight(in, i)), total)
		extra := new(big.Int).Sub(b(got[i]), floor).Int64()
		switch {
		case extra != 0 && extra != 1:
			t.Fatalf("member %d got %d, floor of its proportional share is %s: %v", i, got[i], floor, got)
		case extra == 1 && extraEnded:
			t.Fatalf("member %d got a leftover unit although an earlier member got none: %v", i, got)
		case extra == 0:
			extraEnded = true
		}
	}
}
