package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rowResult is every engine's rounds of one row.
type rowResult struct {
	row    row
	rounds map[string][]round
}

// targets are issue 16's ratios, sidecar/in-process and sidecar/etcd (0: none).
var targets = map[string][2]float64{
	"c1":                   {0.8, 0},
	"c16 (distinct locks)": {1.0, 0},
	"c64 (distinct locks)": {1.2, 2.0},
	"hot lock, 16 waiters": {2.0, 1.5},
	// issue 14's, sidecar/in-process (go-zookeeper's Get+Set loop)
	"counter adds, c1":                 {0.8, 0},
	"counter adds, c16 on one counter": {3.0, 0},
}

// median is the median round's rate (the mean of the middle two for an even
// count), 0 without rounds.
func median(rs []round) float64 {
	if len(rs) == 0 {
		return 0
	}
	rates := make([]float64, len(rs))
	for i, r := range rs {
		rates[i] = r.rate()
	}
	slices.Sort(rates)
	n := len(rates)
	if n%2 == 1 {
		return rates[n/2]
	}
	return (rates[n/2-1] + rates[n/2]) / 2
}

func printReport(w io.Writer, o *options, results []rowResult, started time.Time) {
	fmt.Fprintf(w, "Run: %s to %s UTC, commit %s, %s; load average at the end %s.\n\n",
		started.UTC().Format("2006-01-02 15:04:05"), time.Now().UTC().Format("15:04:05"), gitCommit(), machine(), loadavg())
	var locks, counters []rowResult
	for _, res := range results {
		if res.row.counters > 0 {
			counters = append(counters, res)
		} else {
			locks = append(locks, res)
		}
	}
	lockCols := []column{{"sidecar", "sidecar"}, {"inprocess", "in-process (zk.Lock, 4 sessions)"}, {"etcd", "etcd 3.4 gateway"}}
	lockRatios := []ratioCol{sidecarTo("inprocess", "in-process", 0), sidecarTo("etcd", "etcd", 1)}
	if slices.Contains(o.engines, "stated") {
		lockCols = append(lockCols, column{"stated", "sidecar with --state-dir"})
		lockRatios = append(lockRatios, ratioCol{"stated", "sidecar", "stated/sidecar", func(string) float64 { return statedTarget }})
	}
	ratioTable(w, o, locks, "Acquire+release cycles per second", lockCols, lockRatios)
	ratioTable(w, o, counters, "Counter adds per second (a cycle below is one add)",
		[]column{{"sidecar", "sidecar"}, {"inprocess", "in-process (Get+Set loop, 4 sessions)"}},
		[]ratioCol{sidecarTo("inprocess", "in-process", 0)})
	detailTable(w, o, results)
}

// detailTable prints where each cycle of each row and engine goes.
func detailTable(w io.Writer, o *options, results []rowResult) {
	fmt.Fprintln(w, "Where each cycle goes (all rounds of the row): every round's cycles/s, CPU per cycle in each process (µs; load = the load generator; ZooKeeper's without its JIT compiler threads, whose total is the JIT column), ZooKeeper requests and fsyncs per cycle (mntr), fsync time per cycle, and on the hot lock the mean handoff (one holder's let-go to the next one's grant, as the load process sees them):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| row | engine | rounds (cycles/s) | load µs | sidecar µs | ZooKeeper µs | etcd µs | ZK requests | ZK fsyncs | fsync ms | handoff µs | ZK JIT ms |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, res := range results {
		for _, e := range o.engines {
			if len(res.rounds[e]) > 0 { // (etcd has no counter rows)
				fmt.Fprintln(w, detailRow(res.row.name, e, res.rounds[e], o.pids))
			}
		}
	}
}

// column is an engine's column of a ratio table, with its title.
type column struct{ engine, title string }

// ratioCol is a ratio column: the median of engine num over that of den, with
// the row's target (0: none).
type ratioCol struct {
	num, den, title string
	target          func(row string) float64
}

