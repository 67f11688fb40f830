package kv

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

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

// treeTopicKind is the topic kind of the prefix streams.
const treeTopicKind = "kvtree"

// StreamKeys streams every key under the prefix, then every change.
func (h *KV) StreamKeys(ctx context.Context, req oapi.StreamKeysRequestObject) (oapi.StreamKeysResponseObject, error) {
	prefix := ""
	if req.Params.Prefix != nil {
		prefix = *req.Params.Prefix
	}
	return treeStream{h.s.NewKeyedStream(ctx, treeTopicKind+"/"+prefix, "kv")}, nil
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

	pubMu  sync.Mutex // one publish at a time, so that ids increase in publish order
	lastID int64

	// The loop's own.
	dirs map[string]func()      // followed nodes: how to stop following their children
	kids map[string][]string    // their children as last applied
	keys map[string]*treeMember // followed keys
}

// treeMember is one followed key; shown is written by its follower's
// callback, read by the loop only after stop.
type treeMember struct {
	stop  func()
	shown bool
}

// followTree is the topic kind's follow: it starts the tree run of prefix.
func (h *KV) followTree(topic, prefix string) (stop func()) {
	r := &treeRun{h: h, topic: topic, prefix: prefix, pending: map[string][]string{}, wake: make(chan struct{}, 1),
		dirs: map[string]func(){}, kids: map[string][]string{}, keys: map[string]*treeMember{}}
	r.followDir("")
	stopLoop := kit.OnWake(context.Background(), r.wake, r.apply)
	return func() {
		stopLoop()
		for d, stop := range r.dirs {
			stop()
			delete(r.dirs, d)
		}
		for k, m := range r.keys {
			m.stop()
			delete(r.keys, k)
		}
	}
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
			r.publish(key, v.Mzxid, state(v))
		}
	})
	m.stop = func() { cancel(); f.Close() }
	r.keys[key] = m
}

func (r *treeRun) publish(key string, zxid int64, body oapi.KeyState) {
	data, err := sse.Data(body)
	if err != nil {
		return
	}
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.lastID = max(zxid, r.lastID+1)
	r.h.s.PublishKeyed(r.topic, key, sse.Event{ID: strconv.FormatInt(r.lastID, 10), Name: "kv", Data: data})
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
	r.h.s.ForgetKeyed(r.topic, key, sse.Event{ID: strconv.FormatInt(r.lastID, 10), Name: "kv", Data: data})
}

// dirFollowers is the registry of the children followers of the key tree's
// nodes, shared by every prefix stream of the sidecar.
type dirFollowers struct {
	once sync.Once
	reg  *kit.Followers[[]string]
}
