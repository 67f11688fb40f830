package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/partition"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Partition groups: PUT/GET /v1/partitions/{group}, members under
// /v1/partitions/{group}/members (long-poll, ack), the stream
// /v1/partitions/{group}/events (event `partitions`, topic
// "partitions/<group>") and the list /v1/partitions.

func partitionsTopic(g string) string { return "partitions/" + g }

// SetPartitions sets a group's partition set.
func (s *Server) SetPartitions(ctx context.Context, req oapi.SetPartitionsRequestObject) (oapi.SetPartitionsResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"count": N} or {"partitions": [...]}`)
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
		return nil, NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"count": N} or {"partitions": [...]}`)
	}
	if set.Names != nil && len(set.Names) == 0 {
		return nil, InvalidParameter("partitions is empty: give 1..%d names", partition.MaxPartitions)
	}
	if err := partition.CheckSet(set); err != nil {
		return nil, err
	}
	st, err := s.opt.Partitions.SetPartitions(ctx, req.Group, set)
	if err != nil {
		return nil, err
	}
	return oapi.SetPartitions200JSONResponse(partitionGroupBody(st)), nil
}

// GetPartitionGroup answers a group's plan and owners.
func (s *Server) GetPartitionGroup(ctx context.Context, req oapi.GetPartitionGroupRequestObject) (oapi.GetPartitionGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	st, err := s.opt.Partitions.Inspect(ctx, req.Group)
	if err != nil {
		return nil, err
	}
	return oapi.GetPartitionGroup200JSONResponse(partitionGroupBody(st)), nil
}

// JoinPartitionGroup enrols a member for a lease (implicit when lease= is absent).
func (s *Server) JoinPartitionGroup(ctx context.Context, req oapi.JoinPartitionGroupRequestObject) (oapi.JoinPartitionGroupResponseObject, error) {
	p := req.Params
	weight, err := MemberJoin(req.Group, p.Id, p.Weight, partition.MaxWeight)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	m, err := s.opt.Partitions.Join(ctx, lease, req.Group, p.Id, weight)
	if err := done(err); err != nil {
		return nil, err
	}
	return oapi.JoinPartitionGroup201JSONResponse(partitionMemberBody(m)), nil
}

// GetPartitionMember answers a member's view; with version=, a long-poll.
func (s *Server) GetPartitionMember(ctx context.Context, req oapi.GetPartitionMemberRequestObject) (oapi.GetPartitionMemberResponseObject, error) {
	wait, err := s.MemberPoll(req.Group, req.Id, req.Params.Wait)
	if err != nil {
		return nil, err
	}
	var m *partition.MemberState
	if req.Params.Version == nil {
		m, err = s.opt.Partitions.Member(ctx, req.Group, req.Id)
	} else {
		m, err = s.opt.Partitions.AwaitMember(ctx, req.Group, req.Id, *req.Params.Version, wait)
	}
	if err != nil {
		return nil, err
	}
	return oapi.GetPartitionMember200JSONResponse(partitionMemberBody(m)), nil
}

// AckPartitions lets go of what the acked version no longer deals the member.
func (s *Server) AckPartitions(ctx context.Context, req oapi.AckPartitionsRequestObject) (oapi.AckPartitionsResponseObject, error) {
	lease, err := s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	m, err := s.opt.Partitions.Ack(ctx, lease, req.Group, req.Id, req.Params.Version)
	if err != nil {
		return nil, err
	}
	return oapi.AckPartitions200JSONResponse(partitionMemberBody(m)), nil
}

// LeavePartitionGroup removes the lease's member.
func (s *Server) LeavePartitionGroup(ctx context.Context, req oapi.LeavePartitionGroupRequestObject) (oapi.LeavePartitionGroupResponseObject, error) {
	lease, err := s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Partitions.Leave(ctx, lease, req.Group, req.Id); err != nil {
		return nil, err
	}
	return oapi.LeavePartitionGroup204Response{}, nil
}

// StreamPartitionGroup streams a group's states.
func (s *Server) StreamPartitionGroup(ctx context.Context, req oapi.StreamPartitionGroupRequestObject) (oapi.StreamPartitionGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	return s.NewStream(ctx, partitionsTopic(req.Group)), nil
}

// VisitStreamPartitionGroupResponse serves GET /v1/partitions/{group}/events.
func (t Stream) VisitStreamPartitionGroupResponse(w http.ResponseWriter) error {
	return t.Serve(w)
}

// ListPartitionGroups answers every partition group.
func (s *Server) ListPartitionGroups(ctx context.Context, req oapi.ListPartitionGroupsRequestObject) (oapi.ListPartitionGroupsResponseObject, error) {
	items, next, err := ListPage(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachPartitionGroup)
	return oapi.ListPartitionGroups200JSONResponse{Groups: items, Next: next}, err
}

func (s *Server) eachPartitionGroup(ctx context.Context, p Page, fn func(oapi.PartitionGroup)) (*string, error) {
	return Each(ctx, "partitions", p, s.opt.Partitions.List, ReadVia(s.opt.Partitions.Inspect, partitionGroupBody), fn)
}

// followPartitions publishes a group's states to its topic (event
// `partitions`), including one suspended state (nothing owned) while the
// session is not connected.
func (s *Server) followPartitions(topic, g string) (stop func()) {
	f, err := s.opt.Partitions.Follow(g)
	if err != nil {
		return nil
	}
	var lastID int64
	cancel := f.Subscribe(func(st *partition.State) {
		if data, err := sse.Data(partitionGroupBody(st)); err == nil {
			lastID = max(st.Version, lastID+1)
			s.broker.Publish(topic, sse.Event{ID: strconv.FormatInt(lastID, 10), Name: "partitions", Data: data})
		}
	})
	return func() { cancel(); f.Close() }
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func partitionGroupBody(st *partition.State) oapi.PartitionGroup {
	out := oapi.PartitionGroup{Group: st.Group, Version: st.Version, Leader: nullable(st.Leader), Partitions: st.Partitions,
		Members: []oapi.PartitionGroupMember{}, Moving: []oapi.PartitionMove{}}
	if out.Partitions == nil {
		out.Partitions = []string{}
	}
	if st.Suspended {
		t := true
		out.Suspended = &t
	}
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

func partitionMemberBody(m *partition.MemberState) oapi.PartitionMember {
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
