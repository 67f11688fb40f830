// Package groups is the HTTP side of the membership groups (recipes/group):
// GET /v1/groups/{group} (long-poll on version=), members under
// /v1/groups/{group}/members, the stream /v1/groups/{group}/events (event
// `group`, topic "group/<group>"), the list /v1/groups and the groups' place in
// the picture.
package groups

import (
	"context"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Groups serves the membership group operations of openapi.yaml.
type Groups struct {
	s      *api.Server
	groups *group.Groups
}

// Tokens are the membership group's token kind.
func (*Groups) Tokens() []string { return []string{"groups"} }

// Setup makes the membership groups on env's session and describes them:
// their topic and section "group", and how a successor adopts a member.
// Their member errors are kit's, which every recipe shares.
func (h *Groups) Setup(env api.Env) api.Descriptor {
	h.s, h.groups = env.Server, group.New(env.Session, env.Registerer)
	return api.Descriptor{
		Topics: map[string]func(topic, name string) func(){"group": h.follow},
		Sections: []picture.Section{{Name: "group", Token: "groups", Event: "group", Dir: "groups", Field: "group",
			Follow: picture.Followed(h.groups.Follow, func(st *group.State) any { return body(st) })}},
		Adoptions: map[string]kit.Adoption{group.MemberKind: {Adopt: h.groups.Adopt}},
	}
}

func topic(g string) string { return "group/" + g }

// maxMemberValue caps a member's value (it is one znode's data).
const maxMemberValue = 64 << 10

func memberValue(v *oapi.MemberValue) (string, error) {
	if v == nil || v.Value == nil {
		return "", nil
	}
	if len(*v.Value) > maxMemberValue {
		return "", api.InvalidField("value", "value is %d bytes long: a member's value takes at most %d bytes", len(*v.Value), maxMemberValue)
	}
	return *v.Value, nil
}

// GetGroup answers a group's live members; with version=, once it differs.
func (h *Groups) GetGroup(ctx context.Context, req oapi.GetGroupRequestObject) (oapi.GetGroupResponseObject, error) {
	if err := kit.CheckName("group", req.Group); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	var st *group.State
	if req.Params.Version == nil {
		st, err = h.groups.Inspect(ctx, req.Group)
	} else {
		st, err = h.groups.Await(ctx, req.Group, *req.Params.Version, wait)
	}
	if err != nil {
		return nil, err
	}
	return oapi.GetGroup200JSONResponse(body(st)), nil
}

// JoinGroup makes a member for a lease (implicit when lease= is absent).
func (h *Groups) JoinGroup(ctx context.Context, req oapi.JoinGroupRequestObject) (oapi.JoinGroupResponseObject, error) {
	p := req.Params
	if err := kit.CheckName("group", req.Group); err != nil {
		return nil, err
	}
	if err := kit.CheckName("member", p.Id); err != nil {
		return nil, err
	}
	value, err := memberValue(req.Body)
	if err != nil {
		return nil, err
	}
	lease, done, err := h.s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	j, err := h.groups.Join(ctx, lease, req.Group, p.Id, value)
	if err := done(err); err != nil {
		return nil, err
	}
	return oapi.JoinGroup201JSONResponse(oapi.GroupJoined{Group: j.Group, Id: j.ID, Lease: &j.Lease}), nil
}

// SetGroupMember sets the lease's member's value.
func (h *Groups) SetGroupMember(ctx context.Context, req oapi.SetGroupMemberRequestObject) (oapi.SetGroupMemberResponseObject, error) {
	lease, err := h.s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, api.NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"value": "..."}`)
	}
	value, err := memberValue(req.Body)
	if err != nil {
		return nil, err
	}
	if err := h.groups.SetValue(ctx, lease, req.Group, req.Id, value); err != nil {
		return nil, err
	}
	return oapi.SetGroupMember200JSONResponse(oapi.GroupJoined{Group: req.Group, Id: req.Id}), nil
}

// LeaveGroup removes the lease's member.
func (h *Groups) LeaveGroup(ctx context.Context, req oapi.LeaveGroupRequestObject) (oapi.LeaveGroupResponseObject, error) {
	lease, err := h.s.MemberLease(ctx, req.Group, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := h.groups.Leave(ctx, lease, req.Group, req.Id); err != nil {
		return nil, err
	}
	return oapi.LeaveGroup204Response{}, nil
}

// StreamGroup streams a group's states.
func (h *Groups) StreamGroup(ctx context.Context, req oapi.StreamGroupRequestObject) (oapi.StreamGroupResponseObject, error) {
	if err := kit.CheckName("group", req.Group); err != nil {
		return nil, err
	}
	return stream{h.s.NewStream(ctx, topic(req.Group))}, nil
}

type stream struct{ api.Stream }

// VisitStreamGroupResponse serves GET /v1/groups/{group}/events.
func (t stream) VisitStreamGroupResponse(w http.ResponseWriter) error { return t.Serve(w) }

// ListGroups answers every membership group with its members.
func (h *Groups) ListGroups(ctx context.Context, req oapi.ListGroupsRequestObject) (oapi.ListGroupsResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "groups", h.groups.List, api.ReadVia(h.groups.Inspect, body))
	return oapi.ListGroups200JSONResponse{Groups: items, Next: next}, err
}

// follow publishes a group's states to its topic (event `group`) from the
// group's follower, while the topic has subscribers. Ids are the group's
// version, raised to the previous id + 1 when not newer. A suspension shows as
// one state at its start (the last one, marked suspended) and one at its end,
// and one more if it lasts until the session could have expired.
func (h *Groups) follow(topic, g string) (stop func()) {
	return api.FollowStates(h.s, topic, "group", h.groups.Follow, g,
		func(st *group.State) int64 { return st.Version },
		func(st *group.State) any { return body(st) })
}

// body is a group's state as the API shows it.
func body(st *group.State) oapi.MembershipGroup {
	out := oapi.MembershipGroup{Group: st.Group, Version: st.Version, Members: []oapi.GroupMember{}}
	for _, m := range st.Members {
		out.Members = append(out.Members, oapi.GroupMember{Id: m.ID, Value: m.Value, Since: m.Since})
	}
	out.Suspended, out.SuspendedSince = api.Suspended(st.Suspended, st.SuspendedSince)
	return out
}
