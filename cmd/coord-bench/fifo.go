package main

import (
	"fmt"
	"io"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// fifoCost measures what one session's FIFO order costs a read: ZooKeeper
// answers a session's requests in the order they were sent, so a read sent
// behind writes waits for their commit (and fsync). Writers keep creates and
// deletes under way on session A, as the sidecar's contenders do on its one
// session; then an exists on A is timed against the same exists on B, a session
// with no writes of its own, over the same interval.
func fifoCost(server string, writers int, d time.Duration) (string, error) {
	var conns []*zk.Conn
	for range 2 {
		c, events, err := zk.Connect([]string{server}, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
		if err != nil {
			return "", err
		}
		defer c.Close()
		if err := awaitConnected(events); err != nil {
			return "", err
		}
		conns = append(conns, c)
	}
	a, b := conns[0], conns[1]
	root := "/coord-bench-fifo"
	if _, err := a.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
		return "", err
	}
	var stop atomic.Bool
	var writes atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for !stop.Load() {
				p, err := a.Create(root+"/w-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
				if err == nil {
					err = a.Delete(p, -1)
				}
				if err != nil {
					return
				}
				writes.Add(2)
			}
		})
	}
	var same, other []time.Duration
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, s := range []struct {
			c   *zk.Conn
			out *[]time.Duration
		}{{a, &same}, {b, &other}} {
			t := time.Now()
			if _, _, err := s.c.Exists(root); err != nil {
				stop.Store(true)
				wg.Wait()
				return "", err
			}
			*s.out = append(*s.out, time.Since(t))
		}
	}
	stop.Store(true)
	wg.Wait()
	_ = a.Delete(root, -1)
	return fmt.Sprintf("| %d | %.0f | %s | %s |", writers, float64(writes.Load())/d.Seconds(), pct(same), pct(other)), nil
}

// pct is "p50 / p99" in µs.
func pct(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Microsecond) }
	return fmt.Sprintf("%.0f / %.0f", at(0.5), at(0.99))
}
