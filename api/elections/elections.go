// Package elections is the HTTP side of the leader elections
// (recipes/election): campaign, proclaim, resign, read (and long-poll for a
// new term), list, its event stream and its place in the picture.
package elections

import (
	"context"
	"net/http"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Elections serves the election operations of openapi.yaml.
type Elections struct {
	s         *api.Server
	elections *election.Elections
}

// Tokens are the election's token kind.
func (*Elections) Tokens() []string { return []string{"elections"} }

// Setup makes the leader election on env's session and describes it: its
// topic and section "election", the candidate-exists problem, and how a
// successor adopts its candidates.
func (h *Elections) Setup(env api.Env) api.Descriptor {
	h.s, h.elections = env.Server, election.New(env.Session, env.Registerer)
	return api.Descriptor{
		Topics: map[string]func(topic, name string) func(){"election": h.follow},
		Sections: []picture.Section{{Name: "election", Token: "elections", Event: "leader", Dir: "elections", Field: "name",
			Follow: picture.Followed(h.elections.Follow, func(st *election.ElectionState) any { return body(st) })}},
		Problems: []api.ProblemRule{
			api.ProblemIs(election.ErrCandidateExists, http.StatusConflict, "candidate-exists"),
		},
		Adoptions: map[string]kit.Adoption{election.CandidateKind: {Adopt: h.elections.Adopt, Lines: h.elections.Lines()}},
	}
}

// Campaign enrols a candidate for a lease (implicit when lease= is absent).
func (h *Elections) Campaign(ctx context.Context, req oapi.CampaignRequestObject) (oapi.CampaignResponseObject, error) {
	p := req.Params
	id := ""
	if p.Id != nil {
		id = *p.Id
	}
	if id == "" {
		id = election.NewCandidateID()
	}
	value, err := candidateValue(req.Body)
	if err != nil {
		return nil, err
	}
	hold, err := h.s.HoldFor(api.HoldRequest{Wait: p.Wait, Lease: p.Lease, TTL: p.Ttl})
	if err != nil {
		return nil, err
	}
	c, err := h.elections.Campaign(ctx, hold, req.Name, id, value, hold.Wait)
	if err := hold.Done(err); err != nil {
		return nil, err
	}
	return oapi.Campaign201JSONResponse(candidacyBody(c)), nil
}

// Proclaim sets a candidate's value without re-election.
func (h *Elections) Proclaim(ctx context.Context, req oapi.ProclaimRequestObject) (oapi.ProclaimResponseObject, error) {
	lease, err := h.candidateLease(ctx, req.Name, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	value, err := candidateValue(req.Body)
	if err != nil {
		return nil, err
	}
	c, err := h.elections.Proclaim(ctx, lease, req.Name, req.Id, value)
	if err != nil {
		return nil, err
	}
	return oapi.Proclaim200JSONResponse(candidacyBody(c)), nil
}

// Resign withdraws a candidate, or requeues it at the back of the line.
func (h *Elections) Resign(ctx context.Context, req oapi.ResignRequestObject) (oapi.ResignResponseObject, error) {
	lease, err := h.candidateLease(ctx, req.Name, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	requeue := req.Params.Requeue != nil && *req.Params.Requeue
	c, err := h.elections.Resign(ctx, lease, req.Name, req.Id, requeue)
	if err != nil {
		return nil, err
	}
	if c != nil {
		return oapi.Resign201JSONResponse(candidacyBody(c)), nil
	}
	return oapi.Resign204Response{}, nil
}

// candidateLease checks the election, candidate and lease names of a request
// on a candidacy, and returns the request's own lease of that id.
func (h *Elections) candidateLease(ctx context.Context, election, id, lease string) (*kit.Lease, error) {
	for _, n := range [][2]string{{"election", election}, {"candidate", id}, {"lease", lease}} {
		if err := kit.CheckName(n[0], n[1]); err != nil {
			return nil, err
		}
	}
	return h.s.OwnLease(ctx, lease)
}

// GetElection reads an election; with term= it long-polls until the term differs.
func (h *Elections) GetElection(ctx context.Context, req oapi.GetElectionRequestObject) (oapi.GetElectionResponseObject, error) {
	if err := kit.CheckName("election", req.Name); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	if req.Params.Term == nil {
		st, err := h.elections.Inspect(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		return oapi.GetElection200JSONResponse(body(st)), nil
	}
	f, err := h.elections.Follow(req.Name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := f.Changed()
		if st, ok := f.State(); ok && !st.Suspended && st.Term() != *req.Params.Term {
			return oapi.GetElection200JSONResponse(body(st)), nil
		}
		select {
		case <-changed:
		case <-timer.C:
			// Unchanged within wait: answer the state as ZooKeeper has it now.
			st, err := h.elections.Inspect(ctx, req.Name)
			if err != nil {
				return nil, err
			}
			return oapi.GetElection200JSONResponse(body(st)), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// ListElections answers every election with its leader and candidates.
func (h *Elections) ListElections(ctx context.Context, req oapi.ListElectionsRequestObject) (oapi.ListElectionsResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "elections", h.elections.List, api.ReadVia(h.elections.Inspect, body))
	return oapi.ListElections200JSONResponse{Elections: items, Next: next}, err
}

// StreamElection streams an election's leadership changes.
func (h *Elections) StreamElection(ctx context.Context, req oapi.StreamElectionRequestObject) (oapi.StreamElectionResponseObject, error) {
	if err := kit.CheckName("election", req.Name); err != nil {
		return nil, err
	}
	return stream{h.s.NewStream(ctx, "election/"+req.Name)}, nil
}

type stream struct{ api.Stream }

// VisitStreamElectionResponse serves GET /v1/elections/{name}/events.
func (t stream) VisitStreamElectionResponse(w http.ResponseWriter) error { return t.Serve(w) }

// follow publishes every state of an election to its topic
// "election/{name}", straight from the election's follower; the returned stop
// ends that.
func (h *Elections) follow(topic, name string) (stop func()) {
	return api.FollowStates(h.s, topic, "leader", h.elections.Follow, name,
		func(st *election.ElectionState) int64 { return st.Zxid },
		func(st *election.ElectionState) any { return body(st) })
}

func candidacyBody(c *election.Candidacy) oapi.Candidacy {
	return oapi.Candidacy{Name: c.Name, Candidate: c.Candidate, Lease: c.Lease, Leader: c.Leader, Term: c.Term}
}

// body is an election's state as the API shows it.
func body(st *election.ElectionState) oapi.Election {
	out := oapi.Election{Name: st.Name, Candidates: []oapi.Candidate{}}
	if st.Leader != nil {
		out.Leader = &oapi.ElectionLeader{Candidate: st.Leader.Candidate, Value: st.Leader.Value, Term: st.Leader.Term, Since: st.Leader.Since}
	}
	for _, c := range st.Candidates {
		out.Candidates = append(out.Candidates, oapi.Candidate{Candidate: c.Candidate, Value: c.Value, Since: c.Since})
	}
	out.Suspended, out.SuspendedSince = api.Suspended(st.Suspended, st.SuspendedSince)
	return out
}

// candidateValue is a candidate's value ("" when none is sent), at most
// election.MaxValueBytes, else 400 invalid-body naming it.
func candidateValue(v *oapi.CandidateValue) (string, error) {
	if v == nil || v.Value == nil {
		return "", nil
	}
	if len(*v.Value) > election.MaxValueBytes {
		return "", api.InvalidField("value", "value is %d bytes long: a candidate's value takes at most %d bytes", len(*v.Value), election.MaxValueBytes)
	}
	return *v.Value, nil
}
