package sidecar_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The ZooKeeper side of the trust boundary (issue 12, items 4 and 5): digest
// credentials with creator-only ACLs, and TLS to the ensemble.

// Two sidecars with the same credentials share every recipe; a ZooKeeper client
// without them can neither change nor read anything they made: not a lock
// holder's node, a queue item, a throughput limit, nor the lease and claim ids
// some nodes carry in their data.
func TestZKAuthSharedRecipesClosedToOthers(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	authFile := sidecartest.WriteFile(t, t.TempDir(), "zk-auth", []byte(sidecartest.AppAuth+"\n"))
	a := sidecartest.Start(t, zkc.Servers(), root, "--zk-auth", sidecartest.AppAuth)
	b := sidecartest.Start(t, zkc.Servers(), root, "--zk-auth-file", authFile)
	shareRecipes(t, a, b)

	// Things that stay: a held lock, a claim, a throughput limit, a
	// double-barrier participant.
	lock := a.Must(t, 201, "POST", "/v1/locks/held?ttl=30s")
	claim := b.Must(t, 200, "POST", "/v1/queues/q/claims?ttl=30s")
	if r, err := a.Do(context.Background(), "PUT", "/v1/throughput/g", strings.NewReader(`{"limit":100}`), "Content-Type", "application/json"); err != nil || r.Status != 200 {
		t.Fatalf("throughput limit: %v %v", r, err)
	}
	if lim := b.Must(t, 200, "GET", "/v1/throughput/g").Body["limit"]; sidecartest.Num(lim) != 100 {
		t.Fatalf("b sees limit %v", lim)
	}
	a.Must(t, 409, "POST", "/v1/double-barriers/d/participants?id=p1&count=2&wait=0s&ttl=30s")

	// What the two made, read with the same credentials.
	app := sidecartest.ZkClient(t, zkc.Servers(), "app:s3cret")
	before := zktest.Snapshot(t, app, root)
	kinds := classifyNodes(before, root, map[string]string{"lock lease": sidecartest.Str(lock.Body["lease"]), "claim id": claim.Header.Get("Claim-Id")})
	t.Logf("nodes: %d; kinds found: %v", len(before), kinds)
	for _, k := range []string{"lock holder's node", "queue item", "throughput limit", "double-barrier participant with its lease id", "node data with the claim id"} {
		if !kinds[k] {
			t.Fatalf("no %s among the nodes made:\n%s", k, zktest.SnapshotDiff(nil, before))
		}
	}

	// Without the credentials: nothing of it can be read, listed, changed or deleted.
	checkNoAccess(t, sidecartest.ZkClient(t, zkc.Servers(), ""), root, before)
	checkNoAccess(t, sidecartest.ZkClient(t, zkc.Servers(), "app:guess"), root, before)
	if diff := zktest.SnapshotDiff(before, zktest.Snapshot(t, app, root)); diff != "" {
		t.Fatalf("the tree changed under clients without the credentials:\n%s", diff)
	}
	// The holder still holds, and b still sees it held.
	if h, _ := b.Must(t, 200, "GET", "/v1/locks/held").Body["holder"].(map[string]any); h == nil {
		t.Fatal("the lock holder is gone")
	}
}

// shareRecipes runs a lock handoff, an election and a queue take across a and b,
// and leaves one item in queue q.
func shareRecipes(t *testing.T, a, b *sidecartest.Sidecar) {
	t.Helper()
	held := a.Must(t, 201, "POST", "/v1/locks/db?ttl=30s")
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, err := b.Do(context.Background(), "POST", "/v1/locks/db?wait=20s&ttl=30s", nil)
		if err != nil {
			r = &sidecartest.Response{Raw: []byte(err.Error())}
		}
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "b waits for the lock", func() bool {
		return sidecartest.Num(a.Must(t, 200, "GET", "/v1/locks/db").Body["waiters"]) == 1
	})
	a.Must(t, 204, "DELETE", "/v1/locks/db?lease="+sidecartest.Str(held.Body["lease"]))
	if r := <-got; r.Status != 201 || sidecartest.Num(r.Body["fencingToken"]) <= sidecartest.Num(held.Body["fencingToken"]) {
		t.Fatalf("b's lock after a's release: %d %s (a's token %v)", r.Status, r.Raw, held.Body["fencingToken"])
	}

	c1 := a.Must(t, 201, "POST", "/v1/elections/e/candidates?id=c1&ttl=30s")
	if c1.Body["leader"] != true {
		t.Fatalf("first candidate: %s", c1.Raw)
	}
	if c2 := b.Must(t, 201, "POST", "/v1/elections/e/candidates?id=c2&ttl=30s"); c2.Body["leader"] != false {
		t.Fatalf("second candidate: %s", c2.Raw)
	}
	a.Must(t, 204, "DELETE", "/v1/elections/e/candidates/c1?lease="+sidecartest.Str(c1.Body["lease"]))
	testutil.Eventually(t, 10*time.Second, "c2 sidecartest.Leads, as b sees it", func() bool {
		l, _ := b.Must(t, 200, "GET", "/v1/elections/e").Body["leader"].(map[string]any)
		return l != nil && l["candidate"] == "c2"
	})

	for _, job := range []string{"job-1", "job-2"} {
		if r, err := a.Do(context.Background(), "POST", "/v1/queues/q/items", strings.NewReader(job)); err != nil || r.Status != 201 {
			t.Fatalf("enqueue: %v %v", r, err)
		}
	}
	if r := b.Must(t, 200, "POST", "/v1/queues/q/take"); string(r.Raw) != "job-1" {
		t.Fatalf("b took %q", r.Raw)
	}
}

