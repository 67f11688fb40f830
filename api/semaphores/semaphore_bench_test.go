package semaphores_test

// Benchmarks of semaphores and read/write locks (issue 13), next to the mutex
// rows of bench_test.go: permit cycles (16 clients, max=4) and read and write
// cycles (16 clients, one lock), each checked for exclusion, and the ZooKeeper
// requests of one uncontended cycle counted on the server (its srvr Received
// count) for the sidecar and for Curator's algorithm replayed with
// go-zookeeper. docs/BENCHMARKS.md describes the rows.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

const (
	semaphoreContenders = 16
	semaphoreMax        = 4
)

// BenchmarkSemaphoreCycles: 16 clients loop acquire→release on one semaphore
// with max=4 (b.N cycles in total, never more than 4 inside); then one client
// alone, reporting the ZooKeeper requests per cycle (zk-req/op) the sidecar
// and Curator's algorithm send.
func BenchmarkSemaphoreCycles(b *testing.B) {
	env := sidecartest.NewBenchEnv(b)
	b.Run(fmt.Sprintf("sidecar/clients=%d/max=%d", semaphoreContenders, semaphoreMax), func(b *testing.B) {
		h := newHTTPPermit(env, "bench-sem", semaphoreMax)
		var inside atomic.Int32
		sidecartest.RunWorkers(b, semaphoreContenders, "cycles/s", func(ctx context.Context, _ int) error {
			return h.cycle(ctx, &inside)
		})
	})
	b.Run("sidecar/uncontended", func(b *testing.B) {
		h := newHTTPPermit(env, "bench-sem-1", semaphoreMax)
		countRequests(b, env, func(ctx context.Context) error { return h.cycle(ctx, nil) })
	})
	b.Run("curator-algorithm/uncontended", func(b *testing.B) {
		base := env.Root + "/curator/semaphores/bench"
		countRequests(b, env, func(context.Context) error { return curatorPermitCycle(env.Conn, base, semaphoreMax) })
	})
}

// BenchmarkRWLockCycles: 16 clients loop acquire→release on one read/write lock,
// all readers (read cycles) or all writers (write cycles, checked exclusive with
// increasing tokens); then one client alone for each, with zk-req/op.
func BenchmarkRWLockCycles(b *testing.B) {
	env := sidecartest.NewBenchEnv(b)
	for _, mode := range []string{"read", "write"} {
		b.Run(fmt.Sprintf("sidecar/%s/clients=%d", mode, semaphoreContenders), func(b *testing.B) {
			h := httpRWLock(env, "bench-rw-"+mode, mode)
			var excl *benchload.Exclusion
			if mode == "write" {
				excl = &benchload.Exclusion{}
			}
			sidecartest.RunWorkers(b, semaphoreContenders, "cycles/s", func(ctx context.Context, _ int) error {
				return h.Cycle(ctx, excl)
			})
		})
		b.Run("sidecar/"+mode+"/uncontended", func(b *testing.B) {
			h := httpRWLock(env, "bench-rw-1-"+mode, mode)
			countRequests(b, env, func(ctx context.Context) error { return h.Cycle(ctx, nil) })
		})
	}
}

