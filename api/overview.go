package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
)

// The whole picture: the list endpoints, and GET /v1/events, which carries every
// entity's state in one stream (the status page's source) from the keyed topic
// "all", fed by followers of each kind while anyone follows it (picture.go); the
// session's events go there too.

const allTopic = "all"

// each lists the names of one kind and calls fn with the body of each one on
// the page, in name order, and answers the page's next when names remain. A
// name the request's token may not read is left out (the overview's own reads,
// made with no token, see everything), and so is one whose read answers
// picture.ErrSkip.
func each[T any](ctx context.Context, kind string, p Page, names func(context.Context) ([]string, error), read func(context.Context, string) (T, error), fn func(T)) (*string, error) {
	list, err := names(ctx)
	if err != nil {
		return nil, err
	}
	shown, last := 0, ""
	for _, n := range p.candidates(list) {
		if p.full(shown) {
			return &last, nil
		}
		if kind != "" && !mayRead(ctx, kind, n) {
			continue
		}
		b, err := read(ctx, n)
		if errors.Is(err, picture.ErrSkip) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fn(b)
		shown, last = shown+1, n
	}
	return nil, nil
}

// The reads of one name, shared by the lists and the whole picture (picture.go).

// ReadVia is a kind's read of one name: its recipe's Inspect, then the body
// the API shows.
func ReadVia[S, T any](inspect func(context.Context, string) (S, error), body func(S) T) func(context.Context, string) (T, error) {
	return func(ctx context.Context, n string) (T, error) {
		st, err := inspect(ctx, n)
		if err != nil {
			var zero T
			return zero, err
		}
		return body(st), nil
	}
}

// StreamEverything streams every entity's state and the session's, numbered
// by the stream itself (from the client's decimal Last-Event-ID on), so that
// its ids show nothing of what the token may not read.
func (s *Server) StreamEverything(ctx context.Context, req oapi.StreamEverythingRequestObject) (oapi.StreamEverythingResponseObject, error) {
	var last uint64
	if v := req.Params.LastEventID; v != nil {
		last, _ = strconv.ParseUint(*v, 10, 63) // not a decimal: from 1
	}
	return Stream{s: s, ctx: ctx, topics: []string{allTopic}, keep: s.overviewFilter(ctx), numberFrom: &last}, nil
}

// VisitStreamEverythingResponse serves GET /v1/events.
func (t Stream) VisitStreamEverythingResponse(w http.ResponseWriter) error { return t.Serve(w) }
