package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/line"
)

// Elections are leader elections in Curator LeaderLatch's layout:
// <root>/elections/<name>/_c_<guid>-latch-<seq>, ephemeral sequential nodes made
// in protected mode under a container parent, the first in sequence order leading.
// A node's data is {"candidate": id, "value": v}; a node whose data is not that JSON
// (a Curator participant) shows its data as the candidate id.
//
// The term of a leadership is the leader node's creation zxid: it strictly
// increases with every change of leader and serves the leader as fencing token.
type Elections struct {
	s       *zookeeper.Session
	dir     string
	metrics electionMetrics

	followers *kit.Followers[*ElectionState]
	// grants dates the leaders' since (line.Grants).
	grants line.Grants
}

// Candidacy is one candidate enrolled by a lease: the lease's holding.
type Candidacy struct {
	Name      string
	Candidate string
	Lease     string
	// Leader is true when this candidate led at the moment of the answer, under a
	// connected session (never while suspended).
	Leader bool
	// Term is the current leader's term (0 when nobody leads).
	Term int64

	e     *Elections
	ep    *zookeeper.Epoch
	node  zookeeper.Created
	value string
	// uncount takes the candidacy out of coord_election_candidates, once,
	// at its Release (a resignation or its lease's end, whatever the reason).
	uncount func()
}

// newCandidacy is lease's candidacy id of election name at node, made under
// ep, counted in coord_election_candidates until its Release.
func (e *Elections) newCandidacy(lease *kit.Lease, ep *zookeeper.Epoch, name, id string, node zookeeper.Created, value string) *Candidacy {
	e.metrics.candidates.Inc()
	return &Candidacy{Name: name, Candidate: id, Lease: lease.ID, e: e, ep: ep, node: node, value: value,
		uncount: sync.OnceFunc(e.metrics.candidates.Dec)}
}

// ElectionState is an election as anyone can see it.
type ElectionState struct {
	Name       string
	Leader     *ElectionLeader
	Candidates []Candidate // in line order, the leader first
	// Zxid is the newest change the state reflects (for event ids).
	Zxid int64
	// Suspended is set while this sidecar's session is not connected. During
	// the first part of a suspension the state is the last one read (the
	// leader it last knew stands); once the session could have expired
	// (zookeeper.Session.InDoubt), or while there is none, Leader is nil and
	// Candidates empty: nobody can be vouched for.
	Suspended bool
	// SuspendedSince is when the suspension began; zero when not suspended
	// (or when the session is lost or not yet made).
	SuspendedSince time.Time
}

// ElectionLeader is the leading candidate.
type ElectionLeader struct {
	Candidate string
	Value     string
	Term      int64
	Since     time.Time
}

// Candidate is one candidate in line.
type Candidate struct {
	Candidate string
	Value     string
	Since     time.Time
}

// Term is the leader's term, 0 when nobody leads.
func (st *ElectionState) Term() int64 {
	if st == nil || st.Leader == nil {
		return 0
	}
	return st.Leader.Term
}

// CandidateKind is the kind of a candidacy's hold on its lease (kit.Hold); the
// hold's name is "<election>/<candidate id>".
const CandidateKind = "candidate"

const candidateKind = CandidateKind

// MaxValueBytes bounds a candidate's value (the node's data stays small).
const MaxValueBytes = 4096

type candidateData struct {
	Candidate string `json:"candidate"`
	Value     string `json:"value"`
}

// New returns the election recipe over a session.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Elections {
	e := &Elections{s: s, dir: s.Dir("elections"), metrics: newElectionMetrics(reg)}
	e.followers = kit.NewFollowers(s, e.metrics.watches, func(name string) kit.Source[*ElectionState] {
		return newElectionSource(e, name)
	})
	return e
}

func (e *Elections) parent(name string) string { return e.dir + "/" + name }

// Lines is the node under which each election is a line of candidate nodes.
func (e *Elections) Lines() string { return e.dir }

func candidateHold(name, id string) kit.Hold {
	return kit.Hold{Kind: candidateKind, Name: name + "/" + id}
}

func checkCandidate(name, id, value string) error {
	if err := kit.CheckName("election", name); err != nil {
		return err
	}
	if err := kit.CheckName("candidate", id); err != nil {
		return err
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("value is %d bytes long: a candidate's value takes at most %d bytes: %w", len(value), MaxValueBytes, kit.ErrInvalidArgument)
	}
	return nil
}

