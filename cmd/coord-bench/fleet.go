package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// fleetOptions are the fleet rows' (issue 26): sidecar processes, one per
// application replica, each with one client, on a ZooKeeper ensemble.
type fleetOptions struct {
	urls    []string      // the sidecars' base URLs
	pids    []int         // their processes, in the same order
	sizes   []int         // the fleet sizes measured: the first N sidecars
	hold    time.Duration // the second hot row's hold time (0: no such row)
	idle    time.Duration // how long the fleet is watched at rest
	resigns int           // resignations per election
	kill    bool          // end with the leader's sidecar killed
	session time.Duration // the sidecars' session timeout (the kill's bound)
	root    string        // the sidecars' --zk-root
}

// parse reads the -fleet, -fleet-pids and -fleet-sizes flags.
func (f *fleetOptions) parse(urls, pids, sizes string) error {
	f.urls = strings.Split(urls, ",")
	var err error
	if f.pids, err = pidList(strings.Split(pids, ",")); err != nil {
		return fmt.Errorf("-fleet-pids: %w", err)
	}
	if len(f.pids) != len(f.urls) {
		return fmt.Errorf("-fleet-pids names %d processes for %d sidecars", len(f.pids), len(f.urls))
	}
	for _, v := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > len(f.urls) {
			return fmt.Errorf("-fleet-sizes %q: each from 2 to the %d sidecars", v, len(f.urls))
		}
		f.sizes = append(f.sizes, n)
	}
	return nil
}

// fleetRest is the fleet's processes over a span: each one's CPU and, at its
// end, its resident memory.
type fleetRest struct {
	span time.Duration
	cpu  []time.Duration
	// rss is each one's VmRSS, anon the part of it that is its own (RssAnon:
	// the rest, RssFile, is the binary's pages, which every sidecar of the
	// same binary on a host shares), in bytes.
	rss, anon []int64
}

// restSettle passes before the fleet is watched at rest: the last sidecar to
// start has just answered /readyz, and its start-up is not its rest.
const restSettle = 5 * time.Second

// watchFleet measures pids over d.
func watchFleet(pids []int, d time.Duration) fleetRest {
	r := newFleetRest(len(pids))
	r.span = d
	for i, pid := range pids {
		r.cpu[i] = -procCPU(pid)
	}
	time.Sleep(d)
	for i, pid := range pids {
		r.cpu[i] += procCPU(pid)
		r.rss[i], r.anon[i] = procRSS(pid)
	}
	return r
}

func newFleetRest(n int) fleetRest {
	return fleetRest{cpu: make([]time.Duration, n), rss: make([]int64, n), anon: make([]int64, n)}
}

// procRSS is a process's resident memory (VmRSS) and the anonymous part of it
// (RssAnon), in bytes; 0 when unknown.
func procRSS(pid int) (rss, anon int64) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n << 10
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = kb(v)
		}
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anon = kb(v)
		}
	}
	return rss, anon
}

// failover is what one election's streams saw.
type failover struct {
	sidecars int
	// every is, per resignation, the time from the resignation's request to
	// the new leader on the last of the streams; each is the same for every
	// stream and resignation.
	every, each []time.Duration
	// killed is the time from SIGKILL to the leader's sidecar to the new leader
	// on every other stream (0: not killed); expired, to the bench's own watch
	// seeing the leader's node deleted (ZooKeeper expired the session).
	killed, expired time.Duration
}

