package kv

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	kvstore "github.com/coord-sidecar/coord-sidecar/recipes/kv"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// The prefix stream, GET /v1/kv/events?prefix=P: the keyed broker topic
// "kvtree/P" (one key per key under P), followed while it has subscribers by
// a tree run: the children of each node whose subtree P reaches (one
// DirSource follower each) and each key under P (its kit.Follower, shared
// with the key's own stream and long-polls). A change reads only what
// changed; the broker gives a new subscriber the current state of every key.
//
// Resuming: a run numbers its events itself, in publish order, from a start
// above every id this process gave before (the wall clock in microseconds at
// its start, or the last id + 1), and keeps a journal: each key's last event
// and the farewells of the last maxFarewells deletions. A run outlives its
// last stream by treeLinger, still following, so that a client that reconnects
// with Last-Event-ID N, an id of this run not older than the farewells kept,
// gets the journal's events after N, then the live ones: only what changed.
// Any other id (unknown, of an earlier run or another sidecar process, older
// than the farewells kept) gets the full current state, as a new stream does.

// treeTopicKind is the topic kind of the prefix streams.
const treeTopicKind = "kvtree"

// treeLinger is how long a prefix's run goes on following after its last
// stream ends, so that a reconnect within it resumes; maxFarewells bounds the
// deletions a run remembers.
const (
	treeLinger   = 2 * time.Minute
	maxFarewells = 10000
)

// StreamKeys streams every key under the prefix, then every change; a
// reconnect with a Last-Event-ID the prefix's run can serve gets only what
// changed since.
func (h *KV) StreamKeys(ctx context.Context, req oapi.StreamKeysRequestObject) (oapi.StreamKeysResponseObject, error) {
	prefix := ""
	if req.Params.Prefix != nil {
		prefix = *req.Params.Prefix
	}
	st := h.s.NewKeyedStream(ctx, treeTopicKind+"/"+prefix, "kv")
	if req.Params.LastEventID != nil {
		if last, err := strconv.ParseInt(*req.Params.LastEventID, 10, 64); err == nil {
			h.runs.mu.Lock()
			r := h.runs.m[prefix]
			h.runs.mu.Unlock()
			if r != nil {
				if resumed, ok := r.resume(st, last); ok {
					h.resumes.Inc()
					return treeStream{resumed}, nil
				}
			}
		}
		h.fullRestarts.Inc()
	}
	return treeStream{st}, nil
}

type treeStream struct{ api.Stream }

// VisitStreamKeysResponse serves GET /v1/kv/events.
func (t treeStream) VisitStreamKeysResponse(w http.ResponseWriter) error { return t.Serve(w) }

// treeRun follows the keys under one prefix for its topic.
type treeRun struct {
	h             *KV
	topic, prefix string

	mu      sync.Mutex          // guards pending
	pending map[string][]string // the latest children of each followed node ("": kv/), not applied yet
	wake    chan struct{}
	// stopLoop ends the loop that applies pending (kit.OnWake).
	stopLoop func()

	pubMu  sync.Mutex // one publish at a time, so that ids increase in publish order
	lastID int64
	// The journal, guarded by pubMu: the ids this run gave are first..lastID;
	// states holds each key's last event, farewells the last deletions (in id
	// order), goneFloor the id of the newest farewell dropped from them.
	first      int64
	active     bool // a stream follows the topic: publish to the broker too
	states     map[string]sse.Event
	farewells  []farewellEntry
	goneFloor  int64
	lingerTill *time.Timer // guarded by h.runs.mu: set while no stream follows

	// The loop's own.
	dirs map[string]func()      // followed nodes: how to stop following their children
	kids map[string][]string    // their children as last applied
	keys map[string]*treeMember // followed keys
}

// farewellEntry is a deletion in a run's journal.
type farewellEntry struct {
	id  int64
	key string
	ev  sse.Event
}

// treeRuns is the registry of the prefixes' runs, active or lingering.
type treeRuns struct {
	mu     sync.Mutex
	m      map[string]*treeRun
	lastID int64 // the last id any ended run gave
}

// treeMember is one followed key; shown is written by its follower's
// callback, read by the loop only after stop.
type treeMember struct {
	stop  func()
	shown bool
}