// classifyNodes names the kinds of node found under root: those the test
// needs to see closed, and those whose data carries one of the secrets.
func classifyNodes(nodes []zktest.Node, root string, secrets map[string]string) map[string]bool {
	kinds := map[string]bool{}
	for _, n := range nodes {
		rel := strings.TrimPrefix(n.Path, root+"/")
		switch {
		case strings.HasPrefix(rel, "locks/held/"):
			kinds["lock holder's node"] = true
		case strings.HasPrefix(rel, "queues/q/p00/") && strings.Count(rel, "/") == 4:
			kinds["queue item"] = true
		case rel == "throughput/g":
			kinds["throughput limit"] = true
		case strings.HasPrefix(rel, "double-barriers/d/") && n.Stat.EphemeralOwner != 0:
			// Its data is "<count>\n<lease id>".
			if _, lease, ok := strings.Cut(n.Data, "\n"); ok && lease != "" {
				kinds["double-barrier participant with its lease id"] = true
			}
		}
		for what, s := range secrets {
			if s != "" && strings.Contains(n.Data, s) {
				kinds["node data with the "+what] = true
			}
		}
	}
	return kinds
}

// checkNoAccess fails t unless c can neither read, list, write nor delete any
// of nodes (the root is not deleted: it has sidecartest.Children anyway).
func checkNoAccess(t *testing.T, c *zk.Conn, root string, nodes []zktest.Node) {
	t.Helper()
	for _, n := range nodes {
		if data, _, err := c.Get(n.Path); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Get %s = %q, %v; want ErrNoAuth", n.Path, data, err)
		}
		if _, _, err := c.Children(n.Path); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Children %s: %v; want ErrNoAuth", n.Path, err)
		}
		if _, err := c.Set(n.Path, []byte(`{"limit":1}`), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Set %s: %v; want ErrNoAuth", n.Path, err)
		}
		if n.Path == root {
			continue
		}
		if err := c.Delete(n.Path, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Delete %s: %v; want ErrNoAuth", n.Path, err)
		}
	}
}

