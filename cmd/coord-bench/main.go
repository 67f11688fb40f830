// Command coord-bench is the load generator of `make bench` (scripts/bench.sh):
// it measures lock acquire+release cycles, from a process of its own, on three
// engines (four with -sidecar-stated) side by side in one run:
//
//   - sidecar: a running coord-sidecar over HTTP (POST /v1/locks/NAME?wait=30s,
//     then DELETE /v1/locks/NAME?lease=..., as curl would);
//   - inprocess: go-zookeeper's zk.Lock in this process, workers spread over
//     -sessions ZooKeeper sessions;
//   - etcd: etcd's v3 lock API over its HTTP gateway (POST /v3/lock/lock with a
//     lease each worker granted once, then POST /v3/lock/unlock);
//   - stated (with -sidecar-stated): the sidecar engine against a second
//     sidecar process, started with --state-dir, on the lock rows only; the
//     lock table adds its column and its ratio to the sidecar's;
//   - floor (with -floor): the sidecar engine against the floor (issue 41), a
//     reference server run by `coord-bench -serve-floor ADDR -zk ...` as a
//     process of its own (floor.go): net/http and chi over one go-zookeeper
//     session making the sidecar lock cycle's ZooKeeper requests and nothing
//     else, on the lock rows only; the lock table adds its column and the
//     sidecar's CPU per cycle over the floor's, and a table of the two side by
//     side.
//
// Rows: c1, c16 and c64 (N workers, each on a lock of its own) and hot (16
// workers on one lock). Every engine gets a warm-up, then -rounds rounds of
// -round each, the engines' order rotating from round to round; a row reports
// each engine's median round and the ratios of the medians. Alongside, for each
// row and engine: CPU per cycle in each process (/proc/PID/stat) and
// ZooKeeper's requests and fsyncs per cycle (its mntr counters). After the
// rows (-latency): p50 and p99 of an uncontended acquire and of a handoff on
// the sidecar, the floor and zk.Lock (latency.go).
//
// The output is markdown that pastes into docs/BENCHMARKS.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type options struct {
	sidecar, zk, etcd string
	stated            string // the second sidecar's URL, on a state directory ("": none)
	floor             string // the floor's URL ("": none)
	serveFloor        string // serve the floor on this address instead of measuring
	// pids are the processes whose CPU is measured, by column: "sidecar",
	// "stated", "floor", "zookeeper", "etcd"; a column may sum several processes (an
	// ensemble's servers, a fleet's sidecars).
	pids          map[string][]int
	rows          []row
	engines       []string
	rounds        int
	round, warmup time.Duration
	zkWarmup      time.Duration
	sessions      int
	fifo          time.Duration
	latency       time.Duration // per engine and measurement (0: none)
	fleet         fleetOptions  // with urls: the fleet rows instead of the others
}

// row is one line of a table: workers on their own locks, or on one hot lock;
// or workers adding to counters (counters > 0; see counters.go).
type row struct {
	name     string
	workers  int
	hot      bool
	counters int
	hold     time.Duration // how long each holder keeps the lock (hot rows)
}

