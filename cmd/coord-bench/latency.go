package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
)

// Latency (issue 41): how long one acquire takes, uncontended, and how long
// a handoff takes, per engine (sidecar, floor, zk.Lock), in the same run, the
// engines' order rotating from round to round as in the rows.
//
//   - uncontended acquire: one client on a lock of its own acquires and
//     releases in a loop; a sample is one acquire, from the call to the grant;
//   - handoff: two clients on one lock, each holding it latencyHold; a sample
//     is the time from one holder's let-go (just before its release call) to
//     the other's grant, counted only when that other was waiting already (its
//     acquire call began before the let-go).

// latencyHold is how long a holder keeps the lock in the handoff measurement,
// so that the other client is waiting when it lets go.
const latencyHold = 2 * time.Millisecond

// lockClient is one client of a lock: acquire blocks until granted.
type lockClient struct {
	acquire func(ctx context.Context) error
	release func(ctx context.Context) error
}

// lockClientOf returns client w of lock name on engine e (false: e has no
// such client, e.g. etcd, measured in the rows only).
func lockClientOf(e engine, name string, w int) (lockClient, bool) {
	switch e := e.(type) {
	case *sidecarEngine:
		u := e.bases[0] + "/v1/locks/" + name
		var lease string
		return lockClient{
			acquire: func(ctx context.Context) error {
				var grant struct {
					Lease string `json:"lease"`
				}
				err := benchload.Send(ctx, e.client, http.MethodPost, u+"?wait=30s", nil, http.StatusCreated, &grant)
				lease = grant.Lease
				return err
			},
			release: func(ctx context.Context) error {
				return benchload.Send(ctx, e.client, http.MethodDelete, u+"?lease="+url.QueryEscape(lease), nil, http.StatusNoContent, nil)
			},
		}, true
	case *inprocessEngine:
		l := zk.NewLock(e.conns[w%len(e.conns)], e.root+"/"+name, zk.WorldACL(zk.PermAll))
		return lockClient{
			acquire: func(context.Context) error { return l.Lock() },
			release: func(context.Context) error { return l.Unlock() },
		}, true
	}
	return lockClient{}, false
}

// latencies are one engine's samples.
type latencies struct{ acquire, handoff []time.Duration }

// measureLatency runs the two measurements on each engine that has lock
// clients, in rounds of d/rounds each, and prints the table.
func measureLatency(ctx context.Context, w io.Writer, o *options, engines []engine, d time.Duration) error {
	var able []engine
	for _, e := range engines {
		if _, ok := lockClientOf(e, "", 0); ok && e.name() != "stated" {
			able = append(able, e)
		}
	}
	got := map[string]*latencies{}
	for _, e := range able {
		got[e.name()] = &latencies{}
	}
	slice := d / time.Duration(o.rounds)
	for i := range o.rounds {
		for j := range able {
			e := able[(i+j)%len(able)]
			l := got[e.name()]
			s, err := soloAcquires(ctx, e, slice)
			if err != nil {
				return fmt.Errorf("%s uncontended acquire: %w", e.name(), err)
			}
			l.acquire = append(l.acquire, s...)
			s, err = handoffs(ctx, e, slice)
			if err != nil {
				return fmt.Errorf("%s handoff: %w", e.name(), err)
			}
			l.handoff = append(l.handoff, s...)
		}
	}
	fmt.Fprintf(w, "\nLatency, %s per engine and measurement in %d rounds, the engines' order rotating: an uncontended acquire (one client on its own lock, acquiring and releasing in a loop: the acquire's call to its grant), and a handoff (two clients on one lock, each holding it %s: one holder's let-go, just before its release call, to the waiting one's grant), p50 / p99 (samples):\n\n",
		d, o.rounds, latencyHold)
	fmt.Fprintln(w, "| engine | uncontended acquire, p50 / p99 µs | handoff, p50 / p99 µs |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, e := range able {
		l := got[e.name()]
		fmt.Fprintf(w, "| %s | %s | %s |\n", latencyTitle(e.name()), percentiles(l.acquire), percentiles(l.handoff))
	}
	return nil
}

// latencyTitle names an engine in the latency table.
func latencyTitle(engine string) string {
	if engine == "inprocess" {
		return "zk.Lock (in-process)"
	}
	return engine
}

// percentiles prints "p50 / p99 (n)" of samples in µs, "–" without any.
func percentiles(samples []time.Duration) string {
	if len(samples) == 0 {
		return "–"
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) float64 {
		return float64(s[min(int(q*float64(len(s))), len(s)-1)]) / float64(time.Microsecond)
	}
	return fmt.Sprintf("%.0f / %.0f (%d)", at(0.50), at(0.99), len(s))
}

// soloAcquires times the acquires of one client cycling on a lock of its own
// for d.
func soloAcquires(ctx context.Context, e engine, d time.Duration) ([]time.Duration, error) {
	c, _ := lockClientOf(e, "bench-latency-solo", 0)
	var samples []time.Duration
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		start := time.Now()
		if err := c.acquire(ctx); err != nil {
			return samples, err
		}
		samples = append(samples, time.Since(start))
		if err := c.release(ctx); err != nil {
			return samples, err
		}
	}
	return samples, nil
}

// handoffs times the handoffs between two clients of one lock, each holding
// it latencyHold, for d.
func handoffs(ctx context.Context, e engine, d time.Duration) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		samples []time.Duration
		errs    = make(chan error, 2)
		wg      sync.WaitGroup
		// left is when the last holder let go (UnixNano, 0: nobody yet).
		left     atomic.Int64
		deadline = time.Now().Add(d)
	)
	for w := range 2 {
		c, _ := lockClientOf(e, "bench-latency-handoff", w)
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				asked := time.Now().UnixNano()
				if err := c.acquire(ctx); err != nil {
					errs <- err
					cancel()
					return
				}
				granted := time.Now().UnixNano()
				if l := left.Load(); l > asked {
					mu.Lock()
					samples = append(samples, time.Duration(granted-l))
					mu.Unlock()
				}
				time.Sleep(latencyHold)
				left.Store(time.Now().UnixNano())
				if err := c.release(ctx); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return samples, <-errs
}
