package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kv"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Keys: shared configuration (recipes/kv). A key's long-polls and its event
// stream follow it through one kit.Follower per sidecar: one ZooKeeper watch
// however many clients wait.

func kvTopic(key string) string { return "kv/" + key }

// PutKey writes the raw body as the key's value, with its Content-Type.
func (s *Server) PutKey(ctx context.Context, req oapi.PutKeyRequestObject) (oapi.PutKeyResponseObject, error) {
	if err := name("key", req.Key); err != nil {
		return nil, err
	}
	if v := req.Params.Version; v != nil && *v < kv.Absent {
		return nil, InvalidParameter("version=%d: a version is 0 or more, or -1 for an absent key", *v)
	}
	if len(req.ContentType) > 255 {
		return nil, InvalidParameter("the Content-Type is %d bytes, above the maximum of 255", len(req.ContentType))
	}
	var lease *kit.Lease
	if p := req.Params.Lease; p != nil {
		l, err := s.OwnLease(ctx, *p)
		if err != nil {
			return nil, err
		}
		lease = l
	}
	data, err := s.ReadItem(req.Body, "value")
	if err != nil {
		return nil, err
	}
	v, err := s.opt.KV.Put(ctx, req.Key, data, req.ContentType, req.Params.Version, lease)
	if err != nil {
		return nil, err
	}
	return oapi.PutKey200JSONResponse{Key: req.Key, Version: v}, nil
}

// GetKey answers the key's value; with version= it long-polls until the
// version differs (or wait= ends).
func (s *Server) GetKey(ctx context.Context, req oapi.GetKeyRequestObject) (oapi.GetKeyResponseObject, error) {
	if err := name("key", req.Key); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	if v := req.Params.Version; v != nil && *v < kv.Absent {
		return nil, InvalidParameter("version=%d: a version is 0 or more, or -1 for an absent key", *v)
	}
	if req.Params.Version != nil && wait > 0 {
		f, err := s.opt.KV.Follow(req.Key)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		known := *req.Params.Version
		st, ok := f.Await(ctx, wait, func(v *kv.Value) bool { return !v.Unknown && v.Version != known })
		if ok {
			return keyAnswer(st)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		// Unchanged within wait: answer the key as ZooKeeper has it now.
	}
	v, err := s.opt.KV.Get(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	return keyAnswer(v)
}

func keyAnswer(v *kv.Value) (oapi.GetKeyResponseObject, error) {
	if !v.Exists {
		return nil, fmt.Errorf("key %q: %w", v.Key, kv.ErrKeyNotFound)
	}
	version := v.Version
	return oapi.GetKey200AsteriskResponse{Body: bytes.NewReader(v.Data), Headers: oapi.GetKey200ResponseHeaders{Version: &version},
		ContentType: v.ContentType, ContentLength: int64(len(v.Data))}, nil
}

// DeleteKey deletes the key, if its version is version=.
func (s *Server) DeleteKey(ctx context.Context, req oapi.DeleteKeyRequestObject) (oapi.DeleteKeyResponseObject, error) {
	if err := name("key", req.Key); err != nil {
		return nil, err
	}
	if v := req.Params.Version; v != nil && *v < 0 {
		return nil, InvalidParameter("version=%d: a delete names a version of 0 or more", *v)
	}
	if err := s.opt.KV.Delete(ctx, req.Key, req.Params.Version); err != nil {
		return nil, err
	}
	return oapi.DeleteKey204Response{}, nil
}

// StreamKey streams the key's value, then every change.
func (s *Server) StreamKey(ctx context.Context, req oapi.StreamKeyRequestObject) (oapi.StreamKeyResponseObject, error) {
	if err := name("key", req.Key); err != nil {
		return nil, err
	}
	return s.NewStream(ctx, kvTopic(req.Key)), nil
}

// VisitStreamKeyResponse serves GET /v1/kv/{key}/events.
func (t Stream) VisitStreamKeyResponse(w http.ResponseWriter) error { return t.Serve(w) }

// followKey publishes every state of a key to its topic, straight from the
// key's follower; the returned stop ends that. Event ids: the zxid of the write
// a state shows, raised to the previous id + 1 when not newer (a deletion).
func (s *Server) followKey(topic, key string) (stop func()) {
	f, err := s.opt.KV.Follow(key)
	if err != nil {
		return nil
	}
	var lastID int64 // the follower calls publish one state at a time
	cancel := f.Subscribe(func(v *kv.Value) {
		if v.Unknown {
			return
		}
		if data, err := sse.Data(keyState(v)); err == nil {
			lastID = max(v.Mzxid, lastID+1)
			s.broker.Publish(topic, sse.Event{ID: strconv.FormatInt(lastID, 10), Name: "kv", Data: data})
		}
	})
	return func() { cancel(); f.Close() }
}

// keyState is a key's event data: the value as text when it is UTF-8, else in
// base64; deleted when absent.
func keyState(v *kv.Value) oapi.KeyState {
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

// ListKeys answers every key with its version and size.
func (s *Server) ListKeys(ctx context.Context, req oapi.ListKeysRequestObject) (oapi.ListKeysResponseObject, error) {
	items, next, err := ListPage(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachKey)
	return oapi.ListKeys200JSONResponse{Keys: items, Next: next}, err
}

// eachKey covers the keys that have a value (one deleted meanwhile is left out).
func (s *Server) eachKey(ctx context.Context, p Page, fn func(oapi.KeyInfo)) (*string, error) {
	return Each(ctx, "kv", p, s.opt.KV.List, func(ctx context.Context, n string) (oapi.KeyInfo, error) {
		st, err := s.opt.KV.Stat(ctx, n)
		if errors.Is(err, kv.ErrKeyNotFound) {
			err = ErrSkip
		}
		if err != nil {
			return oapi.KeyInfo{}, err
		}
		return oapi.KeyInfo{Key: st.Key, Version: st.Version, Size: int(st.Size)}, nil
	}, fn)
}