// countRequests runs b.N cycles one after the other and reports the requests
// the ZooKeeper server received per cycle (every client's, pings included: the
// benchmark's session and the sidecar's are the only ones).
func countRequests(b *testing.B, env *sidecartest.BenchEnv, cycle func(ctx context.Context) error) {
	b.Helper()
	addr := zktest.Shared(b).Server(0)
	if err := cycle(context.Background()); err != nil { // parents made, connections open
		b.Fatal(err)
	}
	b.ResetTimer()
	before := zktest.ServerReceived(b, addr)
	for range b.N {
		if err := cycle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	after := zktest.ServerReceived(b, addr)
	b.StopTimer()
	b.ReportMetric(float64(after-before)/float64(b.N), "zk-req/op")
}

// httpPermit is one client of the sidecar's semaphore, with an implicit lease
// per permit.
type httpPermit struct {
	client                  *http.Client
	acquireURL, releaseBase string
}

func newHTTPPermit(e *sidecartest.BenchEnv, name string, max int) *httpPermit {
	u := e.Sc.Base + "/v1/semaphores/" + name
	return &httpPermit{client: e.Client, acquireURL: fmt.Sprintf("%s/permits?max=%d&wait=30s", u, max),
		releaseBase: u + "/permits/"}
}

// cycle takes and releases a permit, checking on inside (when not nil) that at
// most max are held.
func (h *httpPermit) cycle(ctx context.Context, inside *atomic.Int32) error {
	var p struct {
		Permit string `json:"permit"`
		Lease  string `json:"lease"`
		Max    int32  `json:"max"`
	}
	if err := benchload.Send(ctx, h.client, http.MethodPost, h.acquireURL, nil, http.StatusCreated, &p); err != nil {
		return err
	}
	var err error
	if inside != nil {
		if n := inside.Add(1); n > p.Max {
			err = fmt.Errorf("%d permits held at once, max %d", n, p.Max)
		}
		inside.Add(-1)
	}
	u := h.releaseBase + url.PathEscape(p.Permit) + "?lease=" + url.QueryEscape(p.Lease)
	if rerr := benchload.Send(ctx, h.client, http.MethodDelete, u, nil, http.StatusNoContent, nil); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

func httpRWLock(e *sidecartest.BenchEnv, name, mode string) *benchload.SidecarLock {
	u := e.Sc.Base + "/v1/rwlocks/" + name + "?mode=" + mode
	return &benchload.SidecarLock{Client: e.Client, AcquireURL: u + "&wait=30s", ReleaseURL: u + "&lease="}
}

// curatorPermitCycle replays, uncontended, the ZooKeeper requests of one
// InterProcessSemaphoreV2 acquire and Lease.close() in Curator 5
// (curator-recipes .../locks/InterProcessSemaphoreV2.java, LockInternals.java):
// the internal mutex's create and getChildren, the lease's create, getChildren
// on the leases with a watch, the mutex's delete, and the lease's delete. Curator
// also removes its watch on the leases (client.removeWatchers(), a removeWatches
// request); go-zookeeper has no such call, so the count here is one below
// Curator's.
func curatorPermitCycle(conn *zk.Conn, base string, max int) error {
	acl := zk.WorldACL(zk.PermAll)
	create := func(parent, infix string) (string, error) {
		p, err := conn.Create(parent+"/_c_"+zookeeper.NewGUID()+"-"+infix, nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		if err == zk.ErrNoNode { // creatingParentContainersIfNeeded
			for i := 1; i < len(parent)+1; i++ {
				if i == len(parent) || parent[i] == '/' {
					if _, err := conn.Create(parent[:i], nil, 0, acl); err != nil && err != zk.ErrNodeExists {
						return "", err
					}
				}
			}
			p, err = conn.Create(parent+"/_c_"+zookeeper.NewGUID()+"-"+infix, nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		}
		return p, err
	}
	mutex, err := create(base+"/locks", "lock-")
	if err != nil {
		return err
	}
	locks, _, err := conn.Children(base + "/locks")
	if err != nil {
		return err
	}
	if sorted := zookeeper.SortBySeq(locks); len(sorted) == 0 || base+"/locks/"+sorted[0] != mutex {
		return fmt.Errorf("contended: %v", locks)
	}
	lease, err := create(base+"/leases", "lease-")
	if err != nil {
		return err
	}
	leases, _, _, err := conn.ChildrenW(base + "/leases")
	if err != nil {
		return err
	}
	if !slices.Contains(leases, lease[len(base)+len("/leases/"):]) || len(leases) > max {
		return fmt.Errorf("leases %v", leases)
	}
	if err := conn.Delete(mutex, -1); err != nil {
		return err
	}
	return conn.Delete(lease, -1)
}