// runFleet measures the fleet: at rest, then the hot lock handed through the
// first N sidecars against zk.Lock on N sessions, then an election's failover
// on every sidecar's stream, for each N of o.fleet.sizes.
func runFleet(ctx context.Context, o *options) error {
	started := time.Now()
	f := o.fleet
	fmt.Fprintf(os.Stderr, "coord-bench: the fleet of %d sidecars at rest for %s\n", len(f.urls), f.idle)
	time.Sleep(restSettle)
	rest := watchFleet(f.pids, f.idle)
	sidecars := &sidecarEngine{id: "sidecar", bases: f.urls, client: newHTTPClient(), locksOnly: true}
	defer sidecars.close()
	inproc, err := newInprocess(o.zk, slices.Max(f.sizes))
	if err != nil {
		return fmt.Errorf("inprocess: %w", err)
	}
	defer inproc.close()
	engines := []engine{sidecars, inproc}
	if err := warmZooKeeper(ctx, o, engines); err != nil {
		return err
	}
	var results []rowResult
	loaded := map[int]fleetRest{}
	for _, n := range f.sizes {
		on := *o
		on.pids = maps.Clone(o.pids)
		on.pids["sidecar"] = f.pids[:n]
		holds := []time.Duration{0}
		if f.hold > 0 {
			holds = append(holds, f.hold)
		}
		for _, hold := range holds {
			r := row{name: fmt.Sprintf("hot lock through %d sidecars", n), workers: n, hot: true, hold: hold}
			if hold > 0 {
				r.name += fmt.Sprintf(", %s hold", hold)
			}
			res, err := measureRow(ctx, &on, r, engines)
			if err != nil {
				return fmt.Errorf("row %s: %w", r.name, err)
			}
			results = append(results, res)
			fmt.Fprintf(os.Stderr, "coord-bench: %s done (load average %s)\n", r.name, loadavg())
		}
		loaded[n] = loadedFleet(results[len(results)-len(holds):], f.pids[:n])
	}
	var failovers []failover
	for i, n := range f.sizes {
		fo, err := electionFailover(ctx, f, n, f.kill && i == len(f.sizes)-1, inproc.conns[0])
		if err != nil {
			return fmt.Errorf("election through %d sidecars: %w", n, err)
		}
		failovers = append(failovers, fo)
		fmt.Fprintf(os.Stderr, "coord-bench: election through %d sidecars done\n", n)
	}
	o.pids["sidecar"] = f.pids // the detail table's sidecar column (each row summed its own N)
	printFleet(os.Stdout, o, started, rest, results, loaded, failovers)
	return nil
}

// loadedFleet is the sidecars' CPU over the sidecar engine's rounds of rows
// (summed, each sidecar's share its own: the column sums pids) and their
// memory after them.
func loadedFleet(rows []rowResult, pids []int) fleetRest {
	r := newFleetRest(len(pids))
	var cpu time.Duration
	for _, res := range rows {
		for _, rd := range res.rounds["sidecar"] {
			r.span += rd.elapsed
			cpu += rd.cpu["sidecar"]
		}
	}
	for i, pid := range pids {
		r.cpu[i] = cpu / time.Duration(len(pids)) // the mean: per-process CPU is not kept per round
		r.rss[i], r.anon[i] = procRSS(pid)
	}
	return r
}

// leaderStream is what one sidecar's election stream last said.
type leaderStream struct {
	mu        sync.Mutex
	term      int64
	candidate string
	at        time.Time // when this term was first read
	err       error
}

func (s *leaderStream) state() (int64, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.term, s.candidate, s.at, s.err
}

// follow reads the election stream at u into s until ctx ends or the stream
// does.
func (s *leaderStream) follow(ctx context.Context, client *http.Client, u string) {
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: status %d", u, resp.StatusCode)
		}
		events := sse.NewReader(resp.Body)
		for {
			e, err := events.Next()
			if err != nil {
				return err
			}
			var ev struct {
				Leader *struct {
					Candidate string `json:"candidate"`
					Term      int64  `json:"term"`
				} `json:"leader"`
			}
			if err := json.Unmarshal(e.Data, &ev); err != nil {
				return fmt.Errorf("%s: %w", u, err)
			}
			var term int64
			var candidate string
			if ev.Leader != nil {
				term, candidate = ev.Leader.Term, ev.Leader.Candidate
			}
			s.mu.Lock()
			if term != s.term {
				s.term, s.candidate, s.at = term, candidate, time.Now()
			}
			s.mu.Unlock()
		}
	}()
	if err != nil && ctx.Err() == nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
}

