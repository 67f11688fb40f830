// Package picture is the whole picture of GET /v1/events and the status page,
// kept by following changes instead of reading the tree again and again.
//
// The picture is made of sections (Section), one per kind of thing shown
// ("lock", "queue", ...): a recipe's descriptor (api.Descriptor) gives its
// own. While it is followed (Follow), the picture follows, for every section,
// its directory's children (one watch: names appear and vanish) and every
// name in it through that section's per-name follower (kit.Followers:
// watches on what the name's state is read from, shared with the name's own
// event stream). Each new state goes to the caller's publish, each name that
// leaves to its forget; api sends them to the keyed topic "all", which gives
// each subscriber what changed since it last took (package sse), so a first
// state of 10,000 things is delivered whole and a slow subscriber coalesces.
// With nothing changing, nothing is read, however many things or followers.
package picture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Section is one kind of thing the picture shows (GET /v1/events, the status
// page): a recipe's descriptor (api.Descriptor) gives its sections.
type Section struct {
	// Name names its keys ("lock": key "lock/db").
	Name string
	// Token is the token kind whose allow entries reach its names (api/tokens:
	// "locks"); a scoped token's /v1/events shows only the names it reaches.
	Token string
	// Event is its SSE event name.
	Event string
	// Dir is its directory under --zk-root, whose children are its names; an
	// absolute path is the directory itself (the services' --services-base).
	Dir string
	// Field is the name's field in its body ("name", "group"), repeated in the
	// farewell {"deleted": true, field: name}.
	Field string
	// Follow follows one name: publish gets its body as JSON each time it
	// changes, nil when the name is not to be shown (a lowered barrier); stop
	// may block (it waits for the follower), and once it returns publish is not
	// called again. Followed and Inspected make one.
	Follow func(name string, publish func(data []byte)) (stop func(), err error)
}

// Followed adapts a recipe's own per-name follower: body turns a state into the
// picture's body (nil: publish nothing, the last state stands).
func Followed[S any](follow func(string) (*kit.Follower[S], error), body func(S) any) func(string, func([]byte)) (func(), error) {
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

// ErrSkip is a read's answer for a name a list (api.List) or the picture
// (BodyOf) leaves out: a barrier that is not raised.
var ErrSkip = errors.New("not listed")

// BodyOf turns a name's read (shared with the lists) into the JSON the picture
// publishes; a read answering ErrSkip gives nil (not shown).
func BodyOf[T any](read func(context.Context, string) (T, error)) func(context.Context, string) ([]byte, error) {
	return func(ctx context.Context, name string) ([]byte, error) {
		b, err := read(ctx, name)
		if errors.Is(err, ErrSkip) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return json.Marshal(b)
	}
}

// Inspected follows the names of a kind that has no follower of its own: a
// kit.TreeSource that watches the children of {dir}/{name} and of each node
// under it whose path relative to it deeper accepts (nil: none), and reads the
// name with read. The registry of these followers is made at first use.
func Inspected(sess *zookeeper.Session, dir string, read func(context.Context, string) ([]byte, error), deeper func(rel string) bool) func(string, func([]byte)) (func(), error) {
	var once sync.Once
	var reg *kit.Followers[[]byte]
	return func(name string, publish func([]byte)) (func(), error) {
		once.Do(func() {
			base := sess.Root() + "/" + dir
			reg = kit.NewFollowers(sess, nil, func(name string) kit.Source[[]byte] {
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

// entry is one followed name.
type entry struct {
	stop func()
	// last and shown are written by the name's follower (one state at a time),
	// and read by the picture's loop only after stop.
	last  []byte
	shown bool
}

// run is the picture while followed: one loop that starts and stops the
// followers of names as they appear and vanish.
type run struct {
	publish, forget func(key, event string, data []byte)
	sections        []Section
	dirs            *kit.Followers[[]string]

	mu    sync.Mutex
	names [][]string // latest names of each section (nil: none new)
	wake  chan struct{}

	entries []map[string]*entry // the loop's own: followed names of each section
}

// Follow follows the picture of sections on sess until the returned stop is
// called or ctx ends: publish gets a name's state (its body as JSON, key
// "<section>/<name>") each time it changes, forget the farewell of a shown name
// that is gone or no longer shown ({"deleted": true, field: name}). Both are
// called one state of a name at a time; once stop returns, neither is called
// again.
func Follow(ctx context.Context, sess *zookeeper.Session, sections []Section, publish, forget func(key, event string, data []byte)) (stop func()) {
	r := &run{publish: publish, forget: forget, sections: sections, wake: make(chan struct{}, 1)}
	r.names = make([][]string, len(r.sections))
	r.entries = make([]map[string]*entry, len(r.sections))
	r.dirs = kit.NewFollowers(sess, nil, func(p string) kit.Source[[]string] { return &kit.DirSource{Dir: p} })
	var dirStops []func()
	for i, k := range r.sections {
		r.entries[i] = map[string]*entry{}
		dir := sess.Root() + "/" + k.Dir
		if strings.HasPrefix(k.Dir, "/") {
			dir = k.Dir
		}
		f := r.dirs.Follow(dir)
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
	stopLoop := kit.OnWake(ctx, r.wake, r.apply)
	return func() {
		stopLoop()
		for _, stop := range dirStops {
			stop()
		}
		for i := range r.sections {
			for name, e := range r.entries[i] {
				e.stop()
				delete(r.entries[i], name)
			}
		}
	}
}

// apply starts following the names that appeared and stops those that vanished
// (publishing their farewell if they were shown).
func (r *run) apply() {
	r.mu.Lock()
	latest := slices.Clone(r.names)
	clear(r.names)
	r.mu.Unlock()
	for i, names := range latest {
		if names == nil {
			continue
		}
		k, followed := r.sections[i], r.entries[i]
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
				data, _ := json.Marshal(map[string]any{"deleted": true, k.Field: n})
				r.forget(k.Name+"/"+n, k.Event, data)
			}
		}
	}
}

// start follows one name of section k.
func (r *run) start(k Section, name string) *entry {
	e := &entry{}
	key := k.Name + "/" + name
	stop, err := k.Follow(name, func(data []byte) {
		switch {
		case data == nil && e.shown:
			e.shown, e.last = false, nil
			gone, _ := json.Marshal(map[string]any{"deleted": true, k.Field: name})
			r.forget(key, k.Event, gone)
		case data == nil, e.shown && bytes.Equal(data, e.last):
		default:
			e.shown, e.last = true, data
			r.publish(key, k.Event, data)
		}
	})
	if err != nil {
		return nil
	}
	e.stop = stop
	return e
}
