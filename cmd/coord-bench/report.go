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
		lockRatios = append(lockRatios, ratioCol{num: "stated", den: "sidecar", title: "stated/sidecar", target: func(string) float64 { return statedTarget }})
	}
	floor := slices.Contains(o.engines, "floor")
	if floor {
		lockCols = append(lockCols, column{"floor", "floor"})
		lockRatios = append(lockRatios, ratioCol{num: "sidecar", den: "floor", title: "sidecar/floor CPU per cycle",
			target: func(row string) float64 { return floorTargets[row] }, cpu: true})
	}
	ratioTable(w, o, locks, "Acquire+release cycles per second", lockCols, lockRatios)
	if floor {
		floorTable(w, o, locks)
	}
	ratioTable(w, o, counters, "Counter adds per second (a cycle below is one add)",
		[]column{{"sidecar", "sidecar"}, {"inprocess", "in-process (Get+Set loop, 4 sessions)"}},
		[]ratioCol{sidecarTo("inprocess", "in-process", 0)})
	detailTable(w, o, results)
}

// floorTargets are issue 41's: the sidecar's CPU per lock cycle at most these
// times the floor's.
var floorTargets = map[string]float64{
	"c1":                   1.4,
	"c16 (distinct locks)": 1.25,
	"c64 (distinct locks)": 1.25,
}

// floorTable prints, for each lock row, the sidecar's and the floor's CPU per
// cycle, and ZooKeeper's CPU and requests per cycle behind each of them and
// behind zk.Lock.
func floorTable(w io.Writer, o *options, rows []rowResult) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "The sidecar against its floor (the bare server of the same ZooKeeper requests, see the method), per cycle over all rounds of the row: CPU of the server process, then ZooKeeper's CPU (without its JIT threads) and requests (mntr) behind each engine:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| row | sidecar µs | floor µs | sidecar/floor | ZooKeeper µs: sidecar | floor | zk.Lock | ZK requests: sidecar | floor | zk.Lock |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, res := range rows {
		line := "| " + res.row.name + " |"
		sc, fl := res.rounds["sidecar"], res.rounds["floor"]
		line += " " + micros(cpuPerCycle(sc, "sidecar", o.pids)) + " | " + micros(cpuPerCycle(fl, "floor", o.pids)) + " |"
		line += " " + cpuRatio(cpuPerCycle(sc, "sidecar", o.pids), cpuPerCycle(fl, "floor", o.pids), floorTargets[res.row.name]) + " |"
		for _, e := range []string{"sidecar", "floor", "inprocess"} {
			line += " " + micros(cpuPerCycle(res.rounds[e], "zookeeper", o.pids)) + " |"
		}
		for _, e := range []string{"sidecar", "floor", "inprocess"} {
			line += " " + perCycle(res.rounds[e], func(r round) int64 { return r.zkRequests }) + " |"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
}

// cpuPerCycle is the CPU time of process k (a -pids column or "load") per
// cycle over the rounds, in µs; ZooKeeper's without its JIT threads. It is 0
// when k is not measured or there was no cycle.
func cpuPerCycle(rs []round, k string, pids map[string][]int) float64 {
	if _, ok := pids[k]; !ok && k != "load" {
		return 0
	}
	var cycles int64
	var cpu time.Duration
	for _, r := range rs {
		cycles += r.cycles
		cpu += r.cpu[k]
		if k == "zookeeper" {
			cpu -= r.cpu["zookeeper-jit"]
		}
	}
	if cycles == 0 {
		return 0
	}
	return float64(cpu) / float64(time.Microsecond) / float64(cycles)
}

// micros prints µs, "–" for 0 (not measured).
func micros(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

// perCycle is a round counter (f) per cycle over the rounds, "–" without cycles.
func perCycle(rs []round, f func(round) int64) string {
	var n, cycles int64
	for _, r := range rs {
		n += f(r)
		cycles += r.cycles
	}
	if cycles == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(cycles))
}

// detailTable prints where each cycle of each row and engine goes.
func detailTable(w io.Writer, o *options, results []rowResult) {
	fmt.Fprintln(w, "Where each cycle goes (all rounds of the row): every round's cycles/s, CPU per cycle in each process (µs; load = the load generator; server = the process the engine's requests go to, a sidecar or the floor; ZooKeeper's without its JIT compiler threads, whose total is the JIT column), ZooKeeper requests and fsyncs per cycle (mntr), fsync time per cycle, and on the hot lock the mean handoff (one holder's let-go to the next one's grant, as the load process sees them):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| row | engine | rounds (cycles/s) | load µs | server µs | ZooKeeper µs | etcd µs | ZK requests | ZK fsyncs | fsync ms | handoff µs | ZK JIT ms |")
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
// the row's target (0: none); with cpu, the CPU per cycle of num's server
// process over den's (all rounds of the row), with the row's target as an
// upper bound.
type ratioCol struct {
	num, den, title string
	target          func(row string) float64
	cpu             bool
}

// sidecarTo is the sidecar's ratio to engine (short: its name in the title),
// with the targets of issue 16 (targets[row][i]).
func sidecarTo(engine, short string, i int) ratioCol {
	return ratioCol{num: "sidecar", den: engine, title: "sidecar/" + short, target: func(row string) float64 { return targets[row][i] }}
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
			if rc.cpu {
				num := cpuPerCycle(res.rounds[rc.num], sidecarProcess(rc.num), o.pids)
				den := cpuPerCycle(res.rounds[rc.den], sidecarProcess(rc.den), o.pids)
				line += " " + cpuRatio(num, den, rc.target(res.row.name)) + " |"
				continue
			}
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

// ratio is a/b with its target as a lower bound, e.g. "**1.23** (≥ 1.2 met)".
func ratio(a, b, target float64) string {
	return boundedRatio(a, b, target, "≥", func(r float64) bool { return r >= target })
}

// cpuRatio is a/b, CPU against CPU, with its target as an upper bound, e.g.
// "**1.31** (≤ 1.25 **missed**)"; "–" when either is not measured.
func cpuRatio(a, b, target float64) string {
	return boundedRatio(a, b, target, "≤", func(r float64) bool { return r <= target })
}

// boundedRatio is a/b in bold, then, unless target is 0, the bound (sign
// target) and whether met tells it met; "–" when either is not measured.
func boundedRatio(a, b, target float64, sign string, met func(float64) bool) string {
	if a == 0 || b == 0 {
		return "–"
	}
	r := a / b
	s := fmt.Sprintf("**%.2f**", r)
	switch {
	case target == 0:
	case met(r):
		s += " (" + sign + " " + targetText(target) + " met)"
	default:
		s += " (" + sign + " " + targetText(target) + " **missed**)"
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

// sidecarProcess is the -pids name of the server process that engine's
// rounds load (its "server µs" column): the sidecar, the stated sidecar or the
// floor.
func sidecarProcess(engine string) string {
	if engine == "stated" || engine == "floor" {
		return engine
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
