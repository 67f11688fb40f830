package main

// The floor (issue 41): a reference server for the lock rows, not a product
// path. It is the least a server can be that offers the sidecar's lock cycle
// over HTTP on one ZooKeeper session: net/http and chi over one go-zookeeper
// session, serving only the two routes the bench's lock cycle uses
// (POST /v1/locks/NAME?wait=..., DELETE /v1/locks/NAME?lease=...), and making
// exactly the ZooKeeper requests the sidecar's lock cycle makes, grouped across
// concurrent callers the same way (recipes/lock/lock.go, recipes/line/line.go,
// recipes/line/handoff.go, internal/zookeeper/protected.go, txn.go, lister.go):
//
//   - acquire: one multi creating the ephemeral sequential node
//     _c_<guid>-lock-<seq> under the lock's container parent with an empty
//     write of the parent (the stamp: the parent's new mzxid is the node's
//     czxid, its child count tells whether the node is alone); the parent made
//     as a container when missing;
//   - a node alone under its parent is the head at once, with the stamp's czxid
//     as its fencing token; otherwise the line is listed (one listing shared by
//     the callers of a parent that ask while one is on the wire), and the node
//     waits on its predecessor only: handed over at once when the predecessor
//     is this server's holder let go here, watched in ZooKeeper (exists with a
//     watch) when it is another's, or this server's for over a second;
//   - release: one multi deleting the node, after handing the head to this
//     server's waiter on it;
//   - every multi goes through one group commit: concurrent callers' ops share
//     one transaction (up to 128 ops), except that two creates under one parent
//     never share one (they go in transactions of their own, sent at once, up
//     to 8 a batch); at most 2 batches are under way at once; a refused shared
//     transaction is sent again, each caller's ops alone.
//
// Nothing else: no checks of names or parameters (wait is not enforced: a
// waiter waits until it is granted or its client goes), no leases (the lease of
// a grant is its node's guid), no logs, metrics, timeouts or recovery from a
// lost connection (a failed ZooKeeper call is a 500). That is why it is the
// floor: what the sidecar costs above it is what the sidecar's own code adds
// to the same ZooKeeper work behind the same HTTP stack. It shares one pure
// helper with the sidecar, internal/guid (a protected create's UUID), so that
// both name their nodes at the same cost; nothing of the sidecar's request
// path.

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof" // COORD_PPROF: the floor's profiles, beside the sidecar's
	"net/url"
	"os"
	"os/signal"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/guid"

	"github.com/go-chi/chi/v5"
	"github.com/go-zookeeper/zk"
)

// floorRoot is the floor's ZooKeeper root; its locks are floorRoot/locks/NAME.
const floorRoot = "/coord-bench-floor"

// floorServer is the floor's state: one session and what the sidecar's lock
// recipe keeps in memory for the same cycle.
type floorServer struct {
	conn *zk.Conn
	dir  string
	acl  []zk.ACL
	txns floorTxns
	list floorLister

	mu sync.Mutex
	// held: lease (the node's guid) → held node.
	held map[string]string
	// local: this server's contender nodes, until deleted here; waiting: node →
	// waits on it (recipes/line/handoff.go).
	local   map[string]struct{}
	waiting map[string][]*floorWait
}

// floorWait is one wait on a predecessor: handed closes when it is let go as
// the head, gone when it is deleted here otherwise.
type floorWait struct {
	handed, gone chan struct{}
	local        bool
}

// floorCycles counts the floor's lock cycles (releases answered 204), served
// as "cycles" at /debug/vars beside the profiles when COORD_PPROF is set, so
// that a profile's CPU can be divided by the cycles it covers
// (scripts/bench-profile.sh).
var floorCycles = expvar.NewInt("cycles")

// serveFloor runs the floor on addr over one session to servers until SIGINT
// or SIGTERM. With COORD_PPROF set (an address, e.g. 127.0.0.1:6061), as for
// the sidecar, it also serves Go's profiles (/debug/pprof/...) and its cycle
// count (/debug/vars) there, on a listener of its own.
func serveFloor(ctx context.Context, addr, servers string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if pp := os.Getenv("COORD_PPROF"); pp != "" {
		pln, err := net.Listen("tcp", pp)
		if err != nil {
			return fmt.Errorf("COORD_PPROF: %w", err)
		}
		psrv := &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = psrv.Serve(pln) }()
		defer psrv.Close()
	}
	f, err := newFloor(servers, floorRoot)
	if err != nil {
		return err
	}
	defer f.close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: f.handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
	return nil
}

