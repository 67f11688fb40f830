package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/throughput"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Throughput groups: GET/PUT /v1/throughput/{group}, members under
// /v1/throughput/{group}/members, and the stream /v1/throughput/{group}/events,
// which carries `throughput` events (the GET body) from the topic
// "throughput/<group>" and `leader` events from "throughput-leader/<group>".

func throughputTopic(group string) string       { return "throughput/" + group }
func throughputLeaderTopic(group string) string { return "throughput-leader/" + group }

// GetThroughputGroup reads a group's published allocation.
func (s *Server) GetThroughputGroup(ctx context.Context, req oapi.GetThroughputGroupRequestObject) (oapi.GetThroughputGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	g, err := s.opt.Throughput.Inspect(ctx, req.Group)
	if err != nil {
		return nil, err
	}
	return oapi.GetThroughputGroup200JSONResponse(throughputBody(g)), nil
}

// SetThroughputLimit sets a group's limit and answers the group once the new
// allocation is published.
func (s *Server) SetThroughputLimit(ctx context.Context, req oapi.SetThroughputLimitRequestObject) (oapi.SetThroughputLimitResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"limit": N}`)
	}
	if req.Body.Limit < 0 {
		return nil, InvalidParameter("limit %d is negative", req.Body.Limit)
	}
	g, err := s.opt.Throughput.SetLimit(ctx, req.Group, req.Body.Limit)
	if err != nil {
		return nil, err
	}
	return oapi.SetThroughputLimit200JSONResponse(throughputBody(g)), nil
}

// StreamThroughputGroup streams a group's allocations and changes of leader.
func (s *Server) StreamThroughputGroup(ctx context.Context, req oapi.StreamThroughputGroupRequestObject) (oapi.StreamThroughputGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	return s.NewStream(ctx, throughputTopic(req.Group), throughputLeaderTopic(req.Group)), nil
}

// VisitStreamThroughputGroupResponse serves GET /v1/throughput/{group}/events.
func (t Stream) VisitStreamThroughputGroupResponse(w http.ResponseWriter) error {
	return t.Serve(w)
}

// JoinThroughputGroup enrols a member for a lease (implicit when lease= is absent).
func (s *Server) JoinThroughputGroup(ctx context.Context, req oapi.JoinThroughputGroupRequestObject) (oapi.JoinThroughputGroupResponseObject, error) {
	p := req.Params
	weight, err := MemberJoin(req.Group, p.Id, p.Weight, throughput.MaxWeight)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	sh, err := s.opt.Throughput.Join(ctx, lease, req.Group, p.Id, weight)
	if err := done(err); err != nil {
		return nil, err
	}
	body := shareBody(sh)
	body.Lease = &sh.Lease
	return oapi.JoinThroughputGroup201JSONResponse(body), nil
}

// LeaveThroughputGroup removes the lease's member.
func (s *Server) LeaveThroughputGroup(ctx context.Context, req oapi.LeaveThroughputGroupRequestObject) (oapi.LeaveThroughputGroupResponseObject, error) {
	lease, err := s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Throughput.Leave(ctx, lease, req.Group, req.Id); err != nil {
		return nil, err
	}
	return oapi.LeaveThroughputGroup204Response{}, nil
}

// GetThroughputMember answers a member's share; with version=, it long-polls
// until the allocation's version differs.
func (s *Server) GetThroughputMember(ctx context.Context, req oapi.GetThroughputMemberRequestObject) (oapi.GetThroughputMemberResponseObject, error) {
	wait, err := s.MemberPoll(req.Group, req.Id, req.Params.Wait)
	if err != nil {
		return nil, err
	}
	var sh *throughput.ThroughputShare
	if req.Params.Version == nil {
		sh, err = s.opt.Throughput.Member(ctx, req.Group, req.Id)
	} else {
		sh, err = s.opt.Throughput.AwaitMember(ctx, req.Group, req.Id, *req.Params.Version, wait)
	}
	if err != nil {
		return nil, err
	}
	return oapi.GetThroughputMember200JSONResponse(shareBody(sh)), nil
}

// UpdateThroughputMember sets a member's weight and demand.
func (s *Server) UpdateThroughputMember(ctx context.Context, req oapi.UpdateThroughputMemberRequestObject) (oapi.UpdateThroughputMemberResponseObject, error) {
	lease, err := s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"weight": W, "demand": D}`)
	}
	var weight *int64
	if req.Body.Weight != nil {
		w := int64(*req.Body.Weight)
		if w < 1 || w > throughput.MaxWeight {
			return nil, InvalidParameter("weight %d is not between 1 and %d", w, throughput.MaxWeight)
		}
		weight = &w
	}
	if d := req.Body.Demand; d != nil && *d < 0 {
		return nil, InvalidParameter("demand %d is negative", *d)
	}
	sh, err := s.opt.Throughput.Update(ctx, lease, req.Group, req.Id, weight, req.Body.Demand)
	if err != nil {
		return nil, err
	}
	return oapi.UpdateThroughputMember200JSONResponse(shareBody(sh)), nil
}

