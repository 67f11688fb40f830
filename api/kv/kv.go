// Package kv is the HTTP side of the keys, shared configuration (recipes/kv):
// put, get (a long-poll with version=), delete, the list, a key's event
// stream and its place in the picture. A key's long-polls and its event
// stream follow it through one kit.Follower per sidecar: one ZooKeeper watch
// however many clients wait.
package kv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	kvstore "github.com/coord-sidecar/coord-sidecar/recipes/kv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// KV serves the key operations of openapi.yaml.
type KV struct {
	s    *api.Server
	keys *kvstore.Store
	// keyDir is kv/ under the root; tree is the prefix streams' registry of
	// the nodes' children followers, made at first use.
	keyDir string
	tree   dirFollowers
	sess   *zookeeper.Session
	// runs are the prefix streams' runs; resumes and fullRestarts count the
	// reconnects (with Last-Event-ID) served only what changed, or the full
	// state.
	runs                  treeRuns
	resumes, fullRestarts prometheus.Counter
}

// dirs is the registry of the children followers of the key tree's nodes.
func (h *KV) dirs() *kit.Followers[[]string] {
	h.tree.once.Do(func() {
		h.tree.reg = kit.NewFollowers(h.sess, nil, func(p string) kit.Source[[]string] { return &kit.DirSource{Dir: p} })
	})
	return h.tree.reg
}

// Tokens are the key-value store's token kind.
func (*KV) Tokens() []string { return []string{"kv"} }

// Setup makes the key-value store on env's session and describes it: its
// topic and section "kv", its problems, and how a successor adopts a key
// bound to a lease.
func (h *KV) Setup(env api.Env) api.Descriptor {
	h.s, h.keys = env.Server, kvstore.New(env.Session, env.Registerer)
	h.sess, h.keyDir = env.Session, env.Session.Dir("kv")
	reconnects := promauto.With(env.Registerer).NewCounterVec(prometheus.CounterOpts{
		Name: "coord_kv_prefix_reconnects_total",
		Help: "Prefix streams opened with a Last-Event-ID, by whether they resumed (only what changed since) or started with the full state.",
	}, []string{"resumed"})
	h.resumes, h.fullRestarts = reconnects.WithLabelValues("true"), reconnects.WithLabelValues("false")
	context.AfterFunc(h.s.Closing(), h.endLingering)
	return api.Descriptor{
		Topics: map[string]func(topic, name string) func(){"kv": h.follow, treeTopicKind: h.followTree},
		Sections: []picture.Section{{Name: "kv", Token: "kv", Event: "kv", Dir: "kv", Field: "key",
			Follow: picture.Followed(h.keys.Follow, func(v *kvstore.Value) any {
				if v.Unknown || !v.Exists {
					return nil // its directory's watch says when it is gone
				}
				return oapi.KeyInfo{Key: v.Key, Version: v.Version, Size: len(v.Data)}
			})}},
		Problems: []api.ProblemRule{
			api.ProblemWith(http.StatusConflict, "version-mismatch", "",
				func(mismatch *kvstore.VersionMismatchError) map[string]any {
					return map[string]any{"version": mismatch.Version}
				}),
			api.ProblemIs(kvstore.ErrKeyNotFound, http.StatusNotFound, "key-not-found"),
			api.ProblemIs(kvstore.ErrHasChildren, http.StatusConflict, "key-has-children"),
			api.ProblemIs(kvstore.ErrLeasedParent, http.StatusConflict, "key-leased-parent"),
		},
		Adoptions:   map[string]kit.Adoption{kvstore.Kind: {Adopt: h.keys.Adopt}},
		NestedNames: map[string]func(string, []string) int{"kv": keySegments},
	}
}

// keySegments is how many of the path segments after /v1/kv/ form the key:
// for a PUT or a DELETE all of them; for any other method (a GET: the one
// method of the streams) a last segment "events" is the key's event stream,
// and /v1/kv/events alone the prefix stream (no key).
func keySegments(method string, segs []string) int {
	if method == http.MethodPut || method == http.MethodDelete || segs[len(segs)-1] != "events" {
		return len(segs)
	}
	return len(segs) - 1
}