// newFloor connects the floor's session to servers, its locks under
// root/locks; close ends it.
func newFloor(servers, root string) (*floorServer, error) {
	conn, events, err := zk.Connect(strings.Split(servers, ","), 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		return nil, err
	}
	if err := awaitConnected(events); err != nil {
		conn.Close()
		return nil, err
	}
	// The session's later events are not read: go-zookeeper drops what its
	// channel cannot take.
	f := &floorServer{conn: conn, dir: root + "/locks", acl: zk.WorldACL(zk.PermAll),
		held: map[string]string{}, local: map[string]struct{}{}, waiting: map[string][]*floorWait{}}
	f.txns.conn = conn
	f.list.conn = conn
	for _, p := range []string{root, f.dir} { // the sidecar makes its root once, too
		if _, err := conn.Create(p, nil, 0, f.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			f.close()
			return nil, fmt.Errorf("create %s: %w", p, err)
		}
	}
	return f, nil
}

// close ends the floor's session.
func (f *floorServer) close() {
	f.conn.Close()
	f.txns.drains.Wait() // (failing at once on the closed connection)
}

// handler serves the two routes of the lock cycle.
func (f *floorServer) handler() http.Handler {
	r := chi.NewRouter()
	r.Post("/v1/locks/{name}", f.acquire)
	r.Delete("/v1/locks/{name}", f.release)
	return r
}