var allRows = map[string]row{
	"c1":             {name: "c1", workers: 1},
	"c16":            {name: "c16 (distinct locks)", workers: 16},
	"c64":            {name: "c64 (distinct locks)", workers: 64},
	"hot":            {name: "hot lock, 16 waiters", workers: 16, hot: true},
	"counter-c1":     {name: "counter adds, c1", workers: 1, counters: 1},
	"counter-c16":    {name: "counter adds, c16 on one counter", workers: 16, counters: 1},
	"counter-c16x16": {name: "counter adds, c16 on 16 counters", workers: 16, counters: 16},
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "coord-bench:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "coord-bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("coord-bench", flag.ContinueOnError)
	o := &options{}
	var pids, rows, engines, fleet, fleetPids, fleetSizes string
	fs.StringVar(&o.sidecar, "sidecar", "http://127.0.0.1:8080", "the sidecar's base URL")
	fs.StringVar(&o.zk, "zk", "127.0.0.1:2181", "the ZooKeeper servers (host:port,...) the sidecar uses; mntr's counters are summed over them")
	fs.StringVar(&o.etcd, "etcd", "", "etcd's client URL (empty: no etcd column)")
	fs.StringVar(&o.stated, "sidecar-stated", "", "base URL of a second sidecar, started with --state-dir (empty: no stated column)")
	fs.StringVar(&o.floor, "floor", "", "base URL of the floor, a coord-bench -serve-floor process (empty: no floor column)")
	fs.StringVar(&o.serveFloor, "serve-floor", "", "serve the floor (the lock cycle's reference server) on this address over one session to -zk, instead of measuring")
	fs.StringVar(&pids, "pids", "", "processes whose CPU is measured: sidecar=PID,stated=PID,floor=PID,zookeeper=PID,etcd=PID; PID+PID+... sums several (an ensemble's servers)")
	fs.StringVar(&rows, "rows", "c1,c16,c64,hot,counter-c1,counter-c16,counter-c16x16", "rows, in order: c1, c16, c64, hot, counter-c1, counter-c16, counter-c16x16")
	fs.StringVar(&engines, "engines", "sidecar,floor,stated,inprocess,etcd", "engines, comma-separated (etcd, stated and floor only with -etcd, -sidecar-stated and -floor)")
	fs.IntVar(&o.rounds, "rounds", 5, "measured rounds per engine and row")
	fs.DurationVar(&o.round, "round", 2*time.Second, "length of one round")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up per engine and row, not measured")
	fs.IntVar(&o.sessions, "sessions", 4, "ZooKeeper sessions of the in-process engine")
	fs.DurationVar(&o.latency, "latency", 3*time.Second, "length of each latency measurement (uncontended acquire, handoff) per engine after the rows (0: none)")
	fs.DurationVar(&o.fifo, "fifo", 3*time.Second, "length of each FIFO-cost measurement after the rows (0: none)")
	fs.DurationVar(&o.zkWarmup, "zk-warmup", 60*time.Second, "longest warm-up of ZooKeeper's JIT before the rows (c16 and hot rounds until its compiler threads are idle)")
	fs.StringVar(&fleet, "fleet", "", "the fleet rows (issue 26) instead of the others: base URLs of sidecar processes, comma-separated, each a replica's own")
	fs.StringVar(&fleetPids, "fleet-pids", "", "the fleet's processes, in -fleet's order, comma-separated")
	fs.StringVar(&fleetSizes, "fleet-sizes", "16,64", "fleet sizes measured (the first N of -fleet)")
	fs.DurationVar(&o.fleet.hold, "fleet-hold", 5*time.Millisecond, "hold time of the second hot-lock row per size (0: no such row)")
	fs.DurationVar(&o.fleet.idle, "fleet-idle", 30*time.Second, "how long the fleet is watched at rest before any load")
	fs.IntVar(&o.fleet.resigns, "fleet-resigns", 20, "resignations per election")
	fs.BoolVar(&o.fleet.kill, "fleet-kill", false, "end the largest size's election by killing the leader's sidecar (SIGKILL)")
	fs.StringVar(&o.fleet.root, "fleet-zk-root", "/coord-fleet", "the fleet's --zk-root (the kill's failover watches the leader's node under it)")
	fs.DurationVar(&o.fleet.session, "fleet-session-timeout", 10*time.Second, "the fleet's --session-timeout (the bound of the kill's failover)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fleet != "" {
		if err := o.fleet.parse(fleet, fleetPids, fleetSizes); err != nil {
			return nil, err
		}
		engines = "sidecar,inprocess"
	}
	var err error
	if o.pids, err = parsePids(pids); err != nil {
		return nil, err
	}
	if o.rows, err = parseRows(rows); err != nil {
		return nil, err
	}
	if o.engines, err = o.parseEngines(engines); err != nil {
		return nil, err
	}
	if o.rounds < 1 || o.sessions < 1 {
		return nil, fmt.Errorf("-rounds and -sessions must be at least 1")
	}
	return o, nil
}

// parsePids parses -pids: name=PID,... where PID may be PID+PID+... .
func parsePids(pids string) (map[string][]int, error) {
	m := map[string][]int{}
	for _, kv := range strings.Split(pids, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			list, err := pidList(strings.Split(v, "+"))
			if err != nil {
				return nil, fmt.Errorf("-pids %q: %w", kv, err)
			}
			m[k] = list
		}
	}
	return m, nil
}

// parseRows parses -rows, in order.
func parseRows(rows string) ([]row, error) {
	var list []row
	for _, r := range strings.Split(rows, ",") {
		rw, ok := allRows[r]
		if !ok {
			return nil, fmt.Errorf("unknown row %q", r)
		}
		list = append(list, rw)
	}
	return list, nil
}

// parseEngines parses -engines, in order, leaving out etcd, stated and floor
// when their URL is not given.
func (o *options) parseEngines(engines string) ([]string, error) {
	var list []string
	for _, e := range strings.Split(engines, ",") {
		if e == "etcd" && o.etcd == "" || e == "stated" && o.stated == "" || e == "floor" && o.floor == "" {
			continue
		}
		if !slices.Contains([]string{"sidecar", "floor", "stated", "inprocess", "etcd"}, e) {
			return nil, fmt.Errorf("unknown engine %q", e)
		}
		list = append(list, e)
	}
	return list, nil
}

