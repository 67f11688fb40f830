// Package throughput is the HTTP side of the throughput groups
// (recipes/throughput): GET/PUT /v1/throughput/{group}, members under
// /v1/throughput/{group}/members, the stream /v1/throughput/{group}/events,
// which carries `throughput` events (the GET body) from the topic
// "throughput/<group>" and `leader` events from "throughput-leader/<group>",
// the list /v1/throughput and the groups' place in the picture.
package throughput

import (
	"time"

	"context"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	throughputs "github.com/coord-sidecar/coord-sidecar/recipes/throughput"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Throughput serves the throughput group operations of openapi.yaml.
type Throughput struct {
	s      *api.Server
	groups *throughputs.Throughputs
}

// Tokens are the throughput group's token kind.
func (*Throughput) Tokens() []string { return []string{"throughput"} }

// Setup makes the throughput groups on env's session and describes them:
// their topic and section "throughput", and how a successor adopts a member.
// Their member errors are kit's, which every recipe shares.
func (h *Throughput) Setup(env api.Env) api.Descriptor {
	h.s, h.groups = env.Server, throughputs.New(env.Session, env.Registerer)
	return api.Descriptor{
		Topics: map[string]func(topic, name string) func(){"throughput": h.follow},
		Sections: []picture.Section{{Name: "throughput", Token: "throughput", Event: "throughput", Dir: "throughput", Field: "group",
			Follow: picture.Followed(h.groups.Follow, func(g *throughputs.ThroughputGroup) any { return groupBody(g) })}},
		Adoptions: map[string]kit.Adoption{throughputs.MemberKind: {Adopt: h.groups.Adopt}},
	}
}

func topic(group string) string       { return "throughput/" + group }
func leaderTopic(group string) string { return "throughput-leader/" + group }

// GetThroughputGroup reads a group's published allocation.
func (h *Throughput) GetThroughputGroup(ctx context.Context, req oapi.GetThroughputGroupRequestObject) (oapi.GetThroughputGroupResponseObject, error) {
	g, err := h.groups.Inspect(ctx, req.Group)
	if err != nil {
		return nil, err
	}
	return oapi.GetThroughputGroup200JSONResponse(groupBody(g)), nil
}

// SetThroughputLimit sets a group's limit and answers the group once the new
// allocation is published.
func (h *Throughput) SetThroughputLimit(ctx context.Context, req oapi.SetThroughputLimitRequestObject) (oapi.SetThroughputLimitResponseObject, error) {
	if err := kit.CheckName("group", req.Group); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, api.NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"limit": N}`)
	}
	if req.Body.Limit < 0 {
		return nil, api.InvalidParameter("limit %d is negative", req.Body.Limit)
	}
	g, err := h.groups.SetLimit(ctx, req.Group, req.Body.Limit)
	if err != nil {
		return nil, err
	}
	return oapi.SetThroughputLimit200JSONResponse(groupBody(g)), nil
}

// StreamThroughputGroup streams a group's allocations and changes of leader.
func (h *Throughput) StreamThroughputGroup(ctx context.Context, req oapi.StreamThroughputGroupRequestObject) (oapi.StreamThroughputGroupResponseObject, error) {
	if err := kit.CheckName("group", req.Group); err != nil {
		return nil, err
	}
	return stream{h.s.NewStream(ctx, topic(req.Group), leaderTopic(req.Group))}, nil
}

type stream struct{ api.Stream }

// VisitStreamThroughputGroupResponse serves GET /v1/throughput/{group}/events.
func (t stream) VisitStreamThroughputGroupResponse(w http.ResponseWriter) error {
	return t.Serve(w)
}

// JoinThroughputGroup enrols a member for a lease (implicit when lease= is absent).
func (h *Throughput) JoinThroughputGroup(ctx context.Context, req oapi.JoinThroughputGroupRequestObject) (oapi.JoinThroughputGroupResponseObject, error) {
	p := req.Params
	weight, err := api.MemberJoin(req.Group, p.Id, p.Weight, throughputs.MaxWeight)
	if err != nil {
		return nil, err
	}
	lease, done, err := h.s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	sh, err := h.groups.Join(ctx, lease, req.Group, p.Id, weight)
	if err := done(err); err != nil {
		return nil, err
	}
	body := shareBody(sh)
	body.Lease = &sh.Lease
	return oapi.JoinThroughputGroup201JSONResponse(body), nil
}

// LeaveThroughputGroup removes the lease's member.
func (h *Throughput) LeaveThroughputGroup(ctx context.Context, req oapi.LeaveThroughputGroupRequestObject) (oapi.LeaveThroughputGroupResponseObject, error) {
	lease, err := h.s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := h.groups.Leave(ctx, lease, req.Group, req.Id); err != nil {
		return nil, err
	}
	return oapi.LeaveThroughputGroup204Response{}, nil
}

// GetThroughputMember answers a member's share; with version=, it long-polls
// until the allocation's version differs.
func (h *Throughput) GetThroughputMember(ctx context.Context, req oapi.GetThroughputMemberRequestObject) (oapi.GetThroughputMemberResponseObject, error) {
	wait, err := h.s.MemberPoll(req.Group, req.Id, req.Params.Wait)
	if err != nil {
		return nil, err
	}
	var sh *throughputs.ThroughputShare
	if req.Params.Version == nil {
		sh, err = h.groups.Member(ctx, req.Group, req.Id)
	} else {
		sh, err = h.groups.AwaitMember(ctx, req.Group, req.Id, *req.Params.Version, wait)
	}
	if err != nil {
		return nil, err
	}
	return oapi.GetThroughputMember200JSONResponse(shareBody(sh)), nil
}

// UpdateThroughputMember sets a member's weight and demand.
func (h *Throughput) UpdateThroughputMember(ctx context.Context, req oapi.UpdateThroughputMemberRequestObject) (oapi.UpdateThroughputMemberResponseObject, error) {
	lease, err := h.s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, api.NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"weight": W, "demand": D}`)
	}
	var weight *int64
	if req.Body.Weight != nil {
		w := int64(*req.Body.Weight)
		if w < 1 || w > throughputs.MaxWeight {
			return nil, api.InvalidParameter("weight %d is not between 1 and %d", w, throughputs.MaxWeight)
		}
		weight = &w
	}
	if d := req.Body.Demand; d != nil && *d < 0 {
		return nil, api.InvalidParameter("demand %d is negative", *d)
	}
	sh, err := h.groups.Update(ctx, lease, req.Group, req.Id, weight, req.Body.Demand)
	if err != nil {
		return nil, err
	}
	return oapi.UpdateThroughputMember200JSONResponse(shareBody(sh)), nil
}

