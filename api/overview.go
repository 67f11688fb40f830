package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// The whole picture: the list endpoints and GET /v1/events, which carries every
// entity's state in one stream (the status page's source). While anyone follows
// the stream, an overview follower reads the whole tree every OverviewInterval
// and publishes what changed to the keyed topic "all"; the session's events go
// there too.

const allTopic = "all"

// entity is one thing the overview shows: its key ("lock/db"), event name and body.
type entity struct {
	key, event string
	body       any
}

// ListLocks answers every lock with its holder and waiters.
func (s *Server) ListLocks(ctx context.Context, req ListLocksRequestObject) (ListLocksResponseObject, error) {
	p, err := pageOf(req.Params.Prefix, req.Params.Limit, req.Params.After)
	if err != nil {
		return nil, err
	}
	out := ListLocks200JSONResponse{Locks: []LockState{}}
	out.Next, err = s.eachLock(ctx, p, func(b LockState) { out.Locks = append(out.Locks, b) })
	return out, err
}

// ListElections answers every election with its leader and candidates.
func (s *Server) ListElections(ctx context.Context, req ListElectionsRequestObject) (ListElectionsResponseObject, error) {
	p, err := pageOf(req.Params.Prefix, req.Params.Limit, req.Params.After)
	if err != nil {
		return nil, err
	}
	out := ListElections200JSONResponse{Elections: []Election{}}
	out.Next, err = s.eachElection(ctx, p, func(b Election) { out.Elections = append(out.Elections, b) })
	return out, err
}

// ListBarriers answers every raised barrier.
func (s *Server) ListBarriers(ctx context.Context, req ListBarriersRequestObject) (ListBarriersResponseObject, error) {
	p, err := pageOf(req.Params.Prefix, req.Params.Limit, req.Params.After)
	if err != nil {
		return nil, err
	}
	out := ListBarriers200JSONResponse{Barriers: []Barrier{}}
	out.Next, err = s.eachBarrier(ctx, p, func(b Barrier) { out.Barriers = append(out.Barriers, b) })
	return out, err
}

// ListDoubleBarriers answers every double barrier.
func (s *Server) ListDoubleBarriers(ctx context.Context, req ListDoubleBarriersRequestObject) (ListDoubleBarriersResponseObject, error) {
	p, err := pageOf(req.Params.Prefix, req.Params.Limit, req.Params.After)
	if err != nil {
		return nil, err
	}
	out := ListDoubleBarriers200JSONResponse{DoubleBarriers: []DoubleBarrier{}}
	out.Next, err = s.eachDoubleBarrier(ctx, p, func(b DoubleBarrier) { out.DoubleBarriers = append(out.DoubleBarriers, b) })
	return out, err
}

// ListQueues answers every queue with its length and claimed count.
func (s *Server) ListQueues(ctx context.Context, req ListQueuesRequestObject) (ListQueuesResponseObject, error) {
	p, err := pageOf(req.Params.Prefix, req.Params.Limit, req.Params.After)
	if err != nil {
		return nil, err
	}
	out := ListQueues200JSONResponse{Queues: []Queue{}}
	out.Next, err = s.eachQueue(ctx, p, func(b Queue) { out.Queues = append(out.Queues, b) })
	return out, err
}

// ListThroughputGroups answers every throughput group with its allocation.
func (s *Server) ListThroughputGroups(ctx context.Context, req ListThroughputGroupsRequestObject) (ListThroughputGroupsResponseObject, error) {
	p, err := pageOf(req.Params.Prefix, req.Params.Limit, req.Params.After)
	if err != nil {
		return nil, err
	}
	out := ListThroughputGroups200JSONResponse{Groups: []ThroughputGroup{}}
	out.Next, err = s.eachGroup(ctx, p, func(b ThroughputGroup) { out.Groups = append(out.Groups, b) })
	return out, err
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
	return each(ctx, "locks", p, s.opt.Locks.List, func(ctx context.Context, n string) (LockState, error) {
		st, err := s.opt.Locks.Inspect(ctx, n)
		if err != nil {
			return LockState{}, err
		}
		return LockState{Name: st.Name, Holder: lockHolder(st.Holder), Waiters: st.Waiters}, nil
	}, fn)
}

func (s *Server) eachElection(ctx context.Context, p page, fn func(Election)) (*string, error) {
	return each(ctx, "elections", p, s.opt.Elections.List, func(ctx context.Context, n string) (Election, error) {
		st, err := s.opt.Elections.Inspect(ctx, n)
		if err != nil {
			return Election{}, err
		}
		return electionBody(st), nil
	}, fn)
}

// eachBarrier covers the raised barriers only.
func (s *Server) eachBarrier(ctx context.Context, p page, fn func(Barrier)) (*string, error) {
	return each(ctx, "barriers", p, s.opt.Barriers.List, func(ctx context.Context, n string) (Barrier, error) {
		up, err := s.opt.Barriers.Raised(ctx, n)
		if err == nil && !up {
			err = errSkip
		}
		return Barrier{Name: n, Raised: up}, err
	}, fn)
}

func (s *Server) eachDoubleBarrier(ctx context.Context, p page, fn func(DoubleBarrier)) (*string, error) {
	return each(ctx, "double-barriers", p, s.opt.Barriers.ListDouble, func(ctx context.Context, n string) (DoubleBarrier, error) {
		st, err := s.opt.Barriers.InspectDouble(ctx, n)
		if err != nil {
			return DoubleBarrier{}, err
		}
		return DoubleBarrier{Name: st.Name, Count: st.Count, Ready: st.Ready, Participants: st.Participants}, nil
	}, fn)
}