// electionFailover enrols a candidate through each of the first n sidecars
// (c0 first, each on a lease of its own), follows the election on each one's
// stream, then has the leader resign (requeue=true: it stays a candidate, at
// the back) f.resigns times, each time timing the new leader's arrival on
// every stream; with kill, it ends by killing the leader's sidecar (SIGKILL),
// watching the leader's node on conn to time its deletion.
func electionFailover(ctx context.Context, f fleetOptions, n int, kill bool, conn *zk.Conn) (failover, error) {
	fo := failover{sidecars: n}
	ctx, cancel := context.WithCancel(ctx)
	el := &fleetElection{f: f, name: "fleet-" + strconv.Itoa(n), client: newHTTPClient(),
		streams: make([]*leaderStream, n), leases: make([]string, n), dead: -1}
	defer el.client.CloseIdleConnections()
	defer el.wg.Wait()
	defer cancel()
	for i := range el.streams {
		el.streams[i] = &leaderStream{}
		el.wg.Go(func() { el.streams[i].follow(ctx, el.client, f.urls[i]+"/v1/elections/"+el.name+"/events") })
	}
	defer el.revoke()
	if err := el.enrol(ctx); err != nil {
		return fo, err
	}
	term, leader, err := awaitLeader(el.streams, -1, 0, time.Now(), 30*time.Second, nil)
	if err != nil {
		return fo, fmt.Errorf("the first leader: %w", err)
	}
	for range f.resigns {
		var each []time.Duration
		if term, leader, err = el.resign(ctx, leader, term, &each); err != nil {
			return fo, err
		}
		fo.every = append(fo.every, slices.Max(each))
		fo.each = append(fo.each, each...)
		time.Sleep(20 * time.Millisecond)
	}
	if kill {
		fo.killed, fo.expired, err = el.kill(ctx, conn, leader, term)
	}
	return fo, err
}

// fleetElection is one election of the fleet's, a candidate through each
// sidecar, and every sidecar's stream of it.
type fleetElection struct {
	f       fleetOptions
	name    string
	client  *http.Client
	streams []*leaderStream
	leases  []string // candidate c<i>'s lease, on sidecar i
	dead    int      // the sidecar killed (-1: none)
	wg      sync.WaitGroup
}

// enrol grants a lease on each sidecar and enrols c<i> on sidecar i, in order.
func (el *fleetElection) enrol(ctx context.Context) error {
	for i, base := range el.f.urls[:len(el.leases)] {
		var lease struct {
			Lease string `json:"lease"`
		}
		if err := benchload.Send(ctx, el.client, http.MethodPost, base+"/v1/leases?ttl=10m", nil, http.StatusCreated, &lease); err != nil {
			return err
		}
		el.leases[i] = lease.Lease
		u := fmt.Sprintf("%s/v1/elections/%s/candidates?id=c%d&lease=%s", base, el.name, i, url.QueryEscape(lease.Lease))
		if err := benchload.Send(ctx, el.client, http.MethodPost, u, map[string]string{"value": "sidecar " + strconv.Itoa(i)}, http.StatusCreated, nil); err != nil {
			return err
		}
	}
	return nil
}

// revoke ends every lease of a sidecar still running (its candidacy with it).
func (el *fleetElection) revoke() {
	bg, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	for i, l := range el.leases {
		if l != "" && i != el.dead {
			_ = benchload.Send(bg, el.client, http.MethodDelete, el.f.urls[i]+"/v1/leases/"+url.PathEscape(l), nil, http.StatusNoContent, nil)
		}
	}
}

// resign has leader (of term) resign with requeue=true and waits for the next
// one on every stream, each getting every stream's time to it.
func (el *fleetElection) resign(ctx context.Context, leader int, term int64, each *[]time.Duration) (int64, int, error) {
	t0 := time.Now()
	u := fmt.Sprintf("%s/v1/elections/%s/candidates/c%d?lease=%s&requeue=true", el.f.urls[leader], el.name, leader, url.QueryEscape(el.leases[leader]))
	if err := benchload.Send(ctx, el.client, http.MethodDelete, u, nil, http.StatusCreated, nil); err != nil {
		return 0, 0, fmt.Errorf("resign c%d: %w", leader, err)
	}
	next, at, err := awaitLeader(el.streams, -1, term, t0, 30*time.Second, each)
	if err != nil {
		return 0, 0, fmt.Errorf("after c%d resigned: %w", leader, err)
	}
	return next, at, nil
}