// Campaign enrols candidate id (with value) in election name for lease, at the back
// of the line, and waits up to wait (0: not at all) to lead. It answers with the
// candidacy, still enrolled when it does not lead yet. ErrCandidateExists when a
// live candidate has that id in that election (on any client). The lease is
// src's, asked for once the names and the value are checked.
func (e *Elections) Campaign(ctx context.Context, src kit.LeaseSource, name, id, value string, wait time.Duration) (*Candidacy, error) {
	if err := checkCandidate(name, id, value); err != nil {
		return nil, err
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return nil, err
	}
	return e.enrol(ctx, lease, name, id, value, wait)
}

// enrol runs the hold protocol for one candidacy and answers its standing.
func (e *Elections) enrol(ctx context.Context, lease *kit.Lease, name, id, value string, wait time.Duration) (*Candidacy, error) {
	var place line.Place
	c, found, err := kit.Acquire(ctx, lease, candidateHold(name, id),
		func(ctx context.Context, ep *zookeeper.Epoch) (*Candidacy, error) {
			var c *Candidacy
			var err error
			c, place, err = e.stand(ctx, ep, lease, name, id, value, wait)
			return c, err
		})
	switch {
	case found:
		return nil, fmt.Errorf("candidate %q in %q: %w", id, name, ErrCandidateExists)
	case err != nil:
		return nil, err
	}
	out := *c
	out.Leader = place.Head
	if place.Head {
		out.Term = place.Czxid
	} else if leader, err := e.leaderTerm(ctx, c.ep, e.parent(name), place.Line); err == nil {
		out.Term = leader
	}
	return &out, nil
}

// stand makes the candidate's node, unless a live candidate has its id, and
// waits up to wait for it to lead.
func (e *Elections) stand(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, name, id, value string, wait time.Duration) (*Candidacy, line.Place, error) {
	st, err := e.read(ctx, ep, name)
	if err != nil {
		return nil, line.Place{}, err
	}
	for _, c := range st.Candidates {
		if c.Candidate == id {
			return nil, line.Place{}, fmt.Errorf("candidate %q in %q: %w", id, name, ErrCandidateExists)
		}
	}
	data, _ := json.Marshal(candidateData{Candidate: id, Value: value})
	parent := e.parent(name)
	made, err := ep.CreateProtected(ctx, parent, "latch-", data, true)
	if err != nil {
		return nil, line.Place{}, err
	}
	place, err := line.AwaitHead(ctx, ep, made, wait, lease.Ending(), nil)
	if err != nil {
		ep.CleanupProtected(parent, made.GUID, made.Path)
		return nil, line.Place{}, fmt.Errorf("election %q: %w", name, err)
	}
	if place.Head {
		e.grants.Granted(made.Path, time.Now())
	} else {
		e.grants.Waiting(made.Path) // the first read that sees it lead dates it
	}
	return e.newCandidacy(lease, ep, name, id, made, value), place, nil
}

// Adopt re-creates lease's candidacy h.Name ("<election>/<id>") from its saved
// node after a restart that resumed the session (a kit.Adopter): the node must
// be the session's own and name the candidate. The candidacy keeps its place
// in line, so a leader still leads with the same term (its node's czxid) and
// a follower is still a candidate; the value is the node's data, as the last
// campaign or proclaim set it.
func (e *Elections) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	name, id, _ := strings.Cut(h.Name, "/")
	what := fmt.Sprintf("candidate %q in %q", id, name)
	node, data, _, err := kit.ProtectedNode(ctx, lease, h, e.parent(name), what)
	if err != nil {
		return nil, err
	}
	got, value := decodeCandidate(data, path.Base(node.Path))
	if got != id {
		return nil, fmt.Errorf("%s: node %s names candidate %q", what, node.Path, got)
	}
	return e.newCandidacy(lease, lease.Epoch(), name, id, node, value), nil
}

// HeldNodes is the candidate's node: deleted by another hand, the candidacy
// (and any leadership) is lost.
func (c *Candidacy) HeldNodes() []string { return []string{c.node.Path} }

// Release withdraws the candidate: its node is deleted, retried through a
// suspension while the session lives. The candidacy stops counting in
// coord_election_candidates whatever the delete's outcome: it is no lease's
// any more.
func (c *Candidacy) Release(ctx context.Context) error {
	c.uncount()
	c.e.grants.Gone(c.node.Path)
	return c.ep.DeleteProtected(ctx, path.Dir(c.node.Path), c.node.GUID, c.node.Path)
}

// leaderTerm reads the czxid of the first live node of a line.
func (e *Elections) leaderTerm(ctx context.Context, ep *zookeeper.Epoch, parent string, line []string) (int64, error) {
	for _, n := range line {
		_, st, err := ep.Exists(ctx, parent+"/"+n)
		if err != nil {
			return 0, err
		}
		if st != nil {
			return st.Czxid, nil
		}
	}
	return 0, nil
}

