package acl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The ACL check. With credentials every node the sidecar creates is
// creator-only (ForCreate), but the root, or a recipe parent, may have been
// created before by someone else, with an ACL open to anyone. ZooKeeper checks
// create and delete permission on the parent, so under such a node any client
// may delete what the sidecar keeps there (a lock holder's node) or create
// what it would otherwise create itself. The Session therefore has a Checker
// read the ACL of the root and of every recipe parent (Add) at every connect
// and reconnect, and again every Config.Every (RecheckEvery while one is open
// or a check failed: ZooKeeper fires no watch when an ACL changes), and report
// those open to anyone (Report).
//
// A node is open when world:anyone has any permission but READ on it: CREATE
// and DELETE let anyone put nodes under it or take them away, ADMIN lets anyone
// set its ACL (to open it entirely), WRITE lets anyone change its data. READ
// alone shows child names only. A node whose ACL the sidecar may not read
// counts as open: its ACL cannot be shown to be closed. The ancestors of the
// root are not checked: a node with children cannot be deleted, and the root
// always has some once the sidecar has used it.

// DefaultCheckEvery and RecheckEvery are how often the ACLs are read again
// besides at every connect: every Config.Every (by default DefaultCheckEvery)
// while none is open, every RecheckEvery (or Every when shorter) while one is,
// so that a fixed one is seen soon, or the last check failed.
const (
	DefaultCheckEvery = 30 * time.Second
	RecheckEvery      = 5 * time.Second
)

// Open is a node whose ACL lets anyone change it.
type Open struct {
	Path string
	// World is what world:anyone may do there, in zkCli's letters ("cdrwa"),
	// or "unknown" when the sidecar may not read the ACL.
	World string
}

// Report is what the last ACL check found.
type Report struct {
	// Checked tells whether a check has completed since the start; never
	// without credentials (every node is open to anyone then, by design).
	Checked bool
	// Open lists the open nodes, by path; none when not Checked.
	Open []Open
}

// Config configures a Checker.
type Config struct {
	// Root is the sidecar's root node, checked with the recipe parents.
	Root string
	// Every is how often to check while nothing is open (> 0).
	Every time.Duration
	// Timeout bounds each check (all its reads).
	Timeout time.Duration
	// Require makes Ready fail until a check has found nothing open.
	Require bool
	// Logger receives the warnings of open nodes.
	Logger *slog.Logger
	// Registerer receives the check's gauge; nil registers nothing.
	Registerer prometheus.Registerer
}

// Checker is the state of the ACL checks of one Session: the recipe parents,
// the last report, the warnings given. Its methods may be called from any
// goroutine.
type Checker struct {
	cfg Config
	// openNodes is how many nodes the last check found open.
	openNodes prometheus.Gauge
	added     chan struct{} // Add added a parent: check again (buffered, 1)

	mu     sync.Mutex
	dirs   []string // the recipe parents, in the order Add named them
	report Report
	// warned maps the open nodes warned of in session warnedIn to the
	// permissions named.
	warned   map[string]string
	warnedIn int64
}

// NewChecker returns a Checker that has checked nothing yet; Run checks.
func NewChecker(cfg Config) *Checker {
	f := promauto.With(cfg.Registerer)
	c := &Checker{cfg: cfg, added: make(chan struct{}, 1), openNodes: f.NewGauge(prometheus.GaugeOpts{
		Name: "coord_zk_open_acl_nodes",
		Help: "Nodes among the root and the recipe parents whose ACL lets anyone (world:anyone) more than read them, at the last check; checked only with ZooKeeper credentials.",
	})}
	return c
}

// Add adds the recipe parent p to the nodes checked, and has Run check
// again at once when p is new.
func (c *Checker) Add(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.dirs, p) {
		c.dirs = append(c.dirs, p)
		select {
		case c.added <- struct{}{}:
		default:
		}
	}
}

// Report returns what the last check found.
func (c *Checker) Report() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.report
	r.Open = slices.Clone(r.Open)
	return r
}