// kill kills leader's sidecar and returns the time to the new leader on every
// other stream, and to the leader's node's deletion as a watch on conn saw it
// (0: not seen within 5 s of the streams).
func (el *fleetElection) kill(ctx context.Context, conn *zk.Conn, leader int, term int64) (killed, expired time.Duration, err error) {
	gone, err := watchLeaderNode(conn, el.f.root+"/elections/"+el.name)
	if err != nil {
		return 0, 0, err
	}
	deleted := make(chan time.Time, 1)
	el.wg.Go(func() {
		select {
		case ev := <-gone:
			if ev.Type == zk.EventNodeDeleted {
				deleted <- time.Now()
			}
		case <-ctx.Done():
		}
	})
	t0 := time.Now()
	if err := syscall.Kill(el.f.pids[leader], syscall.SIGKILL); err != nil {
		return 0, 0, fmt.Errorf("kill the leader's sidecar: %w", err)
	}
	el.dead = leader
	var each []time.Duration
	if _, _, err := awaitLeader(el.streams, leader, term, t0, 3*el.f.session+30*time.Second, &each); err != nil {
		return 0, 0, fmt.Errorf("after the leader's sidecar was killed: %w", err)
	}
	select {
	case at := <-deleted:
		expired = at.Sub(t0)
	case <-time.After(5 * time.Second):
	}
	return slices.Max(each), expired, nil
}

// watchLeaderNode watches the first node of the election line under dir (the
// sequence number is a node name's last 10 digits, whatever its prefix).
func watchLeaderNode(conn *zk.Conn, dir string) (<-chan zk.Event, error) {
	names, _, err := conn.Children(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	seq := func(n string) string { return n[max(0, len(n)-10):] }
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no candidate", dir)
	}
	ok, _, ev, err := conn.ExistsW(dir + "/" + names[0])
	if err != nil || !ok {
		return nil, fmt.Errorf("watch the leader's node %s/%s: exists %v, %w", dir, names[0], ok, err)
	}
	return ev, nil
}

