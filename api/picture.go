package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"sync"

	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/recipes/counter"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kv"
	"github.com/coord-sidecar/coord-sidecar/recipes/partition"
	"github.com/coord-sidecar/coord-sidecar/recipes/throughput"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// The whole picture (GET /v1/events) follows changes instead of reading the tree
// again and again. While anyone follows the "all" topic, the picture follows, for
// every kind of the registry (pictureKinds), its directory's children (one
// watch: names appear and vanish) and every name in it through that kind's
// per-name follower (kit.Followers: watches on what the name's state is read
// from, shared with the name's own event stream). Each new state is published to
// the keyed topic "all", which gives each subscriber what changed since it last
// took (package sse), so a first state of 10,000 things is delivered whole and a
// slow subscriber coalesces. With nothing changing, nothing is read, however many
// things or followers.

// pictureKind is one kind of thing the picture shows: adding a kind is one entry
// in pictureKinds.
type pictureKind struct {
	// kind names its keys ("lock": key "lock/db"); overviewKinds (auth.go) maps it
	// to the token kind that may read it.
	kind string
	// event is its SSE event name.
	event string
	// dir is its directory under --zk-root, whose children are its names.
	dir string
	// field is the name's field in its body ("name", "group"), repeated in the
	// farewell {"deleted": true, field: name}.
	field string
	// follow follows one name: publish gets its body as JSON each time it changes,
	// nil when the name is not to be shown (a lowered barrier); stop may block
	// (it waits for the follower), and once it returns publish is not called again.
	follow func(name string, publish func(data []byte)) (stop func(), err error)
}

// pictureKinds is the registry of the kinds the picture shows.
func (s *Server) pictureKinds() []pictureKind {
	return []pictureKind{
		{kind: "lock", event: "lock", dir: "locks", field: "name",
			follow: followed(s.opt.Locks.Follow, func(st *recipes.LockState) any { return lockBody(st) })},
		{kind: "election", event: "leader", dir: "elections", field: "name",
			follow: followed(s.opt.Elections.Follow, func(st *election.ElectionState) any { return electionBody(st) })},
		{kind: "throughput", event: "throughput", dir: "throughput", field: "group",
			follow: followed(s.opt.Throughput.Follow, func(g *throughput.ThroughputGroup) any {
				if g.Suspended {
					return nil // as the group's own stream: the last state stands
				}
				return throughputBody(g)
			})},
		{kind: "queue", event: "queue", dir: "queues", field: "name",
			follow: s.inspected("queues", bodyOf(s.readQueue), queueParts.MatchString)},
		{kind: "barrier", event: "barrier", dir: "barriers", field: "name",
			follow: s.inspected("barriers", bodyOf(s.readBarrier), nil)},
		{kind: "double-barrier", event: "double-barrier", dir: "double-barriers", field: "name",
			follow: s.inspected("double-barriers", bodyOf(s.readDoubleBarrier), nil)},
		{kind: "kv", event: "kv", dir: "kv", field: "key",
			follow: followed(s.opt.KV.Follow, func(v *kv.Value) any {
				if v.Unknown || !v.Exists {
					return nil // its directory's watch says when it is gone
				}
				return KeyInfo{Key: v.Key, Version: v.Version, Size: len(v.Data)}
			})},
		{kind: "counter", event: "counter", dir: "counters", field: "name",
			follow: followed(s.opt.Counters.Follow, func(st *counter.State) any {
				if st.Unknown || !st.Exists || st.Corrupt {
					return nil
				}
				return Counter{Name: st.Name, Value: st.Value}
			})},
		{kind: "semaphore", event: "semaphore", dir: "semaphores", field: "name",
			follow: followed(s.opt.Semaphores.Follow, func(st *recipes.SemaphoreState) any { return semaphoreBody(st) })},
		{kind: "rwlock", event: "rwlock", dir: "rwlocks", field: "name",
			follow: followed(s.opt.RWLocks.Follow, func(st *recipes.RWLockState) any { return rwlockBody(st) })},
		{kind: "group", event: "group", dir: "groups", field: "group",
			follow: followed(s.opt.Groups.Follow, func(st *group.State) any {
				if st.Suspended {
					return nil // as the group's own stream: the session stream says so
				}
				return groupBody(st)
			})},
		{kind: "partitions", event: "partitions", dir: "partitions", field: "group",
			follow: followed(s.opt.Partitions.Follow, func(st *partition.State) any { return partitionGroupBody(st) })},
	}
}

// queueParts are the nodes under a queue whose children change its length or
// claimed count: its priorities, their buckets, and its claims.
var queueParts = regexp.MustCompile(`^(p[0-9]{2}(/b[0-9]{10})?|claims)$`)

// followed adapts a recipe's own per-name follower: body turns a state into the
// picture's body (nil: publish nothing, the last state stands).
func followed[S any](follow func(string) (*kit.Follower[S], error), body func(S) any) func(string, func([]byte)) (func(), error) {
	return func(name string, publish func([]byte)) (func(), error) {
		f, err := follow(name)
		if err != nil {
			return nil, err
		}
		cancel := f.Subscribe(func(st S) {
			if b := body(st); b != nil {
				if data, err := json.Marshal(b); err == nil {
					publish(data)
				}
			}
		})
		return func() { cancel(); f.Close() }, nil
	}
}