// Proclaim sets a new value for the lease's candidate without re-election.
func (e *Elections) Proclaim(ctx context.Context, lease *kit.Lease, name, id, value string) (*Candidacy, error) {
	if err := checkCandidate(name, id, value); err != nil {
		return nil, err
	}
	c, ok := kit.Lookup[*Candidacy](lease, candidateHold(name, id))
	if !ok {
		return nil, fmt.Errorf("candidate %q in %q: %w", id, name, kit.ErrNotHeld)
	}
	data, _ := json.Marshal(candidateData{Candidate: id, Value: value})
	if _, err := c.ep.SetChecked(ctx, c.node.Path, data, -1); err != nil { // a lost answer is checked
		return nil, fmt.Errorf("proclaim %q in %q: %w", id, name, err)
	}
	return e.describe(ctx, c)
}

// describe answers a candidacy's current standing.
func (e *Elections) describe(ctx context.Context, c *Candidacy) (*Candidacy, error) {
	parent := path.Dir(c.node.Path)
	children, _, err := c.ep.Children(ctx, parent)
	if err != nil {
		return nil, err
	}
	line := zookeeper.SortBySeq(children)
	out := *c
	if term, err := e.leaderTerm(ctx, c.ep, parent, line); err == nil {
		out.Term = term
	}
	out.Leader = len(line) > 0 && parent+"/"+line[0] == c.node.Path && c.ep.Connected()
	return &out, nil
}

// Resign withdraws the lease's candidate. With requeue it enrols again at the back
// of the line (LeaderSelector-style turns) and returns the new candidacy; without,
// an implicit lease ends with it.
func (e *Elections) Resign(ctx context.Context, lease *kit.Lease, name, id string, requeue bool) (*Candidacy, error) {
	if err := kit.CheckName("election", name); err != nil {
		return nil, err
	}
	if err := kit.CheckName("candidate", id); err != nil {
		return nil, err
	}
	c, err := kit.Take[*Candidacy](lease, candidateHold(name, id))
	if err != nil {
		return nil, err
	}
	if err := c.Release(ctx); err != nil {
		return nil, err
	}
	e.metrics.resignations.Inc()
	if !requeue {
		lease.Released()
		return nil, nil
	}
	return e.enrol(ctx, lease, name, id, c.value, 0)
}

// Inspect reads the election from ZooKeeper.
func (e *Elections) Inspect(ctx context.Context, name string) (*ElectionState, error) {
	if err := kit.CheckName("election", name); err != nil {
		return nil, err
	}
	ep, err := e.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	return e.read(ctx, ep, name)
}

// List returns the names of the elections that have a node.
func (e *Elections) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, e.s, e.dir)
}

// Follow follows election name: however many followers an election has on this
// sidecar, the sidecar holds one set of ZooKeeper watches for it (one on the
// children, one on each candidate's data) and one cache of the line: after a
// change it reads the list and only the candidates' nodes that are new or whose
// data changed; after a reconnect, everything. While the session is suspended the state is
// the last one read, with Suspended and SuspendedSince set, until the session could have
// expired: then it has no leader (see ElectionState). Close the follower when done.
func (e *Elections) Follow(name string) (*kit.Follower[*ElectionState], error) {
	return e.followers.FollowName("election", name)
}

// electionSource reads an election for its follower: a watch on its line and
// one on each candidate's data, each re-armed only when it fires
// (kit.Children), so that a change of leader reads the list and the one new
// node, not every candidate again.
type electionSource struct {
	e    *Elections
	name string
	line kit.Children[candidateNode]
}

func newElectionSource(e *Elections, name string) *electionSource {
	return &electionSource{e: e, name: name, line: kit.Children[candidateNode]{
		Part: childrenPart, Dir: e.parent(name),
		Decode: func(n string, data []byte, st *zookeeper.Stat) (candidateNode, bool) {
			_, seq := zookeeper.SeqOf(n)
			return newCandidateNode(n, data, st), seq
		},
	}}
}

func (s *electionSource) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*ElectionState, error) {
	if err := s.line.Refresh(ctx, ep, w); err != nil {
		return nil, err
	}
	var st *ElectionState
	w.Do(func() { st = s.e.view(s.name, s.line.Pzxid, s.line.Names, s.line.Data) })
	return st, nil
}

func (s *electionSource) Reset() { s.line.Reset() }