// awaitLeader waits until every stream but skip names a leader whose term is
// neither old nor 0, all the same one, and returns its term and sidecar index;
// each (when not nil) gets every stream's time from t0 to its first reading of
// that term.
func awaitLeader(streams []*leaderStream, skip int, old int64, t0 time.Time, within time.Duration, each *[]time.Duration) (int64, int, error) {
	deadline := time.Now().Add(within)
	for {
		term, candidate, settled, err := agreedLeader(streams, skip, old)
		if err != nil {
			return 0, 0, err
		}
		if settled {
			at, err := strconv.Atoi(strings.TrimPrefix(candidate, "c"))
			if err != nil || at < 0 || at >= len(streams) {
				return 0, 0, fmt.Errorf("leader %q is none of the bench's candidates", candidate)
			}
			if each != nil {
				*each = append(*each, sinceFirstSeen(streams, skip, t0)...)
			}
			return term, at, nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("no new leader on every stream within %s", within)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// agreedLeader reads every stream but skip once: settled when all name the
// same leader, with a term neither old nor 0.
func agreedLeader(streams []*leaderStream, skip int, old int64) (term int64, candidate string, settled bool, err error) {
	for i, s := range streams {
		if i == skip {
			continue
		}
		t, c, _, err := s.state()
		if err != nil {
			return 0, "", false, fmt.Errorf("stream %d: %w", i, err)
		}
		if t == old || t == 0 || term != 0 && t != term {
			return 0, "", false, nil
		}
		term, candidate = t, c
	}
	return term, candidate, true, nil
}

// sinceFirstSeen is, for every stream but skip, the time from t0 to its first
// reading of its current term.
func sinceFirstSeen(streams []*leaderStream, skip int, t0 time.Time) []time.Duration {
	var times []time.Duration
	for i, s := range streams {
		if i != skip {
			_, _, seen, _ := s.state()
			times = append(times, seen.Sub(t0))
		}
	}
	return times
}

// printFleet writes the fleet's tables.
func printFleet(w io.Writer, o *options, started time.Time, rest fleetRest, results []rowResult, loaded map[int]fleetRest, failovers []failover) {
	f := o.fleet
	fmt.Fprintf(w, "Fleet run: %s to %s UTC, commit %s, %s; %d sidecar processes on a 3-node ensemble (%s); load average at the end %s.\n\n",
		started.UTC().Format("2006-01-02 15:04:05"), time.Now().UTC().Format("15:04:05"), gitCommit(), machine(), len(f.urls), o.zk, loadavg())
	ratioTable(w, o, results, "Lock handoffs per second, one client per sidecar (a cycle is one handoff), against zk.Lock on as many sessions in one process",
		[]column{{"sidecar", "sidecars, one waiter each"}, {"inprocess", "zk.Lock, one session per waiter"}},
		[]ratioCol{{num: "sidecar", den: "inprocess", title: "sidecars/zk.Lock", target: func(string) float64 { return 1.0 }}})
	detailTable(w, o, results)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "An election with a candidate through each sidecar and every sidecar's stream followed: the leader resigns (`requeue=true`), and the time from its DELETE to the new leader on the streams; then the leader's sidecar is killed:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| sidecars | resignations | new leader on every stream: median / max ms | on each stream: median / p99 ms | leader's sidecar killed: new leader on every other stream | target |")
	fmt.Fprintln(w, "|---:|---:|---|---|---|---|")
	for _, fo := range failovers {
		killed := "–"
		if fo.killed > 0 {
			killed = fmt.Sprintf("%.2f s (session timeout %s; the node gone, as a watch of the bench's own saw it: %.2f s)", fo.killed.Seconds(), f.session, fo.expired.Seconds())
		}
		met := "median ≤ 50 ms " + metText(quantile(fo.every, 0.5) <= 50*time.Millisecond)
		if fo.killed > 0 {
			met += "; kill ≤ session timeout " + metText(fo.killed <= f.session)
		}
		fmt.Fprintf(w, "| %d | %d | %s / %s | %s / %s | %s | %s |\n", fo.sidecars, len(fo.every),
			ms(quantile(fo.every, 0.5)), ms(quantile(fo.every, 1)), ms(quantile(fo.each, 0.5)), ms(quantile(fo.each, 0.99)), killed, met)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Each sidecar at rest (%s, before any load) and loaded (over its engine's rounds of the hot-lock rows; CPU the mean of the N loaded sidecars), in %% of one core and MiB of VmRSS:\n\n", rest.span)
	fmt.Fprintln(w, "| sidecars | at rest: CPU mean / max | at rest: RSS median / max | of which its own (RssAnon) median | loaded: CPU per sidecar | after the load: RSS median / max | target at rest |")
	fmt.Fprintln(w, "|---:|---|---|---|---|---|---|")
	for _, n := range f.sizes {
		idle, busy := rest.first(n), loaded[n]
		cpuMean, cpuMax := idle.cpuShare()
		rssMed, rssMax := mib(idle.rss)
		anonMed, _ := mib(idle.anon)
		busyCPU, _ := busy.cpuShare()
		bMed, bMax := mib(busy.rss)
		fmt.Fprintf(w, "| %d | %.3f %% / %.3f %% | %.1f / %.1f | %.1f | %.2f %% | %.1f / %.1f | CPU ≤ 0.2 %% %s; RSS ≤ 20 MiB %s |\n", n,
			cpuMean, cpuMax, rssMed, rssMax, anonMed, busyCPU, bMed, bMax, metText(cpuMean <= 0.2), metText(rssMed <= 20))
	}
	fmt.Fprintln(w)
}

// first is r restricted to its first n processes.
func (r fleetRest) first(n int) fleetRest {
	return fleetRest{span: r.span, cpu: r.cpu[:n], rss: r.rss[:n], anon: r.anon[:n]}
}

// cpuShare is the processes' mean and largest CPU, in percent of one core.
func (r fleetRest) cpuShare() (mean, most float64) {
	if r.span <= 0 || len(r.cpu) == 0 {
		return 0, 0
	}
	for _, c := range r.cpu {
		share := 100 * c.Seconds() / r.span.Seconds()
		mean += share / float64(len(r.cpu))
		most = max(most, share)
	}
	return mean, most
}

// mib is the median and the largest of sizes in bytes, in MiB.
func mib(sizes []int64) (median, most float64) {
	if len(sizes) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(sizes))
	return float64(s[len(s)/2]) / (1 << 20), float64(s[len(s)-1]) / (1 << 20)
}

// quantile is the q-th quantile of ds (nearest rank), 0 without any.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}
