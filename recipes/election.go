package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
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
	s       *Session
	dir     string
	metrics electionMetrics

	watches *sharedWatches[*electionWatch]
}

// Candidacy is one candidate enrolled by a lease.
type Candidacy struct {
	Name      string
	Candidate string
	Lease     string
	// Leader is true when this candidate led at the moment of the answer, under a
	// connected session (never while suspended).
	Leader bool
	// Term is the current leader's term (0 when nobody leads).
	Term  int64
	node  string
	guid  string
	value string
}

// ElectionState is an election as anyone can see it.
type ElectionState struct {
	Name       string
	Leader     *ElectionLeader
	Candidates []Candidate // in line order, the leader first
	// Zxid is the newest change the state reflects (for event ids).
	Zxid int64
	// Suspended is set while this sidecar's session is not connected: it cannot
	// vouch for any leader then, so Leader is nil.
	Suspended bool
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

// ErrCandidateExists means a live candidate already has that id in that election.
var ErrCandidateExists = errors.New("candidate exists")

const candidateKind = "candidate"

// maxValueBytes bounds a candidate's value (the node's data stays small).
const maxValueBytes = 4096

type candidateData struct {
	Candidate string `json:"candidate"`
	Value     string `json:"value"`
}

// NewElections returns the election recipe over a session.
func NewElections(s *Session, reg prometheus.Registerer) *Elections {
	m := newElectionMetrics(reg)
	return &Elections{
		s: s, dir: path.Join(s.Root(), "elections"), metrics: m,
		watches: newSharedWatches[*electionWatch](m.watches),
	}
}

func (e *Elections) parent(name string) string { return e.dir + "/" + name }

func candidateHold(name, id string) Hold { return Hold{Kind: candidateKind, Name: name + "/" + id} }

// Campaign enrols candidate id (with value) in election name for lease, at the back
// of the line, and waits up to wait (0: not at all) to lead. It answers with the
// candidacy, still enrolled when it does not lead yet. ErrCandidateExists when a
// live candidate has that id in that election (on any client).
func (e *Elections) Campaign(ctx context.Context, lease *Lease, name, id, value string, wait time.Duration) (*Candidacy, error) {
	if err := CheckName("election", name); err != nil {
		return nil, err
	}
	if err := CheckName("candidate", id); err != nil {
		return nil, err
	}
	if len(value) > maxValueBytes {
		return nil, fmt.Errorf("value of %d bytes, above %d: %w", len(value), maxValueBytes, ErrInvalidArgument)
	}
	h := candidateHold(name, id)
	if _, ok, err := lease.reserve(h); err != nil {
		return nil, err
	} else if ok {
		return nil, fmt.Errorf("candidate %q in %q: %w", id, name, ErrCandidateExists)
	}
	if lease.Implicit {
		defer lease.Pin()() // the TTL of an implicit lease counts from the answer
	}
	c, err := e.enrol(ctx, lease, h, name, id, value, wait)
	if err != nil {
		lease.unreserve(h)
		return nil, err
	}
	return c, nil
}

func (e *Elections) enrol(ctx context.Context, lease *Lease, h Hold, name, id, value string, wait time.Duration) (*Candidacy, error) {
	ep := lease.ep
	if err := lease.connected(); err != nil {
		return nil, fmt.Errorf("election %q: %w", name, err)
	}
	st, err := e.read(ctx, ep, name, nil)
	if err != nil {
		return nil, err
	}
	for _, c := range st.Candidates {
		if c.Candidate == id {
			return nil, fmt.Errorf("candidate %q in %q: %w", id, name, ErrCandidateExists)
		}
	}
	data, _ := json.Marshal(candidateData{Candidate: id, Value: value})
	parent := e.parent(name)
	guid := newGUID()
	made, err := createProtected(ctx, ep, parent, guid, "latch-", data, true)
	if err != nil {
		cleanupProtected(ep, parent, guid, "")
		return nil, err
	}
	node := made.Path
	place, err := awaitHead(ctx, ep, made, wait, lease.Ending())
	if err != nil {
		cleanupProtected(ep, parent, guid, node)
		return nil, fmt.Errorf("election %q: %w", name, err)
	}
	c := &Candidacy{Name: name, Candidate: id, Lease: lease.ID, node: node, guid: guid, value: value}
	release := func(ctx context.Context) error { return deleteProtected(ctx, ep, parent, guid, node) }
	if err := lease.grant(h, c, release); err != nil {
		cleanupProtected(ep, parent, guid, node)
		return nil, err
	}
	e.metrics.candidates.Inc()
	out := *c
	out.Leader = place.Head
	if place.Head {
		out.Term = place.Czxid
	} else if leader, err := e.leaderTerm(ctx, ep, parent, place.Line); err == nil {
		out.Term = leader
	}
	return &out, nil
}

// leaderTerm reads the czxid of the first live node of a line.
func (e *Elections) leaderTerm(ctx context.Context, ep *epoch, parent string, line []string) (int64, error) {
	for _, n := range line {
		var st *zk.Stat
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			_, st, err = c.Exists(parent + "/" + n)
			return err
		})
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
func (e *Elections) Proclaim(ctx context.Context, lease *Lease, name, id, value string) (*Candidacy, error) {
	if err := CheckName("election", name); err != nil {
		return nil, err
	}
	if err := CheckName("candidate", id); err != nil {
		return nil, err
	}
	if len(value) > maxValueBytes {
		return nil, fmt.Errorf("value of %d bytes, above %d: %w", len(value), maxValueBytes, ErrInvalidArgument)
	}
	v, ok := lease.value(candidateHold(name, id))
	if !ok {
		return nil, fmt.Errorf("candidate %q in %q: %w", id, name, ErrNotHeld)
	}
	c := v.(*Candidacy)
	ep := lease.ep
	data, _ := json.Marshal(candidateData{Candidate: id, Value: value})
	err := ep.call(ctx, func(conn *zk.Conn) error {
		_, err := conn.Set(c.node, data, -1)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("proclaim %q in %q: %w", id, name, err)
	}
	return e.describe(ctx, ep, c)
}

// describe answers a candidacy's current standing.
func (e *Elections) describe(ctx context.Context, ep *epoch, c *Candidacy) (*Candidacy, error) {
	var children []string
	parent := path.Dir(c.node)
	err := ep.call(ctx, func(conn *zk.Conn) error {
		var err error
		children, _, err = conn.Children(parent)
		return err
	})
	if err != nil {
		return nil, err
	}
	line := sortBySeq(children)
	out := *c
	if term, err := e.leaderTerm(ctx, ep, parent, line); err == nil {
		out.Term = term
	}
	cur, _ := e.s.current()
	out.Leader = len(line) > 0 && parent+"/"+line[0] == c.node && cur == ep
	return &out, nil
}

// Resign withdraws the lease's candidate. With requeue it enrols again at the back
// of the line (LeaderSelector-style turns) and returns the new candidacy; without,
// an implicit lease ends with it.
func (e *Elections) Resign(ctx context.Context, lease *Lease, name, id string, requeue bool) (*Candidacy, error) {
	if err := CheckName("election", name); err != nil {
		return nil, err
	}
	if err := CheckName("candidate", id); err != nil {
		return nil, err
	}
	h := candidateHold(name, id)
	held, err := lease.take(h)
	if err != nil {
		return nil, err
	}
	c := held.value.(*Candidacy)
	if err := held.release(ctx); err != nil {
		return nil, err
	}
	e.metrics.candidates.Dec()
	e.metrics.resignations.Inc()
	if !requeue {
		lease.released()
		return nil, nil
	}
	if _, _, err := lease.reserve(h); err != nil {
		return nil, err
	}
	nc, err := e.enrol(ctx, lease, h, name, id, c.value, 0)
	if err != nil {
		lease.unreserve(h)
		return nil, err
	}
	return nc, nil
}

// Inspect reads the election from ZooKeeper.
func (e *Elections) Inspect(ctx context.Context, name string) (*ElectionState, error) {
	if err := CheckName("election", name); err != nil {
		return nil, err
	}
	ep, err := e.s.current()
	if err != nil {
		return nil, err
	}
	return e.read(ctx, ep, name, nil)
}

// read lists the election and reads every candidate (pipelined). With w, it also
// leaves watches for w: on the children, and on each candidate's data.
func (e *Elections) read(ctx context.Context, ep *epoch, name string, w *electionWatch) (*ElectionState, error) {
	parent := e.parent(name)
	st := &ElectionState{Name: name, Candidates: []Candidate{}}
	var children []string
	var pstat *zk.Stat
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		if w != nil && w.needsChildWatch() {
			var ch <-chan zk.Event
			children, pstat, ch, err = c.ChildrenW(parent)
			if err == nil {
				w.watchChildren(ch)
			}
			return err
		}
		children, pstat, err = c.Children(parent)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
		if w != nil {
			// Watch for the election to appear.
			err = ep.call(ctx, func(c *zk.Conn) error {
				if !w.needsChildWatch() {
					return nil
				}
				ok, _, ch, err := c.ExistsW(parent)
				switch {
				case err != nil:
				case ok:
					w.poke() // created meanwhile: read it (and watch its children) now
				default:
					w.watchChildren(ch) // fires when the election appears
				}
				return err
			})
		}
		if err != nil {
			return nil, err
		}
		return st, nil // no such election yet: nobody leads
	}
	if err != nil {
		return nil, err
	}
	st.Zxid = pstat.Pzxid
	line := sortBySeq(children)
	type entry struct {
		data []byte
		stat *zk.Stat
		gone bool
	}
	entries := make([]entry, len(line))
	fns := make([]func() error, 0, len(line))
	for i, n := range line {
		p := parent + "/" + n
		fns = append(fns, func() error {
			return ep.call(ctx, func(c *zk.Conn) error {
				var err error
				if w != nil && w.needsDataWatch(n) {
					var ch <-chan zk.Event
					entries[i].data, entries[i].stat, ch, err = c.GetW(p)
					if err == nil {
						w.watchData(n, ch)
					}
				} else {
					entries[i].data, entries[i].stat, err = c.Get(p)
				}
				if errors.Is(err, zk.ErrNoNode) {
					entries[i].gone = true
					return nil
				}
				return err
			})
		})
	}
	if len(fns) > 0 {
		if err := parallel(fns...); err != nil {
			return nil, err
		}
	}
	for i, en := range entries {
		if en.gone {
			continue // deleted meanwhile: the children watch reports it
		}
		id, value := decodeCandidate(en.data, line[i])
		since := time.UnixMilli(en.stat.Ctime).UTC()
		if st.Leader == nil {
			st.Leader = &ElectionLeader{Candidate: id, Value: value, Term: en.stat.Czxid, Since: since}
		}
		st.Candidates = append(st.Candidates, Candidate{Candidate: id, Value: value, Since: since})
		st.Zxid = max(st.Zxid, en.stat.Mzxid)
	}
	return st, nil
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

type electionMetrics struct {
	candidates   prometheus.Gauge
	resignations prometheus.Counter
	watches      prometheus.Gauge
}

func newElectionMetrics(reg prometheus.Registerer) electionMetrics {
	m := electionMetrics{
		candidates: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_election_candidates", Help: "Candidates enrolled by leases of this sidecar.",
		}),
		resignations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_election_resignations_total", Help: "Resignations (requeues included).",
		}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_election_watched", Help: "Elections this sidecar follows with one ZooKeeper watch each, however many streams and long-polls follow them.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.candidates, m.resignations, m.watches)
	}
	return m
}

// NewCandidateID returns a fresh candidate id for a candidate that gave none.
func NewCandidateID() string { return "c-" + newID() }
