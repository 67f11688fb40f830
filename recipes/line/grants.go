package line

import (
	"path"
	"strings"
	"sync"
	"time"
)

// Grants remembers, for one recipe of this sidecar, when contender nodes were
// granted: a lock's or a read/write lock's holder, an election's leader.
// ZooKeeper keeps no such time: a node's ctime is when it queued, and the
// deletion that granted it leaves no trace but a zxid. What a hold's since is:
//
//   - granted through this sidecar (Granted): the moment it was granted here,
//     exact (a lock grant's acquiredAt);
//   - seen waiting by this sidecar (Waiting, or a Read that listed it behind a
//     holder) and later seen holding: the time of the read that first saw it
//     holding. A follower reads on its watch's notice, so that is the grant
//     within the notice's delivery; it is never before the grant;
//   - holding when this sidecar first saw it: nothing is known here, and the
//     caller shows the node's creation time: exact when the node headed its
//     line from its creation (the usual uncontended case), otherwise the
//     earliest it can have been granted.
//
// Its zero value is ready. Marks of nodes gone are forgotten as reads show
// them gone (this sidecar's own grants when released: Gone).
//
// This sidecar's own marks are kept by node path in one map, apart from the
// marks reads leave by line: a grant and its release (every lock cycle) add
// and remove one entry of a map that lives on, and make no map of a line.
type Grants struct {
	mu sync.Mutex
	// own are the marks of nodes made through this sidecar, by path, until
	// Gone.
	own map[string]grantMark
	// m are the other marks, by parent, then node name; n counts them.
	m map[string]map[string]grantMark
	n int
}

// grantMark is what is known of one node: waiting (at zero) or granted at.
type grantMark struct {
	at time.Time
}

// maxMarks bounds the marks of nodes other clients hold or wait for: past it,
// they are dropped (their holds then show their creation time).
const maxMarks = 1 << 16

// Granted records that node (a path) was granted through this sidecar at at.
func (g *Grants) Granted(node string, at time.Time) { g.setOwn(node, grantMark{at: at.UTC()}) }

// Waiting records that node (a path), made through this sidecar, waits in line
// (a candidate enrolled behind a leader): the first read that sees it holding
// dates its grant.
func (g *Grants) Waiting(node string) { g.setOwn(node, grantMark{}) }

func (g *Grants) setOwn(node string, mk grantMark) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.own == nil {
		g.own = make(map[string]grantMark)
	}
	g.own[node] = mk
}

// Gone forgets node (a path: released through this sidecar).
func (g *Grants) Gone(node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.own, node)
	if len(g.m) == 0 {
		return
	}
	parent, name := path.Split(node)
	parent = strings.TrimSuffix(parent, "/")
	if l, ok := g.m[parent]; ok {
		if _, ok := l[name]; ok {
			delete(l, name)
			g.n--
		}
		if len(l) == 0 {
			delete(g.m, parent)
		}
	}
}

// line is the other marks of parent's line, made when missing (under mu).
func (g *Grants) line(parent string) map[string]grantMark {
	if g.m == nil {
		g.m = make(map[string]map[string]grantMark)
	}
	l, ok := g.m[parent]
	if !ok {
		l = make(map[string]grantMark)
		g.m[parent] = l
	}
	return l
}

// bound drops, past maxMarks marks of others (under mu), all of them.
func (g *Grants) bound() {
	if g.n < maxMarks {
		return
	}
	clear(g.m)
	g.n = 0
}

// Read records one read of the line under parent: the names of holding hold,
// those of waiting wait (every other node of parent is gone). It returns when
// each holder was granted, as far as this sidecar knows (see Grants); a holder
// left out is to be shown with its node's creation time.
func (g *Grants) Read(parent string, holding, waiting []string) map[string]time.Time {
	now := time.Now().UTC()
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.line(parent)
	present := make(map[string]bool, len(holding)+len(waiting))
	out := make(map[string]time.Time, len(holding))
	for _, n := range holding {
		present[n] = true
		if p := parent + "/" + n; g.ownHolds(p, now, out, n) {
			continue
		}
		mk, ok := l[n]
		switch {
		case !ok: // first seen holding: its creation time
		case mk.at.IsZero(): // seen waiting before: granted since
			mk.at = now
			l[n] = mk
			out[n] = now
		default:
			out[n] = mk.at
		}
	}
	for _, n := range waiting {
		present[n] = true
		if _, own := g.own[parent+"/"+n]; own {
			continue
		}
		if _, ok := l[n]; !ok {
			l[n] = grantMark{}
			g.n++
		}
	}
	for n := range l {
		// A node of this line not listed is gone. (This sidecar's own marks go
		// with their release: the listing may predate their node.)
		if !present[n] {
			delete(l, n)
			g.n--
		}
	}
	if len(l) == 0 {
		delete(g.m, parent)
	}
	g.bound()
	return out
}

// ownHolds dates holder n (at path p) in out when it is this sidecar's own
// (a waiting one is granted now), and tells whether it is (under mu).
func (g *Grants) ownHolds(p string, now time.Time, out map[string]time.Time, n string) bool {
	mk, ok := g.own[p]
	if !ok {
		return false
	}
	if mk.at.IsZero() {
		mk.at = now
		g.own[p] = mk
	}
	out[n] = mk.at
	return true
}