// sidecarTo is the sidecar's ratio to engine (short: its name in the title),
// with the targets of issue 16 (targets[row][i]).
func sidecarTo(engine, short string, i int) ratioCol {
	return ratioCol{"sidecar", engine, "sidecar/" + short, func(row string) float64 { return targets[row][i] }}
}

// statedTarget is issue 23's: a state directory costs the lock rows at most 5 %.
const statedTarget = 0.95

// ratioTable prints each row's median rate per column, then each ratio with
// the row's target.
func ratioTable(w io.Writer, o *options, rows []rowResult, what string, cols []column, ratios []ratioCol) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "%s, median of %d rounds of %s (after a %s warm-up); ratios of the medians, target in brackets:\n\n",
		what, o.rounds, o.round, o.warmup)
	head, rule := "| row |", "|---|"
	for _, c := range cols {
		head, rule = head+" "+c.title+" |", rule+"---:|"
	}
	for _, rc := range ratios {
		head, rule = head+" "+rc.title+" |", rule+"---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, res := range rows {
		line := "| " + res.row.name + " |"
		for _, c := range cols {
			line += " " + rate(median(res.rounds[c.engine]), slices.Contains(o.engines, c.engine)) + " |"
		}
		for _, rc := range ratios {
			line += " " + ratio(median(res.rounds[rc.num]), median(res.rounds[rc.den]), rc.target(res.row.name)) + " |"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
}

func rate(v float64, present bool) string {
	if !present {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

// ratio is a/b with its target, e.g. "**1.23** (≥ 1.2 met)".
func ratio(a, b, target float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	r := a / b
	s := fmt.Sprintf("**%.2f**", r)
	switch {
	case target == 0:
	case r >= target:
		s += " (≥ " + targetText(target) + " met)"
	default:
		s += " (≥ " + targetText(target) + " **missed**)"
	}
	return s
}

// targetText prints a target with the decimals it has, at least one: "1.0",
// "0.8", "0.95".
func targetText(target float64) string {
	s := strconv.FormatFloat(target, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// sidecarProcess is the -pids name of the sidecar process that engine's
// rounds load (its "sidecar µs" column).
func sidecarProcess(engine string) string {
	if engine == "stated" {
		return "stated"
	}
	return "sidecar"
}

func detailRow(name, engine string, rs []round, pids map[string][]int) string {
	var cycles int64
	var rates []string
	cpu := map[string]time.Duration{}
	var req, fs, fsMs int64
	var gap time.Duration
	for _, r := range rs {
		gap += r.gap / time.Duration(len(rs))
		cycles += r.cycles
		rates = append(rates, fmt.Sprintf("%.0f", r.rate()))
		for k, v := range r.cpu {
			cpu[k] += v
		}
		req += r.zkRequests
		fs += r.zkFsyncs
		fsMs += r.zkFsyncMs
	}
	per := func(k string) string {
		if _, ok := pids[k]; !ok && k != "load" || cycles == 0 {
			return "–"
		}
		v := cpu[k]
		if k == "zookeeper" {
			v -= cpu["zookeeper-jit"]
		}
		return fmt.Sprintf("%.0f", float64(v)/float64(time.Microsecond)/float64(cycles))
	}
	perN := func(n int64) string {
		if cycles == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", float64(n)/float64(cycles))
	}
	handoff := "–"
	if gap > 0 {
		handoff = fmt.Sprintf("%.0f", float64(gap)/float64(time.Microsecond))
	}
	jit := "–"
	if _, ok := pids["zookeeper"]; ok {
		jit = fmt.Sprintf("%.0f", float64(cpu["zookeeper-jit"])/float64(time.Millisecond))
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", name, engine, strings.Join(rates, ", "),
		per("load"), per(sidecarProcess(engine)), per("zookeeper"), per("etcd"), perN(req), perN(fs), perN(fsMs), handoff, jit)
}