func (s *Server) eachQueue(ctx context.Context, p page, fn func(Queue)) (*string, error) {
	return each(ctx, "queues", p, s.opt.Queues.List, func(ctx context.Context, n string) (Queue, error) {
		st, err := s.opt.Queues.Inspect(ctx, n)
		if err != nil {
			return Queue{}, err
		}
		return Queue{Name: st.Name, Length: st.Length, Claimed: st.Claimed}, nil
	}, fn)
}

func (s *Server) eachGroup(ctx context.Context, p page, fn func(ThroughputGroup)) (*string, error) {
	return each(ctx, "throughput", p, s.opt.Throughput.List, func(ctx context.Context, n string) (ThroughputGroup, error) {
		g, err := s.opt.Throughput.Inspect(ctx, n)
		if err != nil {
			return ThroughputGroup{}, err
		}
		return throughputBody(g), nil
	}, fn)
}

// snapshot reads every entity of the tree.
func (s *Server) snapshot(ctx context.Context) ([]entity, error) {
	var out []entity
	add := func(kind, event, name string, body any) {
		out = append(out, entity{key: kind + "/" + name, event: event, body: body})
	}
	var all page
	steps := []func() (*string, error){
		func() (*string, error) {
			return s.eachLock(ctx, all, func(b LockState) { add("lock", "lock", b.Name, b) })
		},
		func() (*string, error) {
			return s.eachElection(ctx, all, func(b Election) { add("election", "leader", b.Name, b) })
		},
		func() (*string, error) {
			return s.eachGroup(ctx, all, func(b ThroughputGroup) { add("throughput", "throughput", b.Group, b) })
		},
		func() (*string, error) {
			return s.eachQueue(ctx, all, func(b Queue) { add("queue", "queue", b.Name, b) })
		},
		func() (*string, error) {
			return s.eachBarrier(ctx, all, func(b Barrier) { add("barrier", "barrier", b.Name, b) })
		},
		func() (*string, error) {
			return s.eachDoubleBarrier(ctx, all, func(b DoubleBarrier) { add("double-barrier", "double-barrier", b.Name, b) })
		},
		func() (*string, error) {
			return s.eachMembershipGroup(ctx, all, func(b MembershipGroup) { add("group", "group", b.Group, b) })
		},
		func() (*string, error) {
			return s.eachPartitionGroup(ctx, all, func(b PartitionGroup) { add("partitions", "partitions", b.Group, b) })
		},
	}
	for _, step := range steps {
		if _, err := step(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// overview publishes the tree's changes to the "all" topic while it is followed.
type overview struct {
	mu   sync.Mutex
	seq  int64             // event ids of the "all" topic
	last map[string][]byte // key → last published body
}

// reset forgets what was published: the next follower starts afresh.
func (o *overview) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = nil
}

func (o *overview) nextID() string {
	o.seq++
	return strconv.FormatInt(o.seq, 10)
}

// publishAll sends one entity's state to the "all" topic if it changed.
func (s *Server) publishAll(key, event string, data []byte) {
	o := &s.overview
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = map[string][]byte{}
	}
	if prev, ok := o.last[key]; ok && bytes.Equal(prev, data) {
		return
	}
	o.last[key] = data
	s.broker.PublishKeyed(allTopic, key, sse.Event{ID: o.nextID(), Name: event, Data: data})
}

// followOverview reads the tree every interval until the returned stop is
// called, publishing changes and the disappearance of entities.
func (s *Server) followOverview() (stop func()) {
	ctx, cancel := context.WithCancel(s.stopped)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(s.opt.OverviewInterval)
		defer tick.Stop()
		for {
			if ents, err := s.snapshot(ctx); err == nil {
				s.applySnapshot(ents)
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (s *Server) applySnapshot(ents []entity) {
	seen := map[string]bool{"session": true}
	for _, e := range ents {
		seen[e.key] = true
		if data, err := json.Marshal(e.body); err == nil {
			s.publishAll(e.key, e.event, data)
		}
	}
	o := &s.overview
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, body := range o.last {
		if seen[key] {
			continue
		}
		var v map[string]any
		_ = json.Unmarshal(body, &v)
		gone := map[string]any{"deleted": true}
		for _, k := range []string{"name", "group"} {
			if n, ok := v[k]; ok {
				gone[k] = n
			}
		}
		data, _ := json.Marshal(gone)
		delete(o.last, key)
		s.broker.ForgetKeyed(allTopic, key, sse.Event{ID: o.nextID(), Name: eventOf(key), Data: data})
	}
}

// eventOf is the event name of an entity key's kind.
func eventOf(key string) string {
	for i := range key {
		if key[i] == '/' {
			switch kind := key[:i]; kind {
			case "election":
				return "leader"
			default:
				return kind
			}
		}
	}
	return key
}

// StreamEverything streams every entity's state and the session's.
func (s *Server) StreamEverything(ctx context.Context, _ StreamEverythingRequestObject) (StreamEverythingResponseObject, error) {
	return topicStream{s: s, ctx: ctx, topics: []string{allTopic}, keep: overviewFilter(ctx)}, nil
}

// VisitStreamEverythingResponse serves GET /v1/events.
func (t topicStream) VisitStreamEverythingResponse(w http.ResponseWriter) error { return t.serve(w) }