// bodyOf turns a name's read (shared with the lists) into the JSON the picture
// publishes; a read answering errSkip gives nil (not shown).
func bodyOf[T any](read func(context.Context, string) (T, error)) func(context.Context, string) ([]byte, error) {
	return func(ctx context.Context, name string) ([]byte, error) {
		b, err := read(ctx, name)
		if errors.Is(err, errSkip) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return json.Marshal(b)
	}
}

// inspected follows the names of a kind that has no follower of its own: a
// kit.TreeSource that watches the children of {dir}/{name} and of each node
// under it whose path relative to it deeper accepts (nil: none), and reads the
// name with read. The registry of these followers is made at first use.
func (s *Server) inspected(dir string, read func(context.Context, string) ([]byte, error), deeper func(rel string) bool) func(string, func([]byte)) (func(), error) {
	var once sync.Once
	var reg *kit.Followers[[]byte]
	return func(name string, publish func([]byte)) (func(), error) {
		once.Do(func() {
			base := s.opt.Session.Root() + "/" + dir
			reg = kit.NewFollowers(s.opt.Session, nil, func(name string) kit.Source[[]byte] {
				return kit.NewTreeSource(base+"/"+name, deeper,
					func(ctx context.Context) ([]byte, error) { return read(ctx, name) }, sameBody)
			})
		})
		f := reg.Follow(name)
		cancel := f.Subscribe(publish)
		return func() { cancel(); f.Close() }, nil
	}
}

// sameBody tells whether body b shows nothing new after a (nil: not shown).
func sameBody(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// publishAll sends one entity's state to the "all" topic. Its events carry no
// id: each /v1/events stream numbers the events it carries itself
// (StreamEverything), so that no id counts what its token may not read.
func (s *Server) publishAll(key, event string, data []byte) {
	s.broker.PublishKeyed(allTopic, key, sse.Event{Name: event, Data: data})
}

// forgetAll sends an entity's farewell to the "all" topic and forgets it.
func (s *Server) forgetAll(key, event string, data []byte) {
	s.broker.ForgetKeyed(allTopic, key, sse.Event{Name: event, Data: data})
}

// pictureEntry is one followed name.
type pictureEntry struct {
	stop func()
	// last and shown are written by the name's follower (one state at a time),
	// and read by the picture's loop only after stop.
	last  []byte
	shown bool
}

// pictureRun is the picture while followed: one loop that starts and stops the
// followers of names as they appear and vanish.
type pictureRun struct {
	s     *Server
	kinds []pictureKind
	dirs  *kit.Followers[[]string]

	mu    sync.Mutex
	names [][]string // latest names of each kind (nil: none new)
	wake  chan struct{}

	entries []map[string]*pictureEntry // the loop's own: followed names of each kind
}

// followPicture follows the picture until the returned stop is called.
func (s *Server) followPicture() (stop func()) {
	r := &pictureRun{s: s, kinds: s.pictureKinds(), wake: make(chan struct{}, 1)}
	r.names = make([][]string, len(r.kinds))
	r.entries = make([]map[string]*pictureEntry, len(r.kinds))
	r.dirs = kit.NewFollowers(s.opt.Session, nil, func(p string) kit.Source[[]string] { return &kit.DirSource{Dir: p} })
	var dirStops []func()
	for i, k := range r.kinds {
		r.entries[i] = map[string]*pictureEntry{}
		f := r.dirs.Follow(s.opt.Session.Root() + "/" + k.dir)
		cancel := f.Subscribe(func(names []string) {
			r.mu.Lock()
			r.names[i] = names
			r.mu.Unlock()
			select {
			case r.wake <- struct{}{}:
			default:
			}
		})
		dirStops = append(dirStops, func() { cancel(); f.Close() })
	}
	ctx, cancel := context.WithCancel(s.stopped)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-r.wake:
				r.apply()
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
		for _, stop := range dirStops {
			stop()
		}
		for i := range r.kinds {
			for name, e := range r.entries[i] {
				e.stop()
				delete(r.entries[i], name)
			}
		}
	}
}

// apply starts following the names that appeared and stops those that vanished
// (publishing their farewell if they were shown).
func (r *pictureRun) apply() {
	r.mu.Lock()
	latest := slices.Clone(r.names)
	clear(r.names)
	r.mu.Unlock()
	for i, names := range latest {
		if names == nil {
			continue
		}
		k, followed := r.kinds[i], r.entries[i]
		present := make(map[string]bool, len(names))
		for _, n := range names {
			present[n] = true
			if followed[n] == nil {
				if e := r.start(k, n); e != nil {
					followed[n] = e
				}
			}
		}
		for n, e := range followed {
			if present[n] {
				continue
			}
			e.stop()
			delete(followed, n)
			if e.shown {
				data, _ := json.Marshal(map[string]any{"deleted": true, k.field: n})
				r.s.forgetAll(k.kind+"/"+n, k.event, data)
			}
		}
	}
}

// start follows one name of kind k.
func (r *pictureRun) start(k pictureKind, name string) *pictureEntry {
	e := &pictureEntry{}
	key := k.kind + "/" + name
	stop, err := k.follow(name, func(data []byte) {
		switch {
		case data == nil && e.shown:
			e.shown, e.last = false, nil
			gone, _ := json.Marshal(map[string]any{"deleted": true, k.field: name})
			r.s.forgetAll(key, k.event, gone)
		case data == nil, e.shown && bytes.Equal(data, e.last):
		default:
			e.shown, e.last = true, data
			r.s.publishAll(key, k.event, data)
		}
	})
	if err != nil {
		return nil
	}
	e.stop = stop
	return e
}
