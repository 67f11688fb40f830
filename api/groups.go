package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Membership groups: GET /v1/groups/{group} (long-poll on version=), members
// under /v1/groups/{group}/members, the stream /v1/groups/{group}/events (event
// `group`, topic "group/<group>") and the list /v1/groups.

func groupTopic(g string) string { return "group/" + g }

// maxMemberValue caps a member's value (it is one znode's data).
const maxMemberValue = 64 << 10

func memberValue(v *oapi.MemberValue) (string, error) {
	if v == nil || v.Value == nil {
		return "", nil
	}
	if len(*v.Value) > maxMemberValue {
		return "", InvalidParameter("value is %d bytes, above the %d a member may have", len(*v.Value), maxMemberValue)
	}
	return *v.Value, nil
}

// GetGroup answers a group's live members; with version=, once it differs.
func (s *Server) GetGroup(ctx context.Context, req oapi.GetGroupRequestObject) (oapi.GetGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(req.Params.Wait)
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
	return oapi.GetGroup200JSONResponse(groupBody(st)), nil
}

// JoinGroup makes a member for a lease (implicit when lease= is absent).
func (s *Server) JoinGroup(ctx context.Context, req oapi.JoinGroupRequestObject) (oapi.JoinGroupResponseObject, error) {
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
	lease, done, err := s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	j, err := s.opt.Groups.Join(ctx, lease, req.Group, p.Id, value)
	if err := done(err); err != nil {
		return nil, err
	}
	return oapi.JoinGroup201JSONResponse(oapi.GroupJoined{Group: j.Group, Id: j.ID, Lease: &j.Lease}), nil
}

// SetGroupMember sets the lease's member's value.
func (s *Server) SetGroupMember(ctx context.Context, req oapi.SetGroupMemberRequestObject) (oapi.SetGroupMemberResponseObject, error) {
	lease, err := s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"value": "..."}`)
	}
	value, err := memberValue(req.Body)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Groups.SetValue(ctx, lease, req.Group, req.Id, value); err != nil {
		return nil, err
	}
	return oapi.SetGroupMember200JSONResponse(oapi.GroupJoined{Group: req.Group, Id: req.Id}), nil
}

// LeaveGroup removes the lease's member.
func (s *Server) LeaveGroup(ctx context.Context, req oapi.LeaveGroupRequestObject) (oapi.LeaveGroupResponseObject, error) {
	lease, err := s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Groups.Leave(ctx, lease, req.Group, req.Id); err != nil {
		return nil, err
	}
	return oapi.LeaveGroup204Response{}, nil
}

// StreamGroup streams a group's states.
func (s *Server) StreamGroup(ctx context.Context, req oapi.StreamGroupRequestObject) (oapi.StreamGroupResponseObject, error) {
	if err := name("group", req.Group); err != nil {
		return nil, err
	}
	return s.NewStream(ctx, groupTopic(req.Group)), nil
}

// VisitStreamGroupResponse serves GET /v1/groups/{group}/events.
func (t Stream) VisitStreamGroupResponse(w http.ResponseWriter) error { return t.Serve(w) }

// ListGroups answers every membership group with its members.
func (s *Server) ListGroups(ctx context.Context, req oapi.ListGroupsRequestObject) (oapi.ListGroupsResponseObject, error) {
	items, next, err := ListPage(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachMembershipGroup)
	return oapi.ListGroups200JSONResponse{Groups: items, Next: next}, err
}

func (s *Server) eachMembershipGroup(ctx context.Context, p Page, fn func(oapi.MembershipGroup)) (*string, error) {
	return Each(ctx, "groups", p, s.opt.Groups.List, ReadVia(s.opt.Groups.Inspect, groupBody), fn)
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

func groupBody(st *group.State) oapi.MembershipGroup {
	out := oapi.MembershipGroup{Group: st.Group, Version: st.Version, Members: []oapi.GroupMember{}}
	for _, m := range st.Members {
		out.Members = append(out.Members, oapi.GroupMember{Id: m.ID, Value: m.Value, Since: m.Since})
	}
	return out
}
