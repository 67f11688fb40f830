package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The ACL check. With credentials every node the sidecar creates is
// creator-only (security.go), but the root, or a recipe parent, may have been
// created before by someone else, with an ACL open to anyone. ZooKeeper checks
// create and delete permission on the parent, so under such a node any client
// may delete what the sidecar keeps there (a lock holder's node) or create
// what it would otherwise create itself. The Session therefore reads the ACL
// of the root and of every recipe parent (Dir) at every connect and reconnect,
// and again every Config.ACLCheckEvery (ACLRecheckEvery while one is open or a
// check failed: ZooKeeper fires no watch when an ACL changes), and reports
// those open to anyone (ACLs).
//
// A node is open when world:anyone has any permission but READ on it: CREATE
// and DELETE let anyone put nodes under it or take them away, ADMIN lets anyone
// set its ACL (to open it entirely), WRITE lets anyone change its data. READ
// alone shows child names only. A node whose ACL the sidecar may not read
// counts as open: its ACL cannot be shown to be closed. The ancestors of the
// root are not checked: a node with children cannot be deleted, and the root
// always has some once the sidecar has used it.

// DefaultACLCheckEvery and ACLRecheckEvery are how often the ACLs are read
// again besides at every connect: every Config.ACLCheckEvery (by default
// DefaultACLCheckEvery) while none is open, every ACLRecheckEvery (or
// ACLCheckEvery when shorter) while one is, so that a fixed one is seen soon,
// or the last check failed.
const (
	DefaultACLCheckEvery = 30 * time.Second
	ACLRecheckEvery      = 5 * time.Second
)

// OpenACL is a node whose ACL lets anyone change it.
type OpenACL struct {
	Path string
	// World is what world:anyone may do there, in zkCli's letters ("cdrwa"),
	// or "unknown" when the sidecar may not read the ACL.
	World string
}

// ACLReport is what the last ACL check found.
type ACLReport struct {
	// Checked tells whether a check has completed since the start; never
	// without credentials (every node is open to anyone then, by design).
	Checked bool
	// Open lists the open nodes, by path; none when not Checked.
	Open []OpenACL
}

// aclCheck is the state of the ACL checks.
type aclCheck struct {
	mu     sync.Mutex
	dirs   []string      // the recipe parents, in the order Dir named them
	added  chan struct{} // Dir added one: check again (buffered, 1)
	report ACLReport
	// warned maps the open nodes warned of in session warnedIn to the
	// permissions named.
	warned   map[string]string
	warnedIn int64
}

// Dir returns the recipe parent root/name, under which a recipe keeps its
// nodes, and adds it to the nodes whose ACL the Session checks.
func (s *Session) Dir(name string) string {
	p := path.Join(s.cfg.Root, name)
	s.acls.mu.Lock()
	defer s.acls.mu.Unlock()
	if !slices.Contains(s.acls.dirs, p) {
		s.acls.dirs = append(s.acls.dirs, p)
		select {
		case s.acls.added <- struct{}{}:
		default:
		}
	}
	return p
}

// ACLs returns what the last ACL check found.
func (s *Session) ACLs() ACLReport {
	s.acls.mu.Lock()
	defer s.acls.mu.Unlock()
	r := s.acls.report
	r.Open = slices.Clone(r.Open)
	return r
}

// GetACL reads a node's ACL.
func (ep *Epoch) GetACL(ctx context.Context, p string) ([]zk.ACL, error) {
	return call(ctx, ep, func(c *zk.Conn) ([]zk.ACL, error) {
		acl, _, err := c.GetACL(p)
		return acl, err
	})
}

// checkACLs runs the ACL checks until Close: at once whenever a session
// becomes connected (a new one or the same one again) and when Dir adds a
// parent, then periodically.
func (s *Session) checkACLs() {
	var seen *Epoch
	var seenConnects uint64
	var due <-chan time.Time
	for {
		changed := s.Changed()
		ep, err := s.Current()
		if errors.Is(err, ErrClosed) {
			return
		}
		if err == nil && (ep != seen || ep.Connects() != seenConnects) {
			seen, seenConnects = ep, ep.Connects()
			due = time.After(s.checkACLsOnce(ep))
		}
		select {
		case <-s.closing:
			return
		case <-changed:
		case <-s.acls.added:
			if ep, err := s.Current(); err == nil && ep == seen {
				due = time.After(s.checkACLsOnce(ep))
			}
		case <-due:
			next := s.aclRecheckEvery()
			if ep, err := s.Current(); err == nil {
				next = s.checkACLsOnce(ep)
			}
			due = time.After(next)
		}
	}
}