// followTree is the topic kind's follow: it starts the tree run of prefix,
// or takes back the one still lingering (republishing its states to the
// broker, which forgot them). Its stop leaves the run lingering for
// treeLinger (not when the server closes).
func (h *KV) followTree(topic, prefix string) (stop func()) {
	h.runs.mu.Lock()
	defer h.runs.mu.Unlock()
	r := h.runs.m[prefix]
	if r != nil && r.lingerTill != nil {
		r.lingerTill.Stop()
		r.lingerTill = nil
		r.activate()
	} else {
		start := max(time.Now().UnixMicro(), h.runs.lastID+1)
		r = &treeRun{h: h, topic: topic, prefix: prefix, pending: map[string][]string{}, wake: make(chan struct{}, 1),
			dirs: map[string]func(){}, kids: map[string][]string{}, keys: map[string]*treeMember{},
			first: start, lastID: start - 1, states: map[string]sse.Event{}, active: true}
		if h.runs.m == nil {
			h.runs.m = map[string]*treeRun{}
		}
		h.runs.m[prefix] = r
		r.followDir("")
		r.stopLoop = kit.OnWake(context.Background(), r.wake, r.apply)
	}
	return func() { h.linger(r) }
}

// linger leaves r following without streams for treeLinger, then ends it;
// at once when the server is closing.
func (h *KV) linger(r *treeRun) {
	r.pubMu.Lock()
	r.active = false
	r.pubMu.Unlock()
	h.runs.mu.Lock()
	defer h.runs.mu.Unlock()
	if h.s.Closing().Err() != nil {
		h.endRun(r)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(treeLinger, func() {
		h.runs.mu.Lock()
		defer h.runs.mu.Unlock()
		if r.lingerTill == t {
			h.endRun(r)
		}
	})
	r.lingerTill = t
}

// endLingering ends every lingering run (the server is closing).
func (h *KV) endLingering() {
	h.runs.mu.Lock()
	defer h.runs.mu.Unlock()
	for _, r := range h.runs.m {
		if r.lingerTill != nil {
			r.lingerTill.Stop()
			h.endRun(r)
		}
	}
}

// endRun stops r's loop and followers and forgets it. h.runs.mu is held.
func (h *KV) endRun(r *treeRun) {
	r.lingerTill = nil
	delete(h.runs.m, r.prefix)
	r.stopLoop()
	for d, stop := range r.dirs {
		stop()
		delete(r.dirs, d)
	}
	for k, m := range r.keys {
		m.stop()
		delete(r.keys, k)
	}
	r.pubMu.Lock()
	h.runs.lastID = max(h.runs.lastID, r.lastID)
	r.pubMu.Unlock()
}

// activate publishes the journal's states to the broker again, in id order,
// for the streams of a run taken back from lingering.
func (r *treeRun) activate() {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.active = true
	for _, e := range r.journalAfter(0, nil, false) {
		r.h.s.PublishKeyed(r.topic, e.key, e.ev)
	}
}

// keyedEvent is a journal entry.
type keyedEvent struct {
	key string
	id  int64
	ev  sse.Event
}

// journalAfter is the journal's events after id last that keep accepts (nil:
// all), in id order: the states, and with farewells the deletions too.
// r.pubMu is held.
func (r *treeRun) journalAfter(last int64, keep func(string) bool, farewells bool) []keyedEvent {
	var out []keyedEvent
	for k, ev := range r.states {
		if id, _ := strconv.ParseInt(ev.ID, 10, 64); id > last && (keep == nil || keep(k)) {
			out = append(out, keyedEvent{k, id, ev})
		}
	}
	if farewells {
		for _, f := range r.farewells {
			if f.id > last && (keep == nil || keep(f.key)) {
				out = append(out, keyedEvent{f.key, f.id, f.ev})
			}
		}
	}
	slices.SortFunc(out, func(a, b keyedEvent) int { return cmp.Compare(a.id, b.id) })
	return out
}

// resume makes st a stream for a client that had this run's events up to
// last: the journal's events after last, then the live ones. False when last
// is not an id of this run, or is older than the farewells kept.
func (r *treeRun) resume(st api.Stream, last int64) (api.Stream, bool) {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	if last < r.first-1 || last > r.lastID || last < r.goneFloor {
		return st, false
	}
	changed := r.journalAfter(last, st.Keeps, true)
	preface := make([]sse.Event, len(changed))
	for i, e := range changed {
		preface[i] = e.ev
	}
	return st.Resumed(preface, uint64(r.lastID)), true
}

// followDir follows the children of key's node ("": kv/ itself).
func (r *treeRun) followDir(key string) {
	dir := r.h.keyDir
	if key != "" {
		dir += "/" + key
	}
	f := r.h.dirs().Follow(dir)
	cancel := f.Subscribe(func(names []string) {
		r.mu.Lock()
		r.pending[key] = names
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	})
	r.dirs[key] = func() { cancel(); f.Close() }
}

// reaches tells whether keys under full (full/...) can start with the prefix.
func (r *treeRun) reaches(full string) bool {
	under := full + "/"
	return strings.Count(full, "/")+1 < kvstore.MaxSegments &&
		(strings.HasPrefix(under, r.prefix) || strings.HasPrefix(r.prefix, under))
}

// apply follows the keys and nodes that appeared and stops those that went.
func (r *treeRun) apply() {
	r.mu.Lock()
	pending := r.pending
	r.pending = map[string][]string{}
	r.mu.Unlock()
	for key, names := range pending {
		if r.dirs[key] == nil {
			continue // stopped meanwhile
		}
		present := make(map[string]bool, len(names))
		for _, c := range names {
			present[c] = true
			full := c
			if key != "" {
				full = key + "/" + c
			}
			if strings.HasPrefix(full, r.prefix) && r.keys[full] == nil {
				r.followKey(full)
			}
			if r.reaches(full) && r.dirs[full] == nil {
				r.followDir(full)
			}
		}
		for _, c := range r.kids[key] {
			if !present[c] {
				full := c
				if key != "" {
					full = key + "/" + c
				}
				r.drop(full)
			}
		}
		r.kids[key] = names
	}
}

// drop stops following full and everything under it, with a farewell for
// each key shown.
func (r *treeRun) drop(full string) {
	for k, m := range r.keys {
		if k == full || strings.HasPrefix(k, full+"/") {
			m.stop()
			delete(r.keys, k)
			if m.shown {
				r.farewell(k)
			}
		}
	}
	for d, stop := range r.dirs {
		if d == full || strings.HasPrefix(d, full+"/") {
			stop()
			delete(r.dirs, d)
			delete(r.kids, d)
		}
	}
}

// followKey follows one key under the prefix.
func (r *treeRun) followKey(key string) {
	f, err := r.h.keys.Follow(key)
	if err != nil {
		return // not a key (a name the sidecar would refuse)
	}
	m := &treeMember{}
	cancel := f.Subscribe(func(v *kvstore.Value) {
		switch {
		case v.Unknown:
		case !v.Exists:
			if m.shown {
				m.shown = false
				r.farewell(key)
			}
		default:
			m.shown = true
			r.publish(key, state(v))
		}
	})
	m.stop = func() { cancel(); f.Close() }
	r.keys[key] = m
}

// publish records key's state in the journal with the run's next id, and
// sends it to the streams.
func (r *treeRun) publish(key string, body oapi.KeyState) {
	data, err := sse.Data(body)
	if err != nil {
		return
	}
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.lastID++
	ev := sse.Event{ID: strconv.FormatInt(r.lastID, 10), Name: "kv", Data: data}
	r.states[key] = ev
	if r.active {
		r.h.s.PublishKeyed(r.topic, key, ev)
	}
}

// farewell tells the streams that key is gone.
func (r *treeRun) farewell(key string) {
	deleted := true
	data, err := sse.Data(oapi.KeyState{Key: key, Version: kvstore.Absent, Deleted: &deleted})
	if err != nil {
		return
	}
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.lastID++
	ev := sse.Event{ID: strconv.FormatInt(r.lastID, 10), Name: "kv", Data: data}
	delete(r.states, key)
	r.farewells = append(r.farewells, farewellEntry{r.lastID, key, ev})
	if n := len(r.farewells) - maxFarewells; n > 0 {
		r.goneFloor = r.farewells[n-1].id
		r.farewells = slices.Delete(r.farewells, 0, n)
	}
	if r.active {
		r.h.s.ForgetKeyed(r.topic, key, ev)
	}
}

// dirFollowers is the registry of the children followers of the key tree's
// nodes, shared by every prefix stream of the sidecar.
type dirFollowers struct {
	once sync.Once
	reg  *kit.Followers[[]string]
}
