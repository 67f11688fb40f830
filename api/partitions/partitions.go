// Package partitions is the HTTP side of the partition groups
// (recipes/partition): PUT/GET /v1/partitions/{group}, members under
// /v1/partitions/{group}/members (long-poll, ack), the stream
// /v1/partitions/{group}/events (event `partitions`, topic
// "partitions/<group>"), the list /v1/partitions and the groups' place in the
// picture.
package partitions

import (
	"context"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/partition"
)

// Partitions serves the partition group operations of openapi.yaml.
type Partitions struct {
	s          *api.Server
	partitions *partition.Partitions
}

// Tokens are the partition group's token kind.
func (*Partitions) Tokens() []string { return []string{"partitions"} }

// Setup makes the partition groups on env's session and describes them:
// their topic and section "partitions", the version-mismatch problem of an
// ack, and how a successor adopts a member. Their member errors are kit's,
// which every recipe shares.
func (h *Partitions) Setup(env api.Env) api.Descriptor {
	h.s, h.partitions = env.Server, partition.New(env.Session, env.Registerer)
	return api.Descriptor{
		Topics: map[string]func(topic, name string) func(){"partitions": h.follow},
		Sections: []picture.Section{{Name: "partitions", Token: "partitions", Event: "partitions", Dir: "partitions", Field: "group",
			Follow: picture.Followed(h.partitions.Follow, func(st *partition.State) any { return groupBody(st) })}},
		Problems: []api.ProblemRule{
			api.ProblemWith(http.StatusConflict, "version-mismatch", "",
				func(mismatch *partition.VersionMismatchError) map[string]any {
					return map[string]any{"version": mismatch.Current}
				}),
		},
		Adoptions: map[string]kit.Adoption{partition.MemberKind: {Adopt: h.partitions.Adopt}},
	}
}

func topic(g string) string { return "partitions/" + g }

// SetPartitions sets a group's partition set.
func (h *Partitions) SetPartitions(ctx context.Context, req oapi.SetPartitionsRequestObject) (oapi.SetPartitionsResponseObject, error) {
	if err := kit.CheckName("group", req.Group); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, api.NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"count": N} or {"partitions": [...]}`)
	}
	var set partition.Set
	if req.Body.Partitions != nil {
		set.Names = *req.Body.Partitions
		if set.Names == nil {
			set.Names = []string{}
		}
	}
	if req.Body.Count != nil {
		set.Count = *req.Body.Count
	} else if set.Names == nil {
		return nil, api.NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"count": N} or {"partitions": [...]}`)
	}
	if set.Names != nil && len(set.Names) == 0 {
		return nil, api.InvalidParameter("partitions is empty: give 1..%d names", partition.MaxPartitions)
	}
	if err := partition.CheckSet(set); err != nil {
		return nil, err
	}
	st, err := h.partitions.SetPartitions(ctx, req.Group, set)
	if err != nil {
		return nil, err
	}
	return oapi.SetPartitions200JSONResponse(groupBody(st)), nil
}

// GetPartitionGroup answers a group's plan and owners.
func (h *Partitions) GetPartitionGroup(ctx context.Context, req oapi.GetPartitionGroupRequestObject) (oapi.GetPartitionGroupResponseObject, error) {
	st, err := h.partitions.Inspect(ctx, req.Group)
	if err != nil {
		return nil, err
	}
	return oapi.GetPartitionGroup200JSONResponse(groupBody(st)), nil
}

// JoinPartitionGroup enrols a member for a lease (implicit when lease= is absent).
func (h *Partitions) JoinPartitionGroup(ctx context.Context, req oapi.JoinPartitionGroupRequestObject) (oapi.JoinPartitionGroupResponseObject, error) {
	p := req.Params
	weight, err := api.MemberJoin(req.Group, p.Id, p.Weight, partition.MaxWeight)
	if err != nil {
		return nil, err
	}
	lease, done, err := h.s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	m, err := h.partitions.Join(ctx, lease, req.Group, p.Id, weight)
	if err := done(err); err != nil {
		return nil, err
	}
	return oapi.JoinPartitionGroup201JSONResponse(memberBody(m)), nil
}

// GetPartitionMember answers a member's view; with version=, a long-poll.
func (h *Partitions) GetPartitionMember(ctx context.Context, req oapi.GetPartitionMemberRequestObject) (oapi.GetPartitionMemberResponseObject, error) {
	wait, err := h.s.MemberPoll(req.Group, req.Id, req.Params.Wait)
	if err != nil {
		return nil, err
	}
	var m *partition.MemberState
	if req.Params.Version == nil {
		m, err = h.partitions.Member(ctx, req.Group, req.Id)
	} else {
		m, err = h.partitions.AwaitMember(ctx, req.Group, req.Id, *req.Params.Version, wait)
	}
	if err != nil {
		return nil, err
	}
	return oapi.GetPartitionMember200JSONResponse(memberBody(m)), nil
}

