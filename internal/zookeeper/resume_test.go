package zookeeper_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/transport"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

// These tests pin the takeover of a session through the dialer (resume.go): a
// go-zookeeper whose handshake no longer goes through it as one rewritable
// write, or whose answer cannot be read, fails them (WaitResume is then
// ErrResumeTooLate and the session id a new one).

// holdEphemeral makes an ephemeral node under s's root and returns it with
// what a successor needs to resume s's session.
func holdEphemeral(t *testing.T, ctx context.Context, s *zookeeper.Session) (string, transport.Resumable) {
	t.Helper()
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	parent := s.Root() + "/held"
	if err := ep.EnsurePersistent(ctx, parent); err != nil {
		t.Fatal(err)
	}
	node := parent + "/e"
	if _, err := ep.Create(ctx, node, []byte("held"), zookeeper.Ephemeral); err != nil {
		t.Fatal(err)
	}
	r, ok := ep.Resumable()
	if !ok || r.ID != ep.ID() || len(r.Password) == 0 || r.Timeout <= 0 {
		t.Fatalf("Resumable = %+v, %v; want session 0x%x with a password and a timeout", r, ok, ep.ID())
	}
	return node, r
}

// ownerOf is the session owning the ephemeral node, 0 if there is none.
func ownerOf(t *testing.T, conn *zk.Conn, node string) int64 {
	t.Helper()
	ok, st, err := conn.Exists(node)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return 0
	}
	return st.EphemeralOwner
}

// resumes is the value of coord_zk_session_resumes_total{outcome}.
func resumes(t *testing.T, g prometheus.Gatherer, outcome string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "coord_zk_session_resumes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no coord_zk_session_resumes_total{outcome=%q}", outcome)
	return 0
}

// checkResumed fails t unless s took over session r: WaitResume says so, it
// is s's session, the node is still r's, s can delete it, and s saves the
// same id and password for its own successor.
func checkResumed(t *testing.T, ctx context.Context, s *zookeeper.Session, r transport.Resumable, watcher *zk.Conn, node string) {
	t.Helper()
	if err := s.WaitResume(ctx); err != nil {
		t.Fatalf("WaitResume: %v", err)
	}
	info := s.Info()
	if info.SessionID != r.ID || !info.Resumed || info.ResumedAt.IsZero() {
		t.Fatalf("Info = %+v, want session 0x%x resumed", info, r.ID)
	}
	if owner := ownerOf(t, watcher, node); owner != r.ID {
		t.Fatalf("owner of %s after the resume: 0x%x, want 0x%x", node, owner, r.ID)
	}
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := ep.Resumable(); !ok || got.ID != r.ID || !bytes.Equal(got.Password, r.Password) {
		t.Fatalf("Resumable after the resume = %+v, %v; want id 0x%x and the same password", got, ok, r.ID)
	}
	if err := ep.Delete(ctx, node, -1); err != nil {
		t.Fatalf("delete the resumed session's node: %v", err)
	}
	if owner := ownerOf(t, watcher, node); owner != 0 {
		t.Fatalf("%s still there (owner 0x%x) after its delete", node, owner)
	}
}

// A session detached by one Session is taken over by the next, its ephemeral
// node still owned by it: Detach sent no closeSession, nothing expired.
func TestResumeTakesOverADetachedSession(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	cfg := zookeeper.Config{Servers: zkc.Servers(), Root: root, Timeout: 10 * time.Second}
	a := zookeepertest.Start(t, cfg)
	node, r := holdEphemeral(t, ctx, a)
	a.Detach()
	if _, err := a.Current(); !errors.Is(err, zookeeper.ErrClosed) {
		t.Fatalf("Current after Detach: %v, want ErrClosed", err)
	}
	watcher := zktest.Connect(t, zkc.Servers(), 4*time.Second)
	if owner := ownerOf(t, watcher, node); owner != r.ID {
		t.Fatalf("owner of %s after Detach: 0x%x, want 0x%x", node, owner, r.ID)
	}

	reg := prometheus.NewRegistry()
	cfg.Resume, cfg.Registerer = &r, reg
	b := zookeepertest.Start(t, cfg)
	checkResumed(t, ctx, b, r, watcher, node)
	if n := resumes(t, reg, "resumed"); n != 1 {
		t.Fatalf("resumes{resumed} = %v, want 1", n)
	}
}

