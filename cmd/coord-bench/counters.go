package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
)

// Counter rows: `workers` workers each adding 1 in a loop, worker w on counter
// w mod `counters` (fresh counters every round). A sidecar add is
// POST /v1/counters/NAME?add=1 (the sidecar combines concurrent adds to one
// counter into one compare-and-set); an in-process add is go-zookeeper's Get,
// then Set at the version read, retried when refused (the loop Curator's
// DistributedAtomicLong and kazoo's Counter make), in the 8-byte big-endian
// layout. After every round each counter must hold exactly the adds
// acknowledged to it.

// errNoSuchRow: the engine has no such workload (etcd has no counter recipe).
var errNoSuchRow = errors.New("no such workload on this engine")

// counterRound numbers rounds, so that each round counts on fresh counters.
var counterRound atomic.Int64

// counterNames are the counters of one round of r.
func counterNames(r row) []string {
	n := counterRound.Add(1)
	names := make([]string, r.counters)
	for c := range names {
		names[c] = "bench-ctr-" + strconv.FormatInt(n, 10) + "-" + strconv.Itoa(c)
	}
	return names
}

// counterCheck is the done function of a counter round: each counter read (by
// value) must hold the adds acknowledged to it (acked, by counter).
func counterCheck(names []string, acked []atomic.Int64, value func(name string) (int64, error)) func() error {
	return func() error {
		for c, n := range names {
			v, err := value(n)
			if err != nil {
				return fmt.Errorf("counter %s: %w", n, err)
			}
			if v != acked[c].Load() {
				return fmt.Errorf("counter %s holds %d after %d acknowledged adds", n, v, acked[c].Load())
			}
		}
		return nil
	}
}

func (e *sidecarEngine) counterWorkers(r row) ([]func(context.Context) error, func() error) {
	names := counterNames(r)
	base := e.bases[0] + "/v1/counters/"
	acked := make([]atomic.Int64, len(names))
	fns := make([]func(context.Context) error, r.workers)
	for w := range fns {
		c := w % len(names)
		u := base + names[c] + "?add=1"
		fns[w] = func(ctx context.Context) error {
			if err := benchload.Send(ctx, e.client, http.MethodPost, u, nil, http.StatusOK, nil); err != nil {
				return err
			}
			acked[c].Add(1)
			return nil
		}
	}
	return fns, counterCheck(names, acked, func(name string) (int64, error) {
		var got struct {
			Value int64 `json:"value"`
		}
		err := benchload.Send(context.Background(), e.client, http.MethodGet, base+name, nil, http.StatusOK, &got)
		return got.Value, err
	})
}

func (e *inprocessEngine) counterWorkers(r row) ([]func(context.Context) error, func() error, error) {
	dir := e.root + "-counters"
	if _, err := e.conns[0].Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return nil, nil, err
	}
	names := counterNames(r)
	acked := make([]atomic.Int64, len(names))
	fns := make([]func(context.Context) error, r.workers)
	for w := range fns {
		c := w % len(names)
		conn, p := e.conns[w%len(e.conns)], dir+"/"+names[c]
		fns[w] = func(context.Context) error {
			if err := casAdd(conn, p); err != nil {
				return err
			}
			acked[c].Add(1)
			return nil
		}
	}
	return fns, counterCheck(names, acked, func(name string) (int64, error) {
		data, _, err := e.conns[0].Get(dir + "/" + name)
		if errors.Is(err, zk.ErrNoNode) {
			return 0, nil // its workers made no add
		}
		if err != nil || len(data) != 8 {
			return 0, fmt.Errorf("%x: %w", data, err)
		}
		return int64(binary.BigEndian.Uint64(data)), nil
	}), nil
}

// casAdd adds 1 to the counter at p: Get, then Set at the version read (Create
// when there is none), until a write is not refused.
func casAdd(conn *zk.Conn, p string) error {
	for {
		data, st, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			_, err = conn.Create(p, binary.BigEndian.AppendUint64(nil, 1), 0, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if len(data) != 8 {
			return fmt.Errorf("counter %s holds %d bytes", p, len(data))
		}
		v := int64(binary.BigEndian.Uint64(data)) + 1
		_, err = conn.Set(p, binary.BigEndian.AppendUint64(nil, uint64(v)), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		return err
	}
}