// AckPartitions lets go of what the acked version no longer deals the member.
func (h *Partitions) AckPartitions(ctx context.Context, req oapi.AckPartitionsRequestObject) (oapi.AckPartitionsResponseObject, error) {
	lease, err := h.s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	m, err := h.partitions.Ack(ctx, lease, req.Group, req.Id, req.Params.Version)
	if err != nil {
		return nil, err
	}
	return oapi.AckPartitions200JSONResponse(memberBody(m)), nil
}

// LeavePartitionGroup removes the lease's member.
func (h *Partitions) LeavePartitionGroup(ctx context.Context, req oapi.LeavePartitionGroupRequestObject) (oapi.LeavePartitionGroupResponseObject, error) {
	lease, err := h.s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := h.partitions.Leave(ctx, lease, req.Group, req.Id); err != nil {
		return nil, err
	}
	return oapi.LeavePartitionGroup204Response{}, nil
}

// StreamPartitionGroup streams a group's states.
func (h *Partitions) StreamPartitionGroup(ctx context.Context, req oapi.StreamPartitionGroupRequestObject) (oapi.StreamPartitionGroupResponseObject, error) {
	if err := kit.CheckName("group", req.Group); err != nil {
		return nil, err
	}
	return stream{h.s.NewStream(ctx, topic(req.Group))}, nil
}

type stream struct{ api.Stream }

// VisitStreamPartitionGroupResponse serves GET /v1/partitions/{group}/events.
func (t stream) VisitStreamPartitionGroupResponse(w http.ResponseWriter) error {
	return t.Serve(w)
}

// ListPartitionGroups answers every partition group.
func (h *Partitions) ListPartitionGroups(ctx context.Context, req oapi.ListPartitionGroupsRequestObject) (oapi.ListPartitionGroupsResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "partitions", h.partitions.List, api.ReadVia(h.partitions.Inspect, groupBody))
	return oapi.ListPartitionGroups200JSONResponse{Groups: items, Next: next}, err
}

// follow publishes a group's states to its topic (event `partitions`),
// including one suspended state (nothing owned) while the session is not
// connected. Ids are the group's version, raised to the previous id + 1 when
// not newer.
func (h *Partitions) follow(topic, g string) (stop func()) {
	return api.FollowStates(h.s, topic, "partitions", h.partitions.Follow, g,
		func(st *partition.State) int64 { return st.Version },
		func(st *partition.State) any { return groupBody(st) })
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// groupBody is a group's plan and owners as the API shows them.
func groupBody(st *partition.State) oapi.PartitionGroup {
	out := oapi.PartitionGroup{Group: st.Group, Version: st.Version, Leader: nullable(st.Leader), Partitions: st.Partitions,
		Members: []oapi.PartitionGroupMember{}, Moving: []oapi.PartitionMove{}}
	if out.Partitions == nil {
		out.Partitions = []string{}
	}
	out.Suspended, out.SuspendedSince = api.Suspended(st.Suspended, st.SuspendedSince)
	for _, m := range st.Members {
		gm := oapi.PartitionGroupMember{Id: m.ID, Weight: int(m.Weight), Assigned: m.Assigned, Owned: make([]string, 0, len(m.Owned))}
		for _, o := range m.Owned {
			gm.Owned = append(gm.Owned, o.Partition)
		}
		out.Members = append(out.Members, gm)
	}
	for _, mv := range st.Moving {
		out.Moving = append(out.Moving, oapi.PartitionMove{Partition: mv.Partition, Owner: nullable(mv.Owner), Assigned: nullable(mv.Assigned)})
	}
	return out
}

// memberBody is a member's view as the API shows it.
func memberBody(m *partition.MemberState) oapi.PartitionMember {
	out := oapi.PartitionMember{Group: m.Group, Id: m.ID, Weight: int(m.Weight), Assigned: m.Assigned, Owned: []oapi.PartitionOwned{}, Version: m.Version}
	if out.Assigned == nil {
		out.Assigned = []string{}
	}
	for _, o := range m.Owned {
		out.Owned = append(out.Owned, oapi.PartitionOwned{Partition: o.Partition, FencingToken: o.FencingToken})
	}
	if m.Lease != "" {
		l := m.Lease
		out.Lease = &l
	}
	return out
}