// Conn is a connected ZooKeeper session, as the checks use it.
type Conn interface {
	// ID is the session's id.
	ID() int64
	// Connects counts the times the session became connected.
	Connects() uint64
	// GetACL reads a node's ACL.
	GetACL(ctx context.Context, p string) ([]zk.ACL, error)
}

// Run runs the checks, and returns once stop is closed: at once whenever a
// session becomes connected (current returns another Conn, or the same one
// with another Connects: a reconnect) and when Add adds a parent, then
// periodically. changed returns a channel closed at the session's next change
// of state; current returns the connected session, nil when none is.
func (c *Checker) Run(stop <-chan struct{}, changed func() <-chan struct{}, current func() Conn) {
	var seen Conn
	var seenConnects uint64
	var due <-chan time.Time
	for {
		next := changed()
		if conn := current(); conn != nil && (conn != seen || conn.Connects() != seenConnects) {
			seen, seenConnects = conn, conn.Connects()
			due = time.After(c.check(conn))
		}
		select {
		case <-stop:
			return
		case <-next:
		case <-c.added:
			if conn := current(); conn != nil && conn == seen {
				due = time.After(c.check(conn))
			}
		case <-due:
			after := c.recheck()
			if conn := current(); conn != nil {
				after = c.check(conn)
			}
			due = time.After(after)
		}
	}
}

// check reads the ACL of the root and of every recipe parent on conn, records
// what is open, logs what changed, and returns when to check next. A node
// that does not exist is not open (the sidecar creates it creator-only). A
// check that fails leaves the last report as it was.
func (c *Checker) check(conn Conn) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	c.mu.Lock()
	paths := append([]string{c.cfg.Root}, c.dirs...)
	c.mu.Unlock()
	var open []Open
	for _, p := range paths {
		acl, err := conn.GetACL(ctx, p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case errors.Is(err, zk.ErrNoAuth):
			open = append(open, Open{Path: p, World: "unknown"})
		case err != nil:
			c.cfg.Logger.Debug("zookeeper ACL check failed; retrying", "path", p, "err", err)
			return c.recheck()
		default:
			if w := worldPerms(acl); w != "" {
				open = append(open, Open{Path: p, World: w})
			}
		}
	}
	slices.SortFunc(open, func(a, b Open) int { return strings.Compare(a.Path, b.Path) })
	c.record(conn.ID(), open)
	if len(open) > 0 {
		return c.recheck()
	}
	return c.cfg.Every
}

// recheck is when to check next while a node is open or the last check
// failed: RecheckEvery, or Config.Every when shorter.
func (c *Checker) recheck() time.Duration { return min(RecheckEvery, c.cfg.Every) }

// record makes open the report, sets the gauge, warns of every node open
// that was not warned of in this session with the same permissions, and says
// when one is closed again.
func (c *Checker) record(session int64, open []Open) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.report = Report{Checked: true, Open: open}
	c.openNodes.Set(float64(len(open)))
	if c.warnedIn != session {
		c.warned, c.warnedIn = map[string]string{}, session
	}
	now := map[string]bool{}
	for _, o := range open {
		now[o.Path] = true
		if c.warned[o.Path] == o.World {
			continue
		}
		c.warned[o.Path] = o.World
		msg := "zookeeper node open to anyone: any ZooKeeper client may create or delete the sidecar's nodes under it"
		if c.cfg.Require {
			msg += "; the sidecar is not ready until it is closed (--zk-require-acl)"
		}
		c.cfg.Logger.Warn(msg, "path", o.Path, "world", o.World,
			"fix", "zkCli: addauth digest <user>:<password>, then setAcl -R "+o.Path+" auth::cdrwa (docs/SECURITY.md)")
	}
	for p := range c.warned {
		if !now[p] {
			delete(c.warned, p)
			c.cfg.Logger.Info("zookeeper node no longer open to anyone", "path", p)
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

// Ready tells whether the ACL check lets the sidecar be ready: always
// without Config.Require; with it, once a check has found nothing open.
func (c *Checker) Ready() error {
	if !c.cfg.Require {
		return nil
	}
	r := c.Report()
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