// followThroughput publishes a group's allocations to its topic (event
// `throughput`, on every new version) and its changes of leader to
// "throughput-leader/<group>" (event `leader`), while the topic has
// subscribers, straight from the group's follower; the returned stop ends
// that. Nothing is published while the session is suspended: the session
// stream says so.
func (s *Server) followThroughput(topic, group string) (stop func()) {
	f, err := s.opt.Throughput.Follow(group)
	if err != nil {
		return nil
	}
	published := false
	var version int64
	var leader string
	// Event ids count the group's events, both kinds together, so that a `leader`
	// event never repeats the id of the `throughput` event before it (both come
	// from one version); the broker gives a new subscriber the two current events
	// in publish order, so their ids increase there too.
	var seq int64
	nextID := func() string { seq++; return strconv.FormatInt(seq, 10) }
	cancel := f.Subscribe(func(st *throughput.ThroughputGroup) {
		if st.Suspended || (published && st.Version == version) {
			return
		}
		if data, err := sse.Data(throughputBody(st)); err == nil {
			s.broker.Publish(topic, sse.Event{ID: nextID(), Name: "throughput", Data: data})
		}
		if !published || st.Leader != leader {
			if data, err := sse.Data(leaderBody(st)); err == nil {
				s.broker.Publish(throughputLeaderTopic(group), sse.Event{ID: nextID(), Name: "leader", Data: data})
			}
		}
		published, version, leader = true, st.Version, st.Leader
	})
	return func() { cancel(); f.Close() }
}

// leaderBody is the data of a `leader` event.
func leaderBody(g *throughput.ThroughputGroup) oapi.ThroughputLeader {
	out := oapi.ThroughputLeader{Group: g.Group, Term: g.Term, Version: g.Version}
	if g.Leader != "" {
		l := g.Leader
		out.Leader = &l
	}
	return out
}

func throughputBody(g *throughput.ThroughputGroup) oapi.ThroughputGroup {
	out := oapi.ThroughputGroup{Group: g.Group, Limit: g.Limit, Version: g.Version, Members: []oapi.ThroughputMember{}}
	if g.Leader != "" {
		l := g.Leader
		out.Leader = &l
	}
	for _, m := range g.Members {
		tm := oapi.ThroughputMember{Id: m.ID, Weight: int(m.Weight), Share: m.Share, Leader: m.Leader}
		if m.Demand >= 0 {
			d := m.Demand
			tm.Demand = &d
		}
		out.Members = append(out.Members, tm)
	}
	return out
}

func shareBody(sh *throughput.ThroughputShare) oapi.ThroughputShare {
	return oapi.ThroughputShare{Group: sh.Group, Id: sh.ID, Share: sh.Share, Version: sh.Version}
}