func (s *electionSource) Uncertain(last *ElectionState, loaded bool, u kit.Uncertainty) *ElectionState {
	if u.Keep && loaded && last != nil {
		cp := *last
		cp.Suspended, cp.SuspendedSince = true, u.Since
		return &cp
	}
	st := &ElectionState{Name: s.name, Candidates: []Candidate{}, Suspended: true, SuspendedSince: u.Since}
	if last != nil {
		st.Zxid = last.Zxid
	}
	return st
}

func (s *electionSource) Same(a, b *ElectionState) bool { return sameElection(a, b) }

// read lists the election and reads every candidate (pipelined), once.
func (e *Elections) read(ctx context.Context, ep *zookeeper.Epoch, name string) (*ElectionState, error) {
	parent := e.parent(name)
	children, pstat, err := ep.Children(ctx, parent)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return e.view(name, 0, nil, nil), nil // no such election yet: nobody leads
	}
	if err != nil {
		return nil, err
	}
	line := zookeeper.SortBySeq(children)
	nodes, err := ep.GetEach(ctx, parent, line)
	if err != nil {
		return nil, err
	}
	read := make(map[string]candidateNode, len(line))
	for i, c := range nodes {
		if c.Stat != nil { // else deleted meanwhile
			read[line[i]] = newCandidateNode(line[i], c.Data, c.Stat)
		}
	}
	return e.view(name, pstat.Pzxid, line, read), nil
}

const childrenPart = "children"

// candidateNode is what a candidate's node says.
type candidateNode struct {
	id, value    string
	since        time.Time
	czxid, mzxid int64
}

func newCandidateNode(n string, data []byte, st *zookeeper.Stat) candidateNode {
	id, value := decodeCandidate(data, n)
	return candidateNode{id: id, value: value, since: time.UnixMilli(st.Ctime).UTC(), czxid: st.Czxid, mzxid: st.Mzxid}
}

// view is the election whose line lists names (pzxid: the line's last
// change, 0 when it has no node) with the candidates' nodes read: the line in
// sequence order, the first read one leading. A listed node not read (deleted
// meanwhile) is left out: the line's watch reports it. A candidate's since is
// when it enrolled (its node's creation), the leader's when it began to lead
// (line.Grants).
func (e *Elections) view(name string, pzxid int64, names []string, read map[string]candidateNode) *ElectionState {
	st := &ElectionState{Name: name, Candidates: []Candidate{}, Zxid: pzxid}
	live := make([]string, 0, len(names))
	for _, n := range zookeeper.SortBySeq(names) {
		if _, ok := read[n]; ok {
			live = append(live, n)
		}
	}
	head := min(1, len(live))
	granted := e.grants.Read(e.parent(name), live[:head], live[head:])
	for _, n := range live {
		c := read[n]
		if st.Leader == nil {
			since, ok := granted[n]
			if !ok {
				since = c.since
			}
			st.Leader = &ElectionLeader{Candidate: c.id, Value: c.value, Term: c.czxid, Since: since}
		}
		st.Candidates = append(st.Candidates, Candidate{Candidate: c.id, Value: c.value, Since: c.since})
		st.Zxid = max(st.Zxid, c.mzxid)
	}
	return st
}

func decodeCandidate(data []byte, node string) (id, value string) {
	var d candidateData
	if json.Unmarshal(data, &d) == nil && d.Candidate != "" {
		return d.Candidate, d.Value
	}
	if len(data) > 0 {
		return string(data), ""
	}
	return node, ""
}

func sameElection(a, b *ElectionState) bool {
	if a == nil || b == nil || a.Suspended != b.Suspended || !a.SuspendedSince.Equal(b.SuspendedSince) ||
		a.Term() != b.Term() || len(a.Candidates) != len(b.Candidates) {
		return false
	}
	if a.Leader != nil && a.Leader.Value != b.Leader.Value {
		return false
	}
	for i := range a.Candidates {
		if a.Candidates[i] != b.Candidates[i] {
			return false
		}
	}
	return true
}

type electionMetrics struct {
	candidates   prometheus.Gauge
	resignations prometheus.Counter
	watches      prometheus.Gauge
}

func newElectionMetrics(reg prometheus.Registerer) electionMetrics {
	f := promauto.With(reg)
	return electionMetrics{
		candidates: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_election_candidates", Help: "Candidates enrolled by leases of this sidecar.",
		}),
		resignations: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_election_resignations_total", Help: "Resignations (requeues included).",
		}),
		watches: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_election_watched", Help: "Elections this sidecar follows with one ZooKeeper watch each, however many streams and long-polls follow them.",
		}),
	}
}

// NewCandidateID returns a fresh candidate id for a candidate that gave none.
func NewCandidateID() string { return "c-" + kit.NewID() }
