// Package counters is the HTTP side of the counters (recipes/counter): add,
// get, set (a compare-and-set with expect=), delete, the list and the
// counter's place in the picture. Adds to one counter on this sidecar are
// combined into one compare-and-set.
package counters

import (
	"context"
	"errors"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/counter"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Counters serves the counter operations of openapi.yaml.
type Counters struct {
	s        *api.Server
	counters *counter.Counters
}

// Tokens are the counter's token kind.
func (*Counters) Tokens() []string { return []string{"counters"} }

// Setup makes the counters on env's session and describes them: their
// section "counter" and their problems.
func (h *Counters) Setup(env api.Env) api.Descriptor {
	h.s, h.counters = env.Server, counter.New(env.Session, env.Registerer)
	return api.Descriptor{
		Sections: []picture.Section{{Name: "counter", Token: "counters", Event: "counter", Dir: "counters", Field: "name",
			Follow: picture.Followed(h.counters.Follow, func(st *counter.State) any {
				if st.Unknown || !st.Exists || st.Corrupt {
					return nil
				}
				return oapi.Counter{Name: st.Name, Value: st.Value}
			})}},
		Problems: []api.ProblemRule{
			api.ProblemWith(http.StatusConflict, "value-mismatch", "",
				func(mismatch *counter.MismatchError) map[string]any { return map[string]any{"value": mismatch.Value} }),
			api.ProblemWith(http.StatusConflict, "counter-overflow", "nothing was added",
				func(overflow *counter.OverflowError) map[string]any { return map[string]any{"value": overflow.Value} }),
			api.ProblemIs(counter.ErrCorrupt, http.StatusConflict, "counter-corrupt"),
			api.ProblemIs(counter.ErrNotFound, http.StatusNotFound, "counter-not-found"),
		},
	}
}

// AddCounter adds add= (default 1) and answers the value right after this add.
func (h *Counters) AddCounter(ctx context.Context, req oapi.AddCounterRequestObject) (oapi.AddCounterResponseObject, error) {
	if err := kit.CheckName("counter", req.Name); err != nil {
		return nil, err
	}
	delta := int64(1)
	if a := req.Params.Add; a != nil {
		delta = *a
	}
	v, err := h.counters.Add(ctx, req.Name, delta)
	if err != nil {
		return nil, err
	}
	return oapi.AddCounter200JSONResponse{Name: req.Name, Value: v}, nil
}

// GetCounter answers the counter's value (0 when never set).
func (h *Counters) GetCounter(ctx context.Context, req oapi.GetCounterRequestObject) (oapi.GetCounterResponseObject, error) {
	st, err := h.counters.Get(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetCounter200JSONResponse{Name: req.Name, Value: st.Value}, nil
}

// SetCounter sets the value, if the current one is expect= (when given).
func (h *Counters) SetCounter(ctx context.Context, req oapi.SetCounterRequestObject) (oapi.SetCounterResponseObject, error) {
	if err := kit.CheckName("counter", req.Name); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, api.InvalidBody("the request needs a JSON body (CounterValue)")
	}
	v, err := h.counters.Set(ctx, req.Name, req.Body.Value, req.Params.Expect)
	if err != nil {
		return nil, err
	}
	return oapi.SetCounter200JSONResponse{Name: req.Name, Value: v}, nil
}

// DeleteCounter removes the counter's node (404 counter-not-found without one).
func (h *Counters) DeleteCounter(ctx context.Context, req oapi.DeleteCounterRequestObject) (oapi.DeleteCounterResponseObject, error) {
	if err := h.counters.Delete(ctx, req.Name); err != nil {
		return nil, err
	}
	return oapi.DeleteCounter204Response{}, nil
}

// ListCounters answers every counter with its value.
func (h *Counters) ListCounters(ctx context.Context, req oapi.ListCountersRequestObject) (oapi.ListCountersResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "counters", h.counters.List, h.read)
	return oapi.ListCounters200JSONResponse{Counters: items, Next: next}, err
}

// read is one counter's read for the list: one that has a node and holds a
// counter, else left out (picture.ErrSkip).
func (h *Counters) read(ctx context.Context, n string) (oapi.Counter, error) {
	st, err := h.counters.Get(ctx, n)
	if errors.Is(err, counter.ErrCorrupt) || (err == nil && !st.Exists) {
		err = picture.ErrSkip
	}
	if err != nil {
		return oapi.Counter{}, err
	}
	return oapi.Counter{Name: n, Value: st.Value}, nil
}