func topic(key string) string { return "kv/" + key }

// PutKey writes the raw body as the key's value, with its Content-Type.
func (h *KV) PutKey(ctx context.Context, req oapi.PutKeyRequestObject) (oapi.PutKeyResponseObject, error) {
	if err := kvstore.CheckKey(req.Key); err != nil {
		return nil, err
	}
	if v := req.Params.Version; v != nil && *v < kvstore.Absent {
		return nil, api.InvalidParameter("version=%d: a version is 0 or more, or -1 for an absent key", *v)
	}
	if len(req.ContentType) > 255 {
		return nil, api.InvalidParameter("the Content-Type is %d bytes, above the maximum of 255", len(req.ContentType))
	}
	var lease *kit.Lease
	if p := req.Params.Lease; p != nil {
		l, err := h.s.OwnLease(ctx, *p)
		if err != nil {
			return nil, err
		}
		lease = l
	}
	data, err := h.s.ReadItem(req.Body, "value")
	if err != nil {
		return nil, err
	}
	v, err := h.keys.Put(ctx, req.Key, data, req.ContentType, req.Params.Version, lease)
	if err != nil {
		return nil, err
	}
	return oapi.PutKey200JSONResponse{Key: req.Key, Version: v}, nil
}

// GetKey answers the key's value; with version= it long-polls until the
// version differs (or wait= ends).
func (h *KV) GetKey(ctx context.Context, req oapi.GetKeyRequestObject) (oapi.GetKeyResponseObject, error) {
	if err := kvstore.CheckKey(req.Key); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	if v := req.Params.Version; v != nil && *v < kvstore.Absent {
		return nil, api.InvalidParameter("version=%d: a version is 0 or more, or -1 for an absent key", *v)
	}
	if req.Params.Version != nil && wait > 0 {
		f, err := h.keys.Follow(req.Key)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		known := *req.Params.Version
		st, ok := f.Await(ctx, wait, func(v *kvstore.Value) bool { return !v.Unknown && v.Version != known })
		if ok {
			return answer(st)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		// Unchanged within wait: answer the key as ZooKeeper has it now.
	}
	v, err := h.keys.Get(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	return answer(v)
}

func answer(v *kvstore.Value) (oapi.GetKeyResponseObject, error) {
	if !v.Exists {
		return nil, fmt.Errorf("key %q: %w", v.Key, kvstore.ErrKeyNotFound)
	}
	version := v.Version
	return oapi.GetKey200AsteriskResponse{Body: bytes.NewReader(v.Data), Headers: oapi.GetKey200ResponseHeaders{Version: &version},
		ContentType: v.ContentType, ContentLength: int64(len(v.Data))}, nil
}

// DeleteKey deletes the key, if its version is version=.
func (h *KV) DeleteKey(ctx context.Context, req oapi.DeleteKeyRequestObject) (oapi.DeleteKeyResponseObject, error) {
	if err := kvstore.CheckKey(req.Key); err != nil {
		return nil, err
	}
	if v := req.Params.Version; v != nil && *v < 0 {
		return nil, api.InvalidParameter("version=%d: a delete names a version of 0 or more", *v)
	}
	if r := req.Params.Recursive; r != nil && *r {
		if req.Params.Version != nil {
			return nil, api.InvalidParameter("version= and recursive=true do not go together: a recursive delete deletes whatever the versions")
		}
		if _, err := h.keys.DeleteTree(ctx, req.Key); err != nil {
			return nil, err
		}
		return oapi.DeleteKey204Response{}, nil
	}
	if err := h.keys.Delete(ctx, req.Key, req.Params.Version); err != nil {
		return nil, err
	}
	return oapi.DeleteKey204Response{}, nil
}

// StreamKey streams the key's value, then every change.
func (h *KV) StreamKey(ctx context.Context, req oapi.StreamKeyRequestObject) (oapi.StreamKeyResponseObject, error) {
	if err := kvstore.CheckKey(req.Key); err != nil {
		return nil, err
	}
	return stream{h.s.NewStream(ctx, topic(req.Key))}, nil
}

type stream struct{ api.Stream }

// VisitStreamKeyResponse serves GET /v1/kv/{key}/events.
func (t stream) VisitStreamKeyResponse(w http.ResponseWriter) error { return t.Serve(w) }

// follow publishes every state of a key to its topic, straight from the
// key's follower; the returned stop ends that. Event ids: the zxid of the write
// a state shows, raised to the previous id + 1 when not newer (a deletion).
func (h *KV) follow(topic, key string) (stop func()) {
	return api.FollowStates(h.s, topic, "kv", h.keys.Follow, key,
		func(v *kvstore.Value) int64 { return v.Mzxid },
		func(v *kvstore.Value) any {
			if v.Unknown {
				return nil
			}
			return state(v)
		})
}

// state is a key's event data: the value as text when it is UTF-8, else in
// base64; deleted when absent.
func state(v *kvstore.Value) oapi.KeyState {
	out := oapi.KeyState{Key: v.Key, Version: v.Version}
	if !v.Exists {
		t := true
		out.Deleted = &t
		return out
	}
	ct := v.ContentType
	out.ContentType = &ct
	if utf8.Valid(v.Data) {
		text := string(v.Data)
		out.Value = &text
	} else {
		b := v.Data
		out.ValueBase64 = &b
	}
	return out
}

// ListKeys answers the keys under the prefix (one level, or with recursive
// the whole tree), each with its version and size, and with values its value.
// The keys are read ahead a batch at a time, pipelined (prefetch).
func (h *KV) ListKeys(ctx context.Context, req oapi.ListKeysRequestObject) (oapi.ListKeysResponseObject, error) {
	prefix := ""
	if req.Params.Prefix != nil {
		prefix = *req.Params.Prefix
	}
	recursive := req.Params.Recursive != nil && *req.Params.Recursive
	pf := &prefetch{keys: h.keys, values: req.Params.Values != nil && *req.Params.Values, batch: listBatch(req.Params.Limit)}
	names := func(ctx context.Context) ([]string, error) {
		names, err := h.keys.Names(ctx, prefix, recursive)
		pf.names = names
		return names, err
	}
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "kv", names, pf.read)
	return oapi.ListKeys200JSONResponse{Kv: items, Next: next}, err
}

// listBatch is how many keys a list reads ahead at once: its page, at most 1000.
func listBatch(limit *int) int {
	if limit != nil && *limit > 0 && *limit < 1000 {
		return *limit + 1
	}
	return 1000
}

// prefetch reads a list's keys a batch at a time, pipelined, starting at
// the first key the list asks for that it has not read (the list asks in
// name order, skipping those the token may not read).
type prefetch struct {
	keys   *kvstore.Store
	values bool
	batch  int
	names  []string
	cache  map[string]*kvstore.Entry // the batch read last
}

func (p *prefetch) read(ctx context.Context, n string) (oapi.KeyInfo, error) {
	v, ok := p.cache[n]
	if !ok {
		i, _ := slices.BinarySearch(p.names, n)
		batch := p.names[i:min(len(p.names), i+p.batch)]
		if len(batch) == 0 || batch[0] != n {
			batch = []string{n}
		}
		got, err := p.keys.ReadEach(ctx, batch, p.values)
		if err != nil {
			return oapi.KeyInfo{}, err
		}
		p.cache = make(map[string]*kvstore.Entry, len(batch))
		for j, key := range batch {
			p.cache[key] = got[j]
		}
		v = got[0]
	}
	if v == nil {
		return oapi.KeyInfo{}, picture.ErrSkip // gone meanwhile
	}
	info := oapi.KeyInfo{Key: v.Key, Version: v.Version, Size: int(v.Size)}
	if p.values {
		if utf8.Valid(v.Value) {
			text := string(v.Value)
			info.Value = &text
		} else {
			b := v.Value
			info.ValueBase64 = &b
		}
	}
	return info, nil
}