// acquire: POST /v1/locks/{name}; 201 with the lease and the fencing token.
func (f *floorServer) acquire(w http.ResponseWriter, r *http.Request) {
	parent := f.dir + "/" + chi.URLParam(r, "name")
	id := guid.New() // the sidecar's own code (pure: no request)
	node, czxid, alone, err := f.create(r.Context(), parent, id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f.enter(node)
	if !alone {
		err = f.awaitHead(r.Context(), parent, node)
	}
	if err == nil {
		err = r.Context().Err()
	}
	if err != nil {
		f.end(node, false)
		_, _ = f.txns.do("", &zk.DeleteRequest{Path: node, Version: -1})
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f.mu.Lock()
	f.held[id] = node
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"lease":"`+id+`","fencingToken":`+strconv.FormatInt(czxid, 10)+"}")
}

// release: DELETE /v1/locks/{name}?lease=...; 204.
func (f *floorServer) release(w http.ResponseWriter, r *http.Request) {
	lease, _ := strings.CutPrefix(r.URL.RawQuery, "lease=")
	lease, _ = url.QueryUnescape(lease)
	f.mu.Lock()
	node, ok := f.held[lease]
	delete(f.held, lease)
	f.mu.Unlock()
	if !ok {
		http.Error(w, "not held", http.StatusNotFound)
		return
	}
	if f.end(node, true) {
		runtime.Gosched() // as the sidecar: the successor's answer first
	}
	if _, err := f.txns.do("", &zk.DeleteRequest{Path: node, Version: -1}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	floorCycles.Add(1)
}

// create makes the stamped contender node under parent (the parent made as a
// container when missing), and returns it with its czxid and whether it was
// alone under parent.
func (f *floorServer) create(ctx context.Context, parent, guid string) (string, int64, bool, error) {
	for {
		res, err := f.txns.do(parent,
			&zk.CreateRequest{Path: parent + "/_c_" + guid + "-lock-", Acl: f.acl, Flags: zk.FlagEphemeralSequential},
			&zk.SetDataRequest{Path: parent, Version: -1})
		switch {
		case err == nil:
			st := res[1].Stat
			return res[0].String, st.Mzxid, st.NumChildren == 1, nil
		case errors.Is(err, zk.ErrNoNode) && ctx.Err() == nil:
			if _, err := f.conn.CreateContainer(parent, nil, zk.FlagContainer, f.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return "", 0, false, err
			}
		default:
			return "", 0, false, err
		}
	}
}

// awaitHead waits until node heads its parent's line (recipes/line/line.go).
func (f *floorServer) awaitHead(ctx context.Context, parent, node string) error {
	self := path.Base(node)
	for {
		children, err := f.list.children(parent)
		if err != nil {
			return err
		}
		line := floorSortBySeq(children)
		idx := slices.Index(line, self)
		switch {
		case idx < 0:
			return fmt.Errorf("node %s vanished", node)
		case idx == 0:
			return nil
		}
		pred := parent + "/" + line[idx-1]
		gone, handed, err := f.waitGone(ctx, pred)
		switch {
		case err != nil:
			return err
		case handed, gone && idx == 1:
			return nil
		}
	}
}

// waitGone waits until pred goes: told here when it is this server's (a
// ZooKeeper watch only after a second), watched in ZooKeeper otherwise.
func (f *floorServer) waitGone(ctx context.Context, pred string) (gone, handed bool, err error) {
	pw := &floorWait{handed: make(chan struct{}), gone: make(chan struct{})}
	f.mu.Lock()
	_, pw.local = f.local[pred]
	f.waiting[pred] = append(f.waiting[pred], pw)
	f.mu.Unlock()
	defer f.unwait(pred, pw)
	if pw.local {
		grace := time.NewTimer(time.Second)
		defer grace.Stop()
		select {
		case <-pw.handed:
			return true, true, nil
		case <-pw.gone:
			return true, false, nil
		case <-ctx.Done():
			return false, false, ctx.Err()
		case <-grace.C:
		}
	}
	exists, _, watch, err := f.conn.ExistsW(pred)
	if err != nil || !exists {
		return !exists, false, err
	}
	select {
	case ev := <-watch:
		return ev.Type == zk.EventNodeDeleted, false, nil
	case <-pw.handed:
		return true, true, nil
	case <-pw.gone:
		return true, false, nil
	case <-ctx.Done():
		return false, false, ctx.Err()
	}
}

// enter marks node as this server's contender.
func (f *floorServer) enter(node string) {
	f.mu.Lock()
	f.local[node] = struct{}{}
	f.mu.Unlock()
}

// unwait ends the wait pw on node.
func (f *floorServer) unwait(node string, pw *floorWait) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := f.waiting[node]
	if i := slices.Index(list, pw); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(f.waiting, node)
	} else {
		f.waiting[node] = list
	}
}

// end forgets node as this server's and tells its waiters: handed (it was
// let go as the head) or gone. It tells whether there were any.
func (f *floorServer) end(node string, handed bool) bool {
	f.mu.Lock()
	delete(f.local, node)
	list := f.waiting[node]
	delete(f.waiting, node)
	f.mu.Unlock()
	for _, pw := range list {
		if handed {
			close(pw.handed)
		} else {
			close(pw.gone)
		}
	}
	return len(list) > 0
}

// floorSortBySeq orders a line by the nodes' 10-digit sequence suffixes.
func floorSortBySeq(children []string) []string {
	seq := func(s string) string { return s[max(len(s)-10, 0):] }
	out := slices.Clone(children)
	sort.Slice(out, func(i, j int) bool { return seq(out[i]) < seq(out[j]) })
	return out
}

// floorTxns is the group commit of internal/zookeeper/txn.go: callers' ops
// queued, taken in order in batches of up to 8 transactions (no two creates
// under one key in one transaction, up to 128 ops each), at most 2 batches
// under way; a caller that finds a slot free sends a batch itself, and what is
// left pending then is sent by a goroutine of its own.
type floorTxns struct {
	conn *zk.Conn
	// drains are the goroutines that send what is left pending.
	drains   sync.WaitGroup
	mu       sync.Mutex
	pending  []*floorTxn
	flushing int
}

type floorTxn struct {
	ops  []any
	key  string
	res  []zk.MultiResponse
	err  error
	done chan struct{}
}

// do applies ops, all or none, possibly in one transaction with other
// callers'; key is the parent under which ops create ("" none).
func (t *floorTxns) do(key string, ops ...any) ([]zk.MultiResponse, error) {
	r := &floorTxn{ops: ops, key: key, done: make(chan struct{})}
	t.mu.Lock()
	t.pending = append(t.pending, r)
	lead := t.flushing < 2
	if lead {
		t.flushing++
	}
	t.mu.Unlock()
	if lead {
		if batch := t.next(); batch != nil {
			t.send(batch)
			t.mu.Lock()
			more := len(t.pending) > 0
			if !more {
				t.flushing--
			}
			t.mu.Unlock()
			if more {
				t.drains.Go(func() {
					for b := t.next(); b != nil; b = t.next() {
						t.send(b)
					}
				})
			}
		}
	}
	<-r.done
	return r.res, r.err
}

// next takes the next batch off pending (nil, and one flusher less, when
// nothing is pending).
func (t *floorTxns) next() []*floorTxn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 {
		t.flushing--
		return nil
	}
	n := 0
	for g := 0; g < 8 && n < len(t.pending); g++ {
		n += floorTake(t.pending[n:])
	}
	batch := t.pending[:n:n]
	t.pending = append([]*floorTxn(nil), t.pending[n:]...)
	return batch
}

// floorTake is how many of pending one transaction takes: in order, up to 128
// ops and up to the first whose key is in it already.
func floorTake(pending []*floorTxn) int {
	n, ops := 0, 0
	var keys []string
	for ; n < len(pending); n++ {
		r := pending[n]
		if n > 0 && ops+len(r.ops) > 128 {
			break
		}
		if r.key != "" {
			if slices.Contains(keys, r.key) {
				break
			}
			keys = append(keys, r.key)
		}
		ops += len(r.ops)
	}
	return n
}

// send cuts a batch into transactions and sends them at once (pipelined).
func (t *floorTxns) send(batch []*floorTxn) {
	var wg sync.WaitGroup
	for len(batch) > 0 {
		n := floorTake(batch)
		group := batch[:n:n]
		batch = batch[n:]
		if len(batch) == 0 {
			t.sendOne(group)
			break
		}
		wg.Go(func() { t.sendOne(group) })
	}
	wg.Wait()
}

// sendOne sends one transaction and answers its callers; a refused shared one
// is sent again, each caller's ops alone (pipelined).
func (t *floorTxns) sendOne(group []*floorTxn) {
	var ops []any
	for _, r := range group {
		ops = append(ops, r.ops...)
	}
	res, err := t.multi(ops)
	switch {
	case err == nil:
		for _, r := range group {
			r.res, res = res[:len(r.ops):len(r.ops)], res[len(r.ops):]
		}
	case len(group) > 1 && len(res) == len(ops):
		var wg sync.WaitGroup
		for _, r := range group {
			wg.Go(func() { r.res, r.err = t.multi(r.ops) })
		}
		wg.Wait()
	default:
		for _, r := range group {
			r.err = err
		}
	}
	for _, r := range group {
		close(r.done)
	}
}

// multi is one multi; an op's error is the error.
func (t *floorTxns) multi(ops []any) ([]zk.MultiResponse, error) {
	res, err := t.conn.Multi(ops...)
	for _, r := range res {
		if r.Error != nil {
			return res, r.Error
		}
	}
	if err == nil && len(res) != len(ops) {
		err = fmt.Errorf("a multi of %d ops answered with %d", len(ops), len(res))
	}
	return res, err
}

// floorLister shares one listing of a parent among the callers that ask while
// one is on the wire (internal/zookeeper/lister.go): each gets a listing sent
// after it asked.
type floorLister struct {
	conn    *zk.Conn
	mu      sync.Mutex
	parents map[string]*floorListBatch
}

type floorListBatch struct {
	waiting []chan floorListed
	running bool
}

type floorListed struct {
	children []string
	err      error
	lead     bool
}

func (l *floorLister) children(parent string) ([]string, error) {
	ch := make(chan floorListed, 1)
	l.mu.Lock()
	if l.parents == nil {
		l.parents = map[string]*floorListBatch{}
	}
	b := l.parents[parent]
	if b == nil {
		b = &floorListBatch{}
		l.parents[parent] = b
	}
	b.waiting = append(b.waiting, ch)
	lead := !b.running
	b.running = true
	l.mu.Unlock()
	if !lead {
		if r := <-ch; !r.lead {
			return r.children, r.err
		}
	}
	l.mu.Lock()
	batch := b.waiting
	b.waiting = nil
	l.mu.Unlock()
	var r floorListed
	r.children, _, r.err = l.conn.Children(parent)
	for _, c := range batch {
		if c != ch {
			c <- r
		}
	}
	l.mu.Lock()
	if len(b.waiting) > 0 {
		next := b.waiting[0]
		l.mu.Unlock()
		next <- floorListed{lead: true}
	} else {
		b.running = false
		delete(l.parents, parent)
		l.mu.Unlock()
	}
	return r.children, r.err
}
