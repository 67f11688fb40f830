package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/recipes/barrier"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
)

// The whole picture: the list endpoints, and GET /v1/events, which carries every
// entity's state in one stream (the status page's source) from the keyed topic
// "all", fed by followers of each kind while anyone follows it (picture.go); the
// session's events go there too.

const allTopic = "all"

// ListLocks answers every lock with its holder and waiters.
func (s *Server) ListLocks(ctx context.Context, req ListLocksRequestObject) (ListLocksResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachLock)
	return ListLocks200JSONResponse{Locks: items, Next: next}, err
}

// ListElections answers every election with its leader and candidates.
func (s *Server) ListElections(ctx context.Context, req ListElectionsRequestObject) (ListElectionsResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachElection)
	return ListElections200JSONResponse{Elections: items, Next: next}, err
}

// ListBarriers answers every raised barrier.
func (s *Server) ListBarriers(ctx context.Context, req ListBarriersRequestObject) (ListBarriersResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachBarrier)
	return ListBarriers200JSONResponse{Barriers: items, Next: next}, err
}

// ListDoubleBarriers answers every double barrier.
func (s *Server) ListDoubleBarriers(ctx context.Context, req ListDoubleBarriersRequestObject) (ListDoubleBarriersResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachDoubleBarrier)
	return ListDoubleBarriers200JSONResponse{DoubleBarriers: items, Next: next}, err
}

// ListQueues answers every queue with its length and claimed count.
func (s *Server) ListQueues(ctx context.Context, req ListQueuesRequestObject) (ListQueuesResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachQueue)
	return ListQueues200JSONResponse{Queues: items, Next: next}, err
}

// ListThroughputGroups answers every throughput group with its allocation.
func (s *Server) ListThroughputGroups(ctx context.Context, req ListThroughputGroupsRequestObject) (ListThroughputGroupsResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachGroup)
	return ListThroughputGroups200JSONResponse{Groups: items, Next: next}, err
}

// each lists the names of one kind and calls fn with the body of each one on
// the page, in name order, and answers the page's next when names remain. A
// name the request's token may not read is left out (the overview's own reads,
// made with no token, see everything), and so is one whose read answers
// errSkip.
func each[T any](ctx context.Context, kind string, p page, names func(context.Context) ([]string, error), read func(context.Context, string) (T, error), fn func(T)) (*string, error) {
	list, err := names(ctx)
	if err != nil {
		return nil, err
	}
	shown, last := 0, ""
	for _, n := range p.candidates(list) {
		if p.full(shown) {
			return &last, nil
		}
		if !mayRead(ctx, kind, n) {
			continue
		}
		b, err := read(ctx, n)
		if errors.Is(err, errSkip) {
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

// errSkip is a read's answer for a name a list leaves out.
var errSkip = errors.New("not listed")

func (s *Server) eachLock(ctx context.Context, p page, fn func(LockState)) (*string, error) {
	return each(ctx, "locks", p, s.opt.Locks.List, readVia(s.opt.Locks.Inspect, lockBody), fn)
}

func (s *Server) eachElection(ctx context.Context, p page, fn func(Election)) (*string, error) {
	return each(ctx, "elections", p, s.opt.Elections.List, readVia(s.opt.Elections.Inspect, electionBody), fn)
}

// eachBarrier covers the raised barriers only.
func (s *Server) eachBarrier(ctx context.Context, p page, fn func(Barrier)) (*string, error) {
	return each(ctx, "barriers", p, s.opt.Barriers.List, s.readBarrier, fn)
}

func (s *Server) eachDoubleBarrier(ctx context.Context, p page, fn func(DoubleBarrier)) (*string, error) {
	return each(ctx, "double-barriers", p, s.opt.Barriers.ListDouble, s.readDoubleBarrier, fn)
}

func (s *Server) eachQueue(ctx context.Context, p page, fn func(Queue)) (*string, error) {
	return each(ctx, "queues", p, s.opt.Queues.List, s.readQueue, fn)
}

func (s *Server) eachGroup(ctx context.Context, p page, fn func(ThroughputGroup)) (*string, error) {
	return each(ctx, "throughput", p, s.opt.Throughput.List, readVia(s.opt.Throughput.Inspect, throughputBody), fn)
}

// The reads of one name, shared by the lists and the whole picture (picture.go).

// readVia is a kind's read of one name: its recipe's Inspect, then the body
// the API shows.
func readVia[S, T any](inspect func(context.Context, string) (S, error), body func(S) T) func(context.Context, string) (T, error) {
	return func(ctx context.Context, n string) (T, error) {
		st, err := inspect(ctx, n)
		if err != nil {
			var zero T
			return zero, err
		}
		return body(st), nil
	}
}

func lockBody(st *recipes.LockState) LockState {
	return LockState{Name: st.Name, Holder: lockHolder(st.Holder), Waiters: st.Waiters}
}

// readBarrier answers errSkip for a barrier that is not raised.
func (s *Server) readBarrier(ctx context.Context, n string) (Barrier, error) {
	up, err := s.opt.Barriers.Raised(ctx, n)
	if err == nil && !up {
		err = errSkip
	}
	return Barrier{Name: n, Raised: up}, err
}

func (s *Server) readDoubleBarrier(ctx context.Context, n string) (DoubleBarrier, error) {
	return readVia(s.opt.Barriers.InspectDouble, func(st *barrier.DoubleBarrierState) DoubleBarrier {
		return DoubleBarrier{Name: st.Name, Count: st.Count, Ready: st.Ready, Participants: st.Participants}
	})(ctx, n)
}

func (s *Server) readQueue(ctx context.Context, n string) (Queue, error) {
	return readVia(s.opt.Queues.Inspect, func(st *queue.QueueState) Queue {
		return Queue{Name: st.Name, Length: st.Length, Claimed: st.Claimed}
	})(ctx, n)
}

// StreamEverything streams every entity's state and the session's, numbered
// by the stream itself (from the client's decimal Last-Event-ID on), so that
// its ids show nothing of what the token may not read.
func (s *Server) StreamEverything(ctx context.Context, req StreamEverythingRequestObject) (StreamEverythingResponseObject, error) {
	var last uint64
	if v := req.Params.LastEventID; v != nil {
		last, _ = strconv.ParseUint(*v, 10, 63) // not a decimal: from 1
	}
	return topicStream{s: s, ctx: ctx, topics: []string{allTopic}, keep: overviewFilter(ctx), numberFrom: &last}, nil
}

// VisitStreamEverythingResponse serves GET /v1/events.
func (t topicStream) VisitStreamEverythingResponse(w http.ResponseWriter) error { return t.serve(w) }