// The session is resumed through another server of the ensemble than the
// one its predecessor was connected to.
func TestResumeOnAnotherServerOfTheEnsemble(t *testing.T) {
	zkc := zktest.StartEnsemble(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	a := zookeepertest.Start(t, zookeeper.Config{Servers: []string{zkc.Server(0)}, Root: "/resume", Timeout: 10 * time.Second})
	node, r := holdEphemeral(t, ctx, a)
	a.Detach()

	b := zookeepertest.Start(t, zookeeper.Config{Servers: []string{zkc.Server(1)}, Root: "/resume", Timeout: 10 * time.Second, Resume: &r})
	if got := b.Info().Server; got != zkc.Server(1) {
		t.Fatalf("resumed through %s, want %s", got, zkc.Server(1))
	}
	checkResumed(t, ctx, b, r, zktest.Connect(t, []string{zkc.Server(2)}, 4*time.Second), node)
}

// checkTooLate fails t unless s reports that it could not resume session old
// and goes on with a new session of its own, under its first epoch (no loss
// reported), that works.
func checkTooLate(t *testing.T, ctx context.Context, s *zookeeper.Session, reg prometheus.Gatherer, old int64, watcher *zk.Conn) {
	t.Helper()
	if err := s.WaitResume(ctx); !errors.Is(err, transport.ErrResumeTooLate) {
		t.Fatalf("WaitResume: %v, want ErrResumeTooLate", err)
	}
	info := s.Info()
	if info.SessionID == old || info.SessionID == 0 || info.Resumed {
		t.Fatalf("Info = %+v, want a new session, not resumed (old 0x%x)", info, old)
	}
	if n := resumes(t, reg, "too_late"); n != 1 {
		t.Fatalf("resumes{too_late} = %v, want 1", n)
	}
	if n, _ := testutil.MetricValue(t, reg, "coord_zk_session_expirations_total"); n != 0 {
		t.Fatalf("%v sessions reported lost: a refused resume is no loss", n)
	}
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	mine := s.Root() + "/mine"
	if _, err := ep.Create(ctx, mine, nil, zookeeper.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if owner := ownerOf(t, watcher, mine); owner != info.SessionID {
		t.Fatalf("owner of %s: 0x%x, want the new session 0x%x", mine, owner, info.SessionID)
	}
	if got, ok := ep.Resumable(); !ok || got.ID != info.SessionID {
		t.Fatalf("Resumable = %+v, %v; want the new session 0x%x", got, ok, info.SessionID)
	}
}

// Once the detached session has expired, the successor is told it is too
// late and goes on with a new session.
func TestResumeTooLateAfterExpiry(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	cfg := zookeeper.Config{Servers: zkc.Servers(), Root: root, Timeout: 2 * time.Second}
	a := zookeepertest.Start(t, cfg)
	node, r := holdEphemeral(t, ctx, a)
	a.Detach()
	watcher := zktest.Connect(t, zkc.Servers(), 4*time.Second)
	testutil.Eventually(t, 30*time.Second, "the detached session expired", func() bool { return ownerOf(t, watcher, node) == 0 })

	reg := prometheus.NewRegistry()
	cfg.Resume, cfg.Registerer = &r, reg
	b := zookeepertest.Start(t, cfg)
	checkTooLate(t, ctx, b, reg, r.ID, watcher)
}

// A wrong password is refused as too late and leaves the session it named
// alone: the right one still resumes it afterwards, its node still owned.
func TestResumeWithAWrongPassword(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	cfg := zookeeper.Config{Servers: zkc.Servers(), Root: root, Timeout: 10 * time.Second}
	a := zookeepertest.Start(t, cfg)
	node, r := holdEphemeral(t, ctx, a)
	a.Detach()
	watcher := zktest.Connect(t, zkc.Servers(), 4*time.Second)

	wrong := r
	wrong.Password = bytes.Clone(r.Password)
	wrong.Password[0] ^= 0xff
	reg := prometheus.NewRegistry()
	b := zookeepertest.Start(t, zookeeper.Config{Servers: zkc.Servers(), Root: root, Timeout: 10 * time.Second, Resume: &wrong, Registerer: reg})
	checkTooLate(t, ctx, b, reg, r.ID, watcher)
	if owner := ownerOf(t, watcher, node); owner != r.ID {
		t.Fatalf("owner of %s after a wrong password: 0x%x, want 0x%x", node, owner, r.ID)
	}

	cfg.Resume = &r
	c := zookeepertest.Start(t, cfg)
	checkResumed(t, ctx, c, r, watcher, node)
}

// Over TLS the session is resumed the same way (the rewrite is beneath
// go-zookeeper, above TLS); with credentials, which ZooKeeper keeps per
// connection, not per session, the successor adds them again before it
// counts as connected, so it may delete its creator-only nodes.
func TestResumeOverTLS(t *testing.T) {
	ca := testutil.NewCA(t, "zk CA")
	cert, key := ca.Issue(t, "zookeeper", true)
	zkc := zktest.StartTLS(t, zktest.TLS{CertPEM: cert, KeyPEM: key, CAPEM: ca.PEM})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	cfg := zookeeper.Config{Servers: zkc.SecureServers(), Root: "/resume", Timeout: 10 * time.Second, TLS: clientTLS(ca.PEM), Auth: appCreds}
	a := zookeepertest.Start(t, cfg)
	node, r := holdEphemeral(t, ctx, a)
	a.Detach()

	cfg.Resume = &r
	b := zookeepertest.Start(t, cfg)
	checkResumed(t, ctx, b, r, zktest.Connect(t, zkc.Servers(), 4*time.Second), node)
}
