package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
)

// engine is one column: it makes the workers of a row.
type engine interface {
	name() string
	// workers returns one cycle function per worker of r (an acquire then a
	// release, checked on x when r is hot; an add on a counter row) and what
	// ends them, which checks the round's outcome (errNoSuchRow: the engine has
	// no such workload).
	workers(ctx context.Context, r row, x *benchload.Exclusion) ([]func(ctx context.Context) error, func() error, error)
	close()
}

func newEngine(ctx context.Context, name string, o *options) (engine, error) {
	switch name {
	case "sidecar":
		return &sidecarEngine{id: "sidecar", bases: []string{o.sidecar}, client: newHTTPClient()}, nil
	case "stated":
		return &sidecarEngine{id: "stated", bases: []string{o.stated}, client: newHTTPClient(), locksOnly: true}, nil
	case "floor":
		return &sidecarEngine{id: "floor", bases: []string{o.floor}, client: newHTTPClient(), locksOnly: true}, nil
	case "inprocess":
		return newInprocess(o.zk, o.sessions)
	default:
		return &etcdEngine{base: o.etcd, client: newHTTPClient()}, nil
	}
}

// lockName is the lock of worker w in row r.
func lockName(r row, w int) string {
	if r.hot {
		return "bench-hot"
	}
	return "bench-" + strconv.Itoa(w)
}

// newHTTPClient keeps a connection per worker alive (keep-alive, never re-dialled).
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr}
}

// sidecarEngine: one implicit lease per acquisition, as a shell script with curl
// does it. The same code is three columns: "sidecar" (the sidecar as users run
// it by default), "stated" (a second sidecar process, with --state-dir) and
// "floor" (the floor's process, floor.go);
// in fleet mode, "sidecar" is a fleet of sidecar processes, worker w on the
// w-th (mod their number).
type sidecarEngine struct {
	id     string   // the column: "sidecar", "stated" or "floor"
	bases  []string // the sidecars' base URLs
	client *http.Client
	// locksOnly: no counter rows (errNoSuchRow), for a column that only the
	// lock table has.
	locksOnly bool
}

func (e *sidecarEngine) name() string { return e.id }
func (e *sidecarEngine) close()       { e.client.CloseIdleConnections() }

func (e *sidecarEngine) workers(_ context.Context, r row, x *benchload.Exclusion) ([]func(context.Context) error, func() error, error) {
	if r.counters > 0 && e.locksOnly {
		return nil, nil, errNoSuchRow
	}
	if r.counters > 0 {
		fns, check := e.counterWorkers(r)
		return fns, check, nil
	}
	fns := make([]func(context.Context) error, r.workers)
	for w := range fns {
		l := benchload.NewSidecarLock(e.client, e.bases[w%len(e.bases)]+"/v1/locks/"+lockName(r, w))
		l.Hold = r.hold
		fns[w] = func(ctx context.Context) error { return l.Cycle(ctx, x) }
	}
	return fns, func() error { return nil }, nil
}

// inprocessEngine: go-zookeeper's lock recipe in this process, worker w on
// session w mod n.
type inprocessEngine struct {
	conns []*zk.Conn
	root  string
}

func newInprocess(server string, sessions int) (*inprocessEngine, error) {
	e := &inprocessEngine{root: "/coord-bench-inprocess"}
	for range sessions {
		conn, events, err := zk.Connect(strings.Split(server, ","), 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
		if err != nil {
			e.close()
			return nil, err
		}
		e.conns = append(e.conns, conn)
		if err := awaitConnected(events); err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

func awaitConnected(events <-chan zk.Event) error {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no ZooKeeper session within 10s")
		}
	}
}

func (e *inprocessEngine) name() string { return "inprocess" }

func (e *inprocessEngine) close() {
	for _, c := range e.conns {
		c.Close()
	}
}

func (e *inprocessEngine) workers(_ context.Context, r row, x *benchload.Exclusion) ([]func(context.Context) error, func() error, error) {
	if r.counters > 0 {
		return e.counterWorkers(r)
	}
	fns := make([]func(context.Context) error, r.workers)
	for w := range fns {
		l := zk.NewLock(e.conns[w%len(e.conns)], e.root+"/"+lockName(r, w), zk.WorldACL(zk.PermAll))
		fns[w] = func(context.Context) error {
			if err := l.Lock(); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
			err := x.Enter(0)
			time.Sleep(r.hold)
			x.Leave()
			if uerr := l.Unlock(); uerr != nil && err == nil {
				err = fmt.Errorf("unlock: %w", uerr)
			}
			return err
		}
	}
	return fns, func() error { return nil }, nil
}

// etcdEngine: etcd's v3 lock over its HTTP gateway; each worker grants itself a
// lease once per round (not timed per cycle) and locks with it.
type etcdEngine struct {
	base   string
	client *http.Client
}

func (e *etcdEngine) name() string { return "etcd" }
func (e *etcdEngine) close()       { e.client.CloseIdleConnections() }

func (e *etcdEngine) workers(ctx context.Context, r row, x *benchload.Exclusion) ([]func(context.Context) error, func() error, error) {
	if r.counters > 0 {
		return nil, nil, errNoSuchRow
	}
	fns := make([]func(context.Context) error, r.workers)
	leases := make([]string, r.workers)
	revoke := func() {
		bg, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, id := range leases {
			if id != "" {
				_ = benchload.Send(bg, e.client, http.MethodPost, e.base+"/v3/lease/revoke", map[string]string{"ID": id}, http.StatusOK, nil)
			}
		}
	}
	for w := range fns {
		var lease struct{ ID string }
		if err := benchload.Send(ctx, e.client, http.MethodPost, e.base+"/v3/lease/grant", map[string]int{"TTL": 120}, http.StatusOK, &lease); err != nil {
			revoke()
			return nil, nil, err
		}
		leases[w] = lease.ID
		name := base64.StdEncoding.EncodeToString([]byte(lockName(r, w)))
		lockBody := map[string]string{"name": name, "lease": lease.ID}
		fns[w] = func(ctx context.Context) error {
			var held struct {
				Key string `json:"key"`
			}
			if err := benchload.Send(ctx, e.client, http.MethodPost, e.base+"/v3/lock/lock", lockBody, http.StatusOK, &held); err != nil {
				return err
			}
			if held.Key == "" {
				return fmt.Errorf("lock: answer without a key")
			}
			err := x.Enter(0)
			x.Leave()
			if uerr := benchload.Send(ctx, e.client, http.MethodPost, e.base+"/v3/lock/unlock", map[string]string{"key": held.Key}, http.StatusOK, nil); err == nil {
				err = uerr
			}
			return err
		}
	}
	return fns, func() error { revoke(); return nil }, nil
}
