package zookeeper_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/acl"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The ACLs are read again at every reconnect of the session and at the
// connect of every new one, not only at start: with the periodic check an
// hour away, a root opened while the connection was down is found open as
// soon as the session is back, and again after the session was lost. Each time
// it opens, it is warned of once.
func TestACLCheckedAtReconnectAndLoss(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	anon, app := zktest.Connect(t, zkc.Servers(), 4*time.Second), appConn(t, zkc.Servers())
	if _, err := anon.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, zkc.Server(0))
	logs := &lockedLog{}
	s := zookeepertest.Start(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Root: root, Auth: appCreds,
		Timeout: 2 * time.Second, ACLCheckEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	locks := s.Dir("locks")
	if locks != root+"/locks" {
		t.Fatalf("Dir(locks) = %s", locks)
	}

	setACL := func(acl []zk.ACL) {
		t.Helper()
		if _, err := app.SetACL(root, acl, -1); err != nil {
			t.Fatal(err)
		}
	}
	waitOpen := func(what string, want bool) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, what, func() bool {
			r := s.ACLs()
			open := slices.Equal(r.Open, []acl.Open{{Path: root, World: "cdrwa"}})
			return r.Checked && (open == want) && (want || len(r.Open) == 0)
		})
	}
	waitOpen("the root found open at start", true)
	if r := s.ACLs(); len(r.Open) != 1 {
		t.Fatalf("open: %v; want the root only (locks does not exist)", r.Open)
	}
	setACL(zk.AuthACL(zk.PermAll))
	waitOpen("the closed root seen closed (rechecked while open)", false)

	// Reopened while the connection is down: found at the reconnect.
	proxy.Cut()
	testutil.Eventually(t, 10*time.Second, "session suspended", func() bool { return s.State() != zookeeper.StateConnected })
	setACL(zk.WorldACL(zk.PermAll))
	proxy.Restore()
	waitOpen("the root reopened during a cut found open at the reconnect", true)
	setACL(zk.AuthACL(zk.PermAll))
	waitOpen("closed again", false)

	// Reopened while the session is lost: found at the new session's connect.
	zookeepertest.Expire(t, s, zkc.Servers(), func() {
		proxy.Cut()
		testutil.Eventually(t, 10*time.Second, "session suspended", func() bool { return s.State() != zookeeper.StateConnected })
		setACL(zk.WorldACL(zk.PermAll))
	}, proxy.Restore)
	waitOpen("the root reopened during a loss found open in the new session", true)

	if n := strings.Count(logs.String(), `level=WARN msg="zookeeper node open to anyone`); n != 3 {
		t.Fatalf("%d warnings, want 3 (one each time it opened):\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), `msg="zookeeper node no longer open to anyone"`); n != 2 {
		t.Fatalf("%d notes of the root closed, want 2:\n%s", n, logs)
	}
}