// checkACLsOnce reads the ACL of the root and of every recipe parent under
// ep, records what is open, logs what changed, and returns when to check next.
// A node that does not exist is not open (the sidecar creates it
// creator-only). A check that fails leaves the last report as it was.
func (s *Session) checkACLsOnce(ep *Epoch) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	defer cancel()
	s.acls.mu.Lock()
	paths := append([]string{s.cfg.Root}, s.acls.dirs...)
	s.acls.mu.Unlock()
	var open []OpenACL
	for _, p := range paths {
		acl, err := ep.GetACL(ctx, p)
		switch {
		case errors.Is(err, ErrNoNode):
			continue
		case errors.Is(err, ErrNoAuth):
			open = append(open, OpenACL{Path: p, World: "unknown"})
		case err != nil:
			s.log.Debug("zookeeper ACL check failed; retrying", "path", p, "err", err)
			return s.aclRecheckEvery()
		default:
			if w := worldPerms(acl); w != "" {
				open = append(open, OpenACL{Path: p, World: w})
			}
		}
	}
	slices.SortFunc(open, func(a, b OpenACL) int { return strings.Compare(a.Path, b.Path) })
	s.recordACLs(ep.ID(), open)
	if len(open) > 0 {
		return s.aclRecheckEvery()
	}
	return s.cfg.ACLCheckEvery
}

func (s *Session) aclRecheckEvery() time.Duration { return min(ACLRecheckEvery, s.cfg.ACLCheckEvery) }

// recordACLs makes open the report, sets the gauge, warns of every node open
// that was not warned of in this session with the same permissions, and says
// when one is closed again.
func (s *Session) recordACLs(session int64, open []OpenACL) {
	a := &s.acls
	a.mu.Lock()
	defer a.mu.Unlock()
	a.report = ACLReport{Checked: true, Open: open}
	s.metrics.openACLs.Set(float64(len(open)))
	if a.warnedIn != session {
		a.warned, a.warnedIn = map[string]string{}, session
	}
	now := map[string]bool{}
	for _, o := range open {
		now[o.Path] = true
		if a.warned[o.Path] == o.World {
			continue
		}
		a.warned[o.Path] = o.World
		msg := "zookeeper node open to anyone: any ZooKeeper client may create or delete the sidecar's nodes under it"
		if s.cfg.RequireACL {
			msg += "; the sidecar is not ready until it is closed (--zk-require-acl)"
		}
		s.log.Warn(msg, "path", o.Path, "world", o.World,
			"fix", "zkCli: addauth digest <user>:<password>, then setAcl -R "+o.Path+" auth::cdrwa (docs/SECURITY.md)")
	}
	for p := range a.warned {
		if !now[p] {
			delete(a.warned, p)
			s.log.Info("zookeeper node no longer open to anyone", "path", p)
		}
	}
}

// worldPerms returns what world:anyone may do on a node with acl beyond
// reading it, in zkCli's letters ("" when nothing).
func worldPerms(acl []zk.ACL) string {
	var perms int32
	for _, e := range acl {
		if e.Scheme == "world" && e.ID == "anyone" {
			perms |= e.Perms
		}
	}
	if perms&^zk.PermRead == 0 {
		return ""
	}
	var b strings.Builder
	for _, p := range []struct {
		bit    int32
		letter byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if perms&p.bit != 0 {
			b.WriteByte(p.letter)
		}
	}
	return b.String()
}

// ACLReady tells whether the ACL check lets the sidecar be ready: always
// without Config.RequireACL; with it, once a check has found nothing open.
func (s *Session) ACLReady() error {
	if !s.cfg.RequireACL {
		return nil
	}
	r := s.ACLs()
	switch {
	case !r.Checked:
		return errors.New("the ZooKeeper ACLs of the root and recipe parents are not checked yet (--zk-require-acl)")
	case len(r.Open) > 0:
		paths := make([]string, len(r.Open))
		for i, o := range r.Open {
			paths[i] = o.Path
		}
		return fmt.Errorf("ZooKeeper nodes open to anyone (--zk-require-acl): %s; see docs/SECURITY.md", strings.Join(paths, ", "))
	}
	return nil
}