// ListThroughputGroups answers every throughput group with its allocation.
func (h *Throughput) ListThroughputGroups(ctx context.Context, req oapi.ListThroughputGroupsRequestObject) (oapi.ListThroughputGroupsResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "throughput", h.groups.List, api.ReadVia(h.groups.Inspect, groupBody))
	return oapi.ListThroughputGroups200JSONResponse{Groups: items, Next: next}, err
}

// follow publishes a group's allocations to its topic (event `throughput`, on
// every new version) and its changes of leader to "throughput-leader/<group>"
// (event `leader`), while the topic has subscribers, straight from the group's
// follower; the returned stop ends that. A suspension shows as one
// `throughput` event at its start (the last allocation, marked suspended) and
// one at its end, and as a `leader` event if it lasts until the session could
// have expired (no leader vouched for then).
func (h *Throughput) follow(topic, group string) (stop func()) {
	f, err := h.groups.Follow(group)
	if err != nil {
		return nil
	}
	published := false
	var version int64
	var leader string
	var suspended bool
	var since time.Time
	// Event ids count the group's events, both kinds together, so that a `leader`
	// event never repeats the id of the `throughput` event before it (both come
	// from one version); the broker gives a new subscriber the two current events
	// in publish order, so their ids increase there too.
	var seq int64
	nextID := func() string { seq++; return strconv.FormatInt(seq, 10) }
	cancel := f.Subscribe(func(st *throughputs.ThroughputGroup) {
		if published && st.Version == version && st.Suspended == suspended && st.SuspendedSince.Equal(since) && st.Leader == leader {
			return
		}
		if data, err := sse.Data(groupBody(st)); err == nil {
			h.s.Publish(topic, sse.Event{ID: nextID(), Name: "throughput", Data: data})
		}
		if !published || st.Leader != leader {
			if data, err := sse.Data(leaderBody(st)); err == nil {
				h.s.Publish(leaderTopic(group), sse.Event{ID: nextID(), Name: "leader", Data: data})
			}
		}
		published, version, leader, suspended, since = true, st.Version, st.Leader, st.Suspended, st.SuspendedSince
	})
	return func() { cancel(); f.Close() }
}

// leaderBody is the data of a `leader` event.
func leaderBody(g *throughputs.ThroughputGroup) oapi.ThroughputLeader {
	out := oapi.ThroughputLeader{Group: g.Group, Term: g.Term, Version: g.Version}
	if g.Leader != "" {
		l := g.Leader
		out.Leader = &l
	}
	return out
}

// groupBody is a group's allocation as the API shows it.
func groupBody(g *throughputs.ThroughputGroup) oapi.ThroughputGroup {
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
	out.Suspended, out.SuspendedSince = api.Suspended(g.Suspended, g.SuspendedSince)
	return out
}

// shareBody is a member's share as the API shows it.
func shareBody(sh *throughputs.ThroughputShare) oapi.ThroughputShare {
	return oapi.ThroughputShare{Group: sh.Group, Id: sh.ID, Share: sh.Share, Version: sh.Version}
}