// pidList parses process ids.
func pidList(fields []string) ([]int, error) {
	var pids []int
	for _, f := range fields {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

func run(ctx context.Context, o *options) error {
	if o.serveFloor != "" {
		return serveFloor(ctx, o.serveFloor, o.zk)
	}
	if len(o.fleet.urls) > 0 {
		return runFleet(ctx, o)
	}
	started := time.Now()
	engines := make([]engine, 0, len(o.engines))
	for _, name := range o.engines {
		e, err := newEngine(ctx, name, o)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer e.close()
		engines = append(engines, e)
	}
	if err := warmZooKeeper(ctx, o, engines); err != nil {
		return err
	}
	fmt.Printf("coord-bench: %d rounds of %s per engine and row after a %s warm-up; load average at start: %s\n\n",
		o.rounds, o.round, o.warmup, loadavg())
	var results []rowResult
	for _, r := range o.rows {
		res, err := measureRow(ctx, o, r, engines)
		if err != nil {
			return fmt.Errorf("row %s: %w", r.name, err)
		}
		results = append(results, res)
		fmt.Fprintf(os.Stderr, "coord-bench: %s done (load average %s)\n", r.name, loadavg())
	}
	printReport(os.Stdout, o, results, started)
	if o.latency > 0 {
		if err := measureLatency(ctx, os.Stdout, o, engines, o.latency); err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	if o.fifo > 0 {
		fmt.Println()
		fmt.Println("What one session's FIFO order costs a read: ZooKeeper answers a session's requests in order, so a read waits behind that session's writes. An exists on the session whose writers create and delete (as the sidecar's contenders do on its one session) against the same exists on another session, at once:")
		fmt.Println()
		fmt.Println("| writers | writes/s | exists behind the writes, p50 / p99 µs | exists on another session, p50 / p99 µs |")
		fmt.Println("|---:|---:|---|---|")
		for _, writers := range []int{1, 16} {
			line, err := fifoCost(o.zk, writers, o.fifo)
			if err != nil {
				return fmt.Errorf("fifo: %w", err)
			}
			fmt.Println(line)
		}
	}
	return nil
}

// measureRow runs a row: a warm-up per engine, then the rounds, the engines'
// order rotating so that no engine always runs first.
func measureRow(ctx context.Context, o *options, r row, engines []engine) (rowResult, error) {
	res := rowResult{row: r, rounds: map[string][]round{}}
	var able []engine
	for _, e := range engines {
		_, err := runRound(ctx, o, e, r, o.warmup)
		switch {
		case errors.Is(err, errNoSuchRow):
			continue
		case err != nil:
			return res, fmt.Errorf("%s warm-up: %w", e.name(), err)
		}
		able = append(able, e)
	}
	for i := range o.rounds {
		for j := range able {
			e := able[(i+j)%len(able)]
			rd, err := runRound(ctx, o, e, r, o.round)
			if err != nil {
				return res, fmt.Errorf("%s round %d: %w", e.name(), i+1, err)
			}
			res.rounds[e.name()] = append(res.rounds[e.name()], rd)
		}
	}
	return res, nil
}

// warmZooKeeper runs 2 s rounds of the c16 and hot rows on the ZooKeeper
// engines until ZooKeeper's JIT compiler threads used under 2 % of a round's
// time, or o.zkWarmup passed: measured before that, ZooKeeper's first rows would
// be slow for whichever engine ran first.
func warmZooKeeper(ctx context.Context, o *options, engines []engine) error {
	pids, ok := o.pids["zookeeper"]
	if !ok || o.zkWarmup <= 0 {
		return nil
	}
	start := time.Now()
	for i := 0; time.Since(start) < o.zkWarmup; i++ {
		e := engines[i%len(engines)]
		if e.name() == "etcd" {
			continue
		}
		r := allRows[[]string{"c16", "hot"}[i/len(engines)%2]]
		jit0 := jitCPU(pids)
		if _, err := runRound(ctx, o, e, r, 2*time.Second); err != nil {
			return fmt.Errorf("warm-up %s: %w", e.name(), err)
		}
		if jit := jitCPU(pids) - jit0; i >= 2*len(engines) && jit < 40*time.Millisecond {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "coord-bench: ZooKeeper warmed up in %s (its JIT threads used %s so far)\n",
		time.Since(start).Round(time.Second), jitCPU(pids).Round(time.Millisecond))
	return nil
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// gitCommit is the short commit of the working tree, "" when unknown.
func gitCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// machine describes where the figures were taken.
func machine() string {
	return fmt.Sprintf("%d CPUs, %s, GOMAXPROCS %d", runtime.NumCPU(), runtime.Version(), runtime.GOMAXPROCS(0))
}
