package api

import (
	"context"
	"net/http"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Campaign enrols a candidate for a lease (implicit when lease= is absent).
func (s *Server) Campaign(ctx context.Context, req oapi.CampaignRequestObject) (oapi.CampaignResponseObject, error) {
	p := req.Params
	if err := name("election", req.Name); err != nil {
		return nil, err
	}
	id := ""
	if p.Id != nil {
		id = *p.Id
	}
	if id == "" {
		id = election.NewCandidateID()
	}
	if err := name("candidate", id); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	value := ""
	if req.Body != nil && req.Body.Value != nil {
		value = *req.Body.Value
	}
	lease, done, err := s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	c, err := s.opt.Elections.Campaign(ctx, lease, req.Name, id, value, wait)
	if err := done(err); err != nil {
		return nil, err
	}
	return oapi.Campaign201JSONResponse(candidacyBody(c)), nil
}

// Proclaim sets a candidate's value without re-election.
func (s *Server) Proclaim(ctx context.Context, req oapi.ProclaimRequestObject) (oapi.ProclaimResponseObject, error) {
	lease, err := s.candidateLease(ctx, req.Name, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	value := ""
	if req.Body != nil && req.Body.Value != nil {
		value = *req.Body.Value
	}
	c, err := s.opt.Elections.Proclaim(ctx, lease, req.Name, req.Id, value)
	if err != nil {
		return nil, err
	}
	return oapi.Proclaim200JSONResponse(candidacyBody(c)), nil
}

// Resign withdraws a candidate, or requeues it at the back of the line.
func (s *Server) Resign(ctx context.Context, req oapi.ResignRequestObject) (oapi.ResignResponseObject, error) {
	lease, err := s.candidateLease(ctx, req.Name, req.Id, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	requeue := req.Params.Requeue != nil && *req.Params.Requeue
	c, err := s.opt.Elections.Resign(ctx, lease, req.Name, req.Id, requeue)
	if err != nil {
		return nil, err
	}
	if c != nil {
		return oapi.Resign201JSONResponse(candidacyBody(c)), nil
	}
	return oapi.Resign204Response{}, nil
}

func (s *Server) candidateLease(ctx context.Context, election, id, lease string) (*kit.Lease, error) {
	for _, n := range [][2]string{{"election", election}, {"candidate", id}, {"lease", lease}} {
		if err := name(n[0], n[1]); err != nil {
			return nil, err
		}
	}
	return s.OwnLease(ctx, lease)
}

// GetElection reads an election; with term= it long-polls until the term differs.
func (s *Server) GetElection(ctx context.Context, req oapi.GetElectionRequestObject) (oapi.GetElectionResponseObject, error) {
	if err := name("election", req.Name); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	if req.Params.Term == nil {
		st, err := s.opt.Elections.Inspect(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		return oapi.GetElection200JSONResponse(electionBody(st)), nil
	}
	f, err := s.opt.Elections.Follow(req.Name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := f.Changed()
		if st, ok := f.State(); ok && !st.Suspended && st.Term() != *req.Params.Term {
			return oapi.GetElection200JSONResponse(electionBody(st)), nil
		}
		select {
		case <-changed:
		case <-timer.C:
			// Unchanged within wait: answer the state as ZooKeeper has it now.
			st, err := s.opt.Elections.Inspect(ctx, req.Name)
			if err != nil {
				return nil, err
			}
			return oapi.GetElection200JSONResponse(electionBody(st)), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// StreamElection streams an election's leadership changes.
func (s *Server) StreamElection(ctx context.Context, req oapi.StreamElectionRequestObject) (oapi.StreamElectionResponseObject, error) {
	if err := name("election", req.Name); err != nil {
		return nil, err
	}
	return Stream{s: s, ctx: ctx, topics: []string{electionTopic(req.Name)}}, nil
}

func candidacyBody(c *election.Candidacy) oapi.Candidacy {
	return oapi.Candidacy{Name: c.Name, Candidate: c.Candidate, Lease: c.Lease, Leader: c.Leader, Term: c.Term}
}

func electionBody(st *election.ElectionState) oapi.Election {
	out := oapi.Election{Name: st.Name, Candidates: []oapi.Candidate{}}
	if st.Leader != nil {
		out.Leader = &oapi.ElectionLeader{Candidate: st.Leader.Candidate, Value: st.Leader.Value, Term: st.Leader.Term, Since: st.Leader.Since}
	}
	for _, c := range st.Candidates {
		out.Candidates = append(out.Candidates, oapi.Candidate{Candidate: c.Candidate, Value: c.Value, Since: c.Since})
	}
	if st.Suspended {
		t := true
		out.Suspended = &t
	}
	return out
}

func electionTopic(name string) string { return "election/" + name }

// VisitStreamElectionResponse serves GET /v1/elections/{name}/events.
func (t Stream) VisitStreamElectionResponse(w http.ResponseWriter) error { return t.Serve(w) }

// followElection publishes every state of an election to its topic, straight
// from the election's follower; the returned stop ends that.
func (s *Server) followElection(topic, name string) (stop func()) {
	f, err := s.opt.Elections.Follow(name)
	if err != nil {
		return nil
	}
	return FollowStates(s, topic, "leader", f, func(st *election.ElectionState) int64 { return st.Zxid },
		func(st *election.ElectionState) any { return electionBody(st) })
}
