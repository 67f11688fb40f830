package sidecartest

import (
	"flag"
	"math"
	"slices"
	"testing"
	"time"
)

// BenchResult is what one run of a fixed-size experiment reports: Samples
// latencies of mean Mean, and further metrics by unit.
type BenchResult struct {
	Samples int
	Mean    time.Duration
	Metrics map[string]float64

	waited bool // a later call of the round has waited out -benchtime
}

// RunOnce runs an experiment whose size is fixed, not set by b.N, once per
// -count round: on the framework's first call of the round, which is always
// with b.N == 1. The framework may call again in the same round (b.N > 1, to
// fill a time-based -benchtime, or for -benchtime Nx with N > 1); those calls
// report the figures of the round's run (kept in *last) again without running
// anything. Every call reports ns/op as the mean latency of one sample and
// sets b.N to the number of samples, so the row reads "samples, mean ns per
// sample" whatever the framework asked.
//
// With a time-based -benchtime the framework calls again while a call's
// run took less than it, predicting the next b.N from this one's samples and
// time; a call that does nothing takes microseconds, and with a few samples
// that prediction stops growing, so the calls would not end (an experiment
// of 5 samples shorter than -benchtime looped for minutes). So the first such
// call of a round, when the experiment took less than -benchtime, sleeps for
// -benchtime with the timer running: the framework's next check ends the
// round. Nothing runs meanwhile; it costs that much idle time once a round.
func RunOnce(b *testing.B, last **BenchResult, experiment func(*testing.B) BenchResult) {
	if b.N == 1 || *last == nil {
		*last = nil
		r := experiment(b)
		*last = &r
	} else if d := benchTime(); d > 0 && !(*last).waited {
		(*last).waited = true
		time.Sleep(d) // see above: ends the framework's calls of this round
	}
	r := *last
	b.ReportMetric(float64(r.Mean.Nanoseconds()), "ns/op")
	for unit, v := range r.Metrics {
		b.ReportMetric(v, unit)
	}
	//lint:ignore SA3001 b.N is set to the samples of the round on purpose: see the comment above and docs/BENCHMARKS.md
	b.N = r.Samples
}

// Millis is d in milliseconds, fractions kept.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Quantile holds nearest-rank quantiles of a sample.
type Quantile struct {
	sorted                   []time.Duration
	Min, P50, P99, Max, Mean time.Duration
}

// Quantiles sorts a copy of sample and reads its quantiles; all are 0 for an
// empty sample.
func Quantiles(sample []time.Duration) Quantile {
	s := slices.Clone(sample)
	slices.Sort(s)
	q := Quantile{sorted: s}
	if len(s) == 0 {
		return q
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	q.Min, q.Max, q.Mean = s[0], s[len(s)-1], sum/time.Duration(len(s))
	q.P50, q.P99 = q.At(0.50), q.At(0.99)
	return q
}

// At is the nearest-rank quantile p: the smallest value with at least p of the
// sample at or below it.
func (q Quantile) At(p float64) time.Duration {
	if len(q.sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(q.sorted)))) - 1
	return q.sorted[min(max(i, 0), len(q.sorted)-1)]
}

// benchTime is -test.benchtime when it is a duration, 0 when it is a count
// (Nx) or not set.
func benchTime() time.Duration {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 0
	}
	d, err := time.ParseDuration(f.Value.String())
	if err != nil {
		return 0
	}
	return d
}
