package api

import (
	"context"
	"errors"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/counter"
)

// Counters (recipes/counter): adds to one counter on this sidecar are combined
// into one compare-and-set.

// AddCounter adds add= (default 1) and answers the value right after this add.
func (s *Server) AddCounter(ctx context.Context, req oapi.AddCounterRequestObject) (oapi.AddCounterResponseObject, error) {
	if err := name("counter", req.Name); err != nil {
		return nil, err
	}
	delta := int64(1)
	if a := req.Params.Add; a != nil {
		delta = *a
	}
	v, err := s.opt.Counters.Add(ctx, req.Name, delta)
	if err != nil {
		return nil, err
	}
	return oapi.AddCounter200JSONResponse{Name: req.Name, Value: v}, nil
}

// GetCounter answers the counter's value (0 when never set).
func (s *Server) GetCounter(ctx context.Context, req oapi.GetCounterRequestObject) (oapi.GetCounterResponseObject, error) {
	st, err := s.opt.Counters.Get(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetCounter200JSONResponse{Name: req.Name, Value: st.Value}, nil
}

// SetCounter sets the value, if the current one is expect= (when given).
func (s *Server) SetCounter(ctx context.Context, req oapi.SetCounterRequestObject) (oapi.SetCounterResponseObject, error) {
	if err := name("counter", req.Name); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, InvalidBody("the request needs a JSON body (CounterValue)")
	}
	v, err := s.opt.Counters.Set(ctx, req.Name, req.Body.Value, req.Params.Expect)
	if err != nil {
		return nil, err
	}
	return oapi.SetCounter200JSONResponse{Name: req.Name, Value: v}, nil
}

// DeleteCounter removes the counter's node (404 counter-not-found without one).
func (s *Server) DeleteCounter(ctx context.Context, req oapi.DeleteCounterRequestObject) (oapi.DeleteCounterResponseObject, error) {
	if err := name("counter", req.Name); err != nil {
		return nil, err
	}
	if err := s.opt.Counters.Delete(ctx, req.Name); err != nil {
		return nil, err
	}
	return oapi.DeleteCounter204Response{}, nil
}

// ListCounters answers every counter with its value.
func (s *Server) ListCounters(ctx context.Context, req oapi.ListCountersRequestObject) (oapi.ListCountersResponseObject, error) {
	items, next, err := ListPage(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachCounter)
	return oapi.ListCounters200JSONResponse{Counters: items, Next: next}, err
}

// eachCounter covers the counters that have a node and hold a counter.
func (s *Server) eachCounter(ctx context.Context, p Page, fn func(oapi.Counter)) (*string, error) {
	return Each(ctx, "counters", p, s.opt.Counters.List, func(ctx context.Context, n string) (oapi.Counter, error) {
		st, err := s.opt.Counters.Get(ctx, n)
		if errors.Is(err, counter.ErrCorrupt) || (err == nil && !st.Exists) {
			err = ErrSkip
		}
		if err != nil {
			return oapi.Counter{}, err
		}
		return oapi.Counter{Name: n, Value: st.Value}, nil
	}, fn)
}