// A parent the sidecar may not read or write (a digest ACL of another
// identity) answers 403 zookeeper-acl, never 500, with or without credentials
// of the sidecar's own.
func TestZKACLOfAnotherIdentityIs403(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	owner := sidecartest.ZkClient(t, zkc.Servers(), "owner:pw")
	open := zk.WorldACL(zk.PermAll)
	mine := zk.DigestACL(zk.PermAll, "owner", "pw")
	for _, p := range []string{root, root + "/locks", root + "/queues", root + "/elections"} {
		if _, err := owner.Create(p, nil, 0, open); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{root + "/locks/theirs", root + "/queues/theirs", root + "/elections/theirs"} {
		if _, err := owner.Create(p, nil, 0, mine); err != nil {
			t.Fatal(err)
		}
	}
	before := zktest.Snapshot(t, owner, root)
	for _, extra := range [][]string{nil, {"--zk-auth", sidecartest.AppAuth}} {
		s := sidecartest.Start(t, zkc.Servers(), root, extra...)
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/locks/theirs?ttl=30s", ""},
			{"POST", "/v1/locks/theirs?ttl=30s&wait=2s", ""},
			{"GET", "/v1/locks/theirs", ""},
			{"POST", "/v1/queues/theirs/items", "job"},
			{"POST", "/v1/queues/theirs/take", ""},
			{"POST", "/v1/elections/theirs/candidates?id=c1&ttl=30s", ""},
		} {
			r, err := s.Do(context.Background(), c.method, c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			sidecartest.ProblemIs(t, r, 403, "zookeeper-acl")
		}
		if l := s.Must(t, 200, "GET", "/v1/session"); sidecartest.Num(l.Body["leases"]) != 0 {
			t.Fatalf("refused requests left leases: %s", l.Raw)
		}
	}
	if diff := zktest.SnapshotDiff(before, zktest.Snapshot(t, owner, root)); diff != "" {
		t.Fatalf("refused requests changed the tree:\n%s", diff)
	}
}

// Over TLS, a sidecar whose CA signed the server's certificate works; one
// given another CA never trusts the server: it stays unready and never answers
// 201. With a server that needs client certificates, only a sidecar presenting
// one it trusts gets in.
func TestZKTLS(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	ca, otherCA, clientCA := testutil.NewCA(t, "zk CA"), testutil.NewCA(t, "other CA"), testutil.NewCA(t, "client CA")
	cert, key := ca.Issue(t, "zookeeper", true)
	clientCert, clientKey := clientCA.Issue(t, "sidecar", false)
	dir := t.TempDir()
	caFile := sidecartest.WriteFile(t, dir, "ca.pem", ca.PEM)
	otherFile := sidecartest.WriteFile(t, dir, "other.pem", otherCA.PEM)
	certFile := sidecartest.WriteFile(t, dir, "client.pem", clientCert)
	keyFile := sidecartest.WriteFile(t, dir, "client-key.pem", clientKey)

	neverReady := func(t *testing.T, s *sidecartest.Sidecar) {
		t.Helper()
		// A lock request waits for the session (up to its wait) and must not
		// be granted; meanwhile /readyz is 503 throughout.
		done := make(chan *sidecartest.Response, 1)
		go func() {
			r, err := s.Do(context.Background(), "POST", "/v1/locks/x?ttl=30s&wait=3s", nil)
			if err != nil {
				r = &sidecartest.Response{Raw: []byte(err.Error())}
			}
			done <- r
		}()
		for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); {
			s.Must(t, 503, "GET", "/readyz")
			select {
			case r := <-done:
				if r.Status == 201 {
					t.Fatalf("lock granted through an untrusted server: %s", r.Raw)
				}
				if r.Status != 503 {
					t.Fatalf("lock with no trusted server: %d %s, want 503", r.Status, r.Raw)
				}
				done = nil
			case <-time.After(200 * time.Millisecond):
			}
		}
		if done != nil {
			t.Fatal("the lock request did not end within its wait")
		}
	}

	t.Run("server-auth", func(t *testing.T) {
		zkc := zktest.StartTLS(t, zktest.TLS{CertPEM: cert, KeyPEM: key, CAPEM: clientCA.PEM})
		good := sidecartest.Start(t, zkc.SecureServers(), "/tls", "--zk-tls-ca", caFile)
		good.Must(t, 201, "POST", "/v1/locks/x?ttl=30s")
		if srv := sidecartest.Str(good.Must(t, 200, "GET", "/v1/session").Body["server"]); srv != zkc.SecureServers()[0] {
			t.Fatalf("session server %q, want the secure port %s", srv, zkc.SecureServers()[0])
		}
		t.Run("wrong-ca", func(t *testing.T) {
			neverReady(t, sidecartest.Run(t, zkc.SecureServers(), "/tls", "--zk-tls-ca", otherFile))
		})
		t.Run("system-roots", func(t *testing.T) {
			neverReady(t, sidecartest.Run(t, zkc.SecureServers(), "/tls", "--zk-tls-cert", certFile, "--zk-tls-key", keyFile))
		})
	})
	t.Run("client-auth", func(t *testing.T) {
		zkc := zktest.StartTLS(t, zktest.TLS{CertPEM: cert, KeyPEM: key, CAPEM: clientCA.PEM, ClientAuth: "need"})
		s := sidecartest.Start(t, zkc.SecureServers(), "/tls", "--zk-tls-ca", caFile, "--zk-tls-cert", certFile, "--zk-tls-key", keyFile,
			"--zk-auth", sidecartest.AppAuth)
		s.Must(t, 201, "POST", "/v1/locks/x?ttl=30s")
		t.Run("no-client-cert", func(t *testing.T) {
			neverReady(t, sidecartest.Run(t, zkc.SecureServers(), "/tls", "--zk-tls-ca", caFile))
		})
	})
}
