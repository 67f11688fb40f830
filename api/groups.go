package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Membership groups: GET /v1/groups/{group} (long-poll on version=), members
// under /v1/groups/{group}/members, the stream /v1/groups/{group}/events (event
// `group`, topic "group/<group>") and the list /v1/groups.

func groupTopic(g string) string { return "group/" + g }

// maxMemberValue caps a member's value (it is one znode's data).
const maxMemberValue = 64 << 10

func memberValue(v *MemberValue) (string, error) {
	if v == nil || v.Value == nil {
		return "", nil
	}
	if len(*v.Value) > maxMemberValue {
		return "", invalidParameter("value is %d bytes, above the %d a member may have", len(*v.Value), maxMemberValue)
	}
	return *v.Value, nil
}

// GetGroup answers a group's live members; with version=, once it differs.
func (s *Server) GetGroup(ctx context.Context, req GetGroupRequestObject) (GetGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	wait, err := s.waitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	var st *group.State
	if req.Params.Version == nil {
		st, err = s.opt.Groups.Inspect(ctx, req.Group)
	} else {
		st, err = s.opt.Groups.Await(ctx, req.Group, *req.Params.Version, wait)
	}
	if err != nil {
		return nil, err
	}
	return GetGroup200JSONResponse(groupBody(st)), nil
}

// JoinGroup makes a member for a lease (implicit when lease= is absent).
func (s *Server) JoinGroup(ctx context.Context, req JoinGroupRequestObject) (JoinGroupResponseObject, error) {
	p := req.Params
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	if err := name("member", p.Id); err != nil {
		return nil, err
	}
	value, err := memberValue(req.Body)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.leaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	j, err := s.opt.Groups.Join(ctx, lease, req.Group, p.Id, value)
	if err := done(err); err != nil {
		return nil, err
	}
	return JoinGroup201JSONResponse(GroupJoined{Group: j.Group, Id: j.ID, Lease: &j.Lease}), nil
}

// SetGroupMember sets the lease's member's value.
func (s *Server) SetGroupMember(ctx context.Context, req SetGroupMemberRequestObject) (SetGroupMemberResponseObject, error) {
	lease, err := s.memberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, newProblem(http.StatusBadRequest, "invalid-body", `the body must be {"value": "..."}`)
	}
	value, err := memberValue(req.Body)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Groups.SetValue(ctx, lease, req.Group, req.Id, value); err != nil {
		return nil, err
	}
	return SetGroupMember200JSONResponse(GroupJoined{Group: req.Group, Id: req.Id}), nil
}

// LeaveGroup removes the lease's member.
func (s *Server) LeaveGroup(ctx context.Context, req LeaveGroupRequestObject) (LeaveGroupResponseObject, error) {
	lease, err := s.memberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Groups.Leave(ctx, lease, req.Group, req.Id); err != nil {
		return nil, err
	}
	return LeaveGroup204Response{}, nil
}

// StreamGroup streams a group's states.
func (s *Server) StreamGroup(ctx context.Context, req StreamGroupRequestObject) (StreamGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	return topicStream{s: s, ctx: ctx, topics: []string{groupTopic(req.Group)}}, nil
}

// VisitStreamGroupResponse serves GET /v1/groups/{group}/events.
func (t topicStream) VisitStreamGroupResponse(w http.ResponseWriter) error { return t.serve(w) }

// ListGroups answers every membership group with its members.
func (s *Server) ListGroups(ctx context.Context, req ListGroupsRequestObject) (ListGroupsResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachMembershipGroup)
	return ListGroups200JSONResponse{Groups: items, Next: next}, err
}

func (s *Server) eachMembershipGroup(ctx context.Context, p page, fn func(MembershipGroup)) (*string, error) {
	return each(ctx, "groups", p, s.opt.Groups.List, readVia(s.opt.Groups.Inspect, groupBody), fn)
}

// followGroup publishes a group's states to its topic (event `group`) from
// the group's follower, while the topic has subscribers. Ids are the group's
// version, raised to the previous id + 1 when not newer. Nothing is published
// while the session is suspended: the session stream says so.
func (s *Server) followGroup(topic, g string) (stop func()) {
	f, err := s.opt.Groups.Follow(g)
	if err != nil {
		return nil
	}
	var lastID int64
	cancel := f.Subscribe(func(st *group.State) {
		if st.Suspended {
			return
		}
		if data, err := sse.Data(groupBody(st)); err == nil {
			lastID = max(st.Version, lastID+1)
			s.broker.Publish(topic, sse.Event{ID: strconv.FormatInt(lastID, 10), Name: "group", Data: data})
		}
	})
	return func() { cancel(); f.Close() }
}

func groupBody(st *group.State) MembershipGroup {
	out := MembershipGroup{Group: st.Group, Version: st.Version, Members: []GroupMember{}}
	for _, m := range st.Members {
		out.Members = append(out.Members, GroupMember{Id: m.ID, Value: m.Value, Since: m.Since})
	}
	return out
}
