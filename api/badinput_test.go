package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Every bad input gets its 4xx problem document and leaves the ZooKeeper tree
// exactly as it was: the same nodes with the same data and versions.
func TestBadInputsAreRejectedWithoutTouchingZooKeeper(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	open := sidecartest.Start(t, zkc.Servers(), root, "--max-wait", "1m", "--max-body", "1024", "--max-item", "512")
	guarded := sidecartest.Start(t, zkc.Servers(), root, "--token", "s3cret")
	tokens := sidecartest.WriteFile(t, t.TempDir(), "tokens.json", []byte(tokensJSON))
	scoped := sidecartest.Start(t, zkc.Servers(), root, "--tokens-file", tokens)
	capped := sidecartest.Start(t, zkc.Servers(), root, "--max-leases", "1")
	// Two leases in all: each token's share is one (issue 24).
	shared := sidecartest.Start(t, zkc.Servers(), root, "--tokens-file", tokens, "--max-leases", "2")
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	port := open.Base[strings.LastIndex(open.Base, ":")+1:]

	// A live lease and a held lock, so that the tree has something to keep; a
	// double-barrier participant; a lease of the scoped "app" token; the one
	// lease the capped sidecar may keep.
	lease := sidecartest.Str(open.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	open.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/held?lease="+lease)
	// A permit and a read grant of that lease (semaphores, read/write locks).
	permit := sidecartest.Str(open.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/sem/permits?max=1&lease="+lease).Body["permit"])
	open.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/rw?mode=read&lease="+lease)
	open.Must(t, http.StatusConflict, http.MethodPost, "/v1/double-barriers/dbl/participants?id=p1&count=2&lease="+lease)
	appLease := sidecartest.Str(scoped.As(sidecartest.Bearer(tokApp)...).Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	capped.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s")
	sidecartest.CloseToOthers(t, conn, root)
	shared.As(sidecartest.Bearer(tokApp)...).Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s")
	// A hold lost (its node deleted by hand): the lease no longer holds it.
	loseLock(t, open, conn, root, "lost-one", lease)
	// A key at version 1 (with its type) and a counter at the top of its range.
	open.MustPut(t, "/v1/kv/cfg", []byte("1"), "text/plain")
	open.MustPut(t, "/v1/kv/cfg", []byte("2"), "text/plain")
	if r, err := open.Do(context.Background(), http.MethodPut, "/v1/counters/top", strings.NewReader(`{"value":9223372036854775807}`), "Content-Type", "application/json"); err != nil || r.Status != 200 {
		t.Fatalf("counter: %v %+v", err, r)
	}
	// A partition group with one member, and a membership group with one.
	open.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/bad-p", `{"count":2}`)
	pm := open.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/bad-p/members?id=pm1&lease="+lease, "")
	pmVersion := sidecartest.Num(pm.Body["version"])
	open.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/bad-g/members?id=gm1&lease="+lease, `{"value":"v"}`)
	before := zktest.Snapshot(t, conn, root)

	long := strings.Repeat("a", 129)
	madeUp := "MADEUP" + strings.Repeat("X", 8000) // a method net/http takes, no route has
	ctJSON := []string{"Content-Type", "application/json"}
	cases := []struct {
		name, method, path string
		body               []byte
		header             []string
		car                *sidecartest.Sidecar
		status             int
		problem            string
	}{
		{"dot-dot name", "POST", "/v1/locks/..", nil, nil, open, 400, "invalid-name"},
		{"dot name", "GET", "/v1/locks/.", nil, nil, open, 400, "invalid-name"},
		{"leading dash", "POST", "/v1/locks/-x", nil, nil, open, 400, "invalid-name"},
		{"leading underscore", "POST", "/v1/locks/_c_x", nil, nil, open, 400, "invalid-name"},
		{"encoded slash", "POST", "/v1/locks/a%2Fb", nil, nil, open, 400, "invalid-name"},
		{"space", "POST", "/v1/locks/a%20b", nil, nil, open, 400, "invalid-name"},
		{"unicode", "POST", "/v1/locks/%C3%A9t%C3%A9", nil, nil, open, 400, "invalid-name"},
		{"over-long name", "POST", "/v1/locks/" + long, nil, nil, open, 400, "invalid-name"},
		{"over-long name on GET", "GET", "/v1/locks/" + long, nil, nil, open, 400, "invalid-name"},
		{"bad wait", "POST", "/v1/locks/x?wait=soon", nil, nil, open, 400, "invalid-parameter"},
		{"negative wait", "POST", "/v1/locks/x?wait=-1s", nil, nil, open, 400, "invalid-parameter"},
		{"wait above max", "POST", "/v1/locks/x?wait=2m", nil, nil, open, 400, "invalid-parameter"},
		{"bad ttl", "POST", "/v1/locks/x?ttl=forever", nil, nil, open, 400, "invalid-parameter"},
		{"negative ttl", "POST", "/v1/locks/x?ttl=-5s", nil, nil, open, 400, "invalid-parameter"},
		{"ttl below 1s", "POST", "/v1/locks/x?ttl=10ms", nil, nil, open, 400, "invalid-parameter"},
		{"ttl above max", "POST", "/v1/locks/x?ttl=1000h", nil, nil, open, 400, "invalid-parameter"},
		{"ttl with lease", "POST", "/v1/locks/x?ttl=5s&lease=" + lease, nil, nil, open, 400, "invalid-parameter"},
		{"over-long owner", "POST", "/v1/locks/x?owner=" + strings.Repeat("o", 257), nil, nil, open, 400, "invalid-parameter"},
		{"unknown lease on acquire", "POST", "/v1/locks/x?lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"bad lease name on acquire", "POST", "/v1/locks/x?lease=a/b", nil, nil, open, 400, "invalid-name"},
		{"unknown lease on release", "DELETE", "/v1/locks/held?lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"release without lease", "DELETE", "/v1/locks/held", nil, nil, open, 400, "invalid-parameter"},
		{"release not held", "DELETE", "/v1/locks/other?lease=" + lease, nil, nil, open, 404, "not-held"},
		{"semaphore without max", "POST", "/v1/semaphores/sem/permits", nil, nil, open, 400, "invalid-parameter"},
		{"semaphore max 0", "POST", "/v1/semaphores/sem/permits?max=0", nil, nil, open, 400, "invalid-parameter"},
		{"semaphore max negative", "POST", "/v1/semaphores/sem/permits?max=-2", nil, nil, open, 400, "invalid-parameter"},
		{"semaphore max not a number", "POST", "/v1/semaphores/sem/permits?max=many", nil, nil, open, 400, "invalid-parameter"},
		{"semaphore bad name", "POST", "/v1/semaphores/_c_x/permits?max=1", nil, nil, open, 400, "invalid-name"},
		{"semaphore bad wait", "POST", "/v1/semaphores/sem/permits?max=1&wait=soon", nil, nil, open, 400, "invalid-parameter"},
		// The holder's lease asking with another max (a fresh acquirer's refusal
		// takes and lets go the internal mutex, so it is TestSemaphoreMaxMismatch's).
		{"semaphore another max", "POST", "/v1/semaphores/sem/permits?max=2&lease=" + lease, nil, nil, open, 409, "max-mismatch"},
		{"semaphore unknown lease", "POST", "/v1/semaphores/sem/permits?max=1&lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"permit wrong lease", "DELETE", "/v1/semaphores/sem/permits/" + permit + "?lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"permit of another lease", "DELETE", "/v1/semaphores/sem/permits/" + permit + "?lease=" + appLease, nil, nil, open, 404, "lease-not-found"},
		{"permit not held", "DELETE", "/v1/semaphores/sem/permits/nosuchpermit?lease=" + lease, nil, nil, open, 404, "not-held"},
		{"permit release without lease", "DELETE", "/v1/semaphores/sem/permits/" + permit, nil, nil, open, 400, "invalid-parameter"},
		{"rwlock unknown mode", "POST", "/v1/rwlocks/rw?mode=exclusive", nil, nil, open, 400, "invalid-parameter"},
		{"rwlock without mode", "POST", "/v1/rwlocks/rw", nil, nil, open, 400, "invalid-parameter"},
		{"rwlock bad name", "GET", "/v1/rwlocks/a%2Fb", nil, nil, open, 400, "invalid-name"},
		{"rwlock other mode held", "POST", "/v1/rwlocks/rw?mode=write&lease=" + lease, nil, nil, open, 400, "invalid-parameter"},
		{"rwlock release wrong mode", "DELETE", "/v1/rwlocks/rw?mode=write&lease=" + lease, nil, nil, open, 404, "not-held"},
		{"rwlock release unknown mode", "DELETE", "/v1/rwlocks/rw?mode=both&lease=" + lease, nil, nil, open, 400, "invalid-parameter"},
		{"rwlock release wrong lease", "DELETE", "/v1/rwlocks/rw?mode=read&lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"rwlock release not held", "DELETE", "/v1/rwlocks/other?mode=read&lease=" + lease, nil, nil, open, 404, "not-held"},
		{"lock events bad name", "GET", "/v1/locks/_x/events", nil, nil, open, 400, "invalid-name"},
		{"unknown lease get", "GET", "/v1/leases/nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"unknown lease keepalive", "POST", "/v1/leases/nosuchlease/keepalive", nil, nil, open, 404, "lease-not-found"},
		{"unknown lease revoke", "DELETE", "/v1/leases/nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"unknown lease stream", "GET", "/v1/leases/nosuchlease/events", nil, nil, open, 404, "lease-not-found"},
		{"bad lease ttl", "POST", "/v1/leases?ttl=1", nil, nil, open, 400, "invalid-parameter"},
		{"oversized body", "POST", "/v1/locks/x", bytes.Repeat([]byte("x"), 4096), nil, open, 413, "body-too-large"},
		{"oversized body on lease", "POST", "/v1/leases", bytes.Repeat([]byte("x"), 4096), nil, open, 413, "body-too-large"},
		{"unknown route", "GET", "/v1/nothing", nil, nil, open, 404, "not-found"},
		{"wrong method", "PATCH", "/v1/locks/x", nil, nil, open, 405, "method-not-allowed"},
		// Made-up methods and paths (issue 24): each counted as "other" and
		// "unmatched" in the metrics, never as sent.
		{"made-up method", madeUp, "/v1/locks/x", nil, nil, open, 405, "method-not-allowed"},
		{"made-up method on a made-up path", madeUp, "/v1/made-up/" + long, nil, nil, open, 405, "method-not-allowed"},
		{"made-up path", "GET", "/v1/made-up/" + long, nil, nil, open, 404, "not-found"},
		{"made-up path outside /v1", "POST", "/made-up/" + long, nil, nil, open, 404, "not-found"},
		{"made-up method, token configured", madeUp, "/v1/locks/x", nil, nil, guarded, 401, "unauthorized"},
		{"made-up path, token configured", "GET", "/v1/made-up/" + long, nil, nil, guarded, 401, "unauthorized"},
		{"made-up method with the token", madeUp, "/v1/locks/held", nil, sidecartest.Bearer("s3cret"), guarded, 405, "method-not-allowed"},
		{"made-up path with the token", "DELETE", "/v1/made-up/" + long, nil, sidecartest.Bearer("s3cret"), guarded, 404, "not-found"},
		{"missing token", "POST", "/v1/locks/x", nil, nil, guarded, 401, "unauthorized"},
		{"wrong token", "POST", "/v1/locks/x", nil, []string{"Authorization", "Bearer nope"}, guarded, 401, "unauthorized"},
		{"token without Bearer", "POST", "/v1/leases", nil, []string{"Authorization", "s3cret"}, guarded, 401, "unauthorized"},
		// Ids stay with their holders.
		{"another's participant without its lease", "POST", "/v1/double-barriers/dbl/participants?id=p1&count=2", nil, nil, open, 409, "participant-exists"},
		{"another's participant, waiting", "POST", "/v1/double-barriers/dbl/participants?id=p1&count=2&wait=50ms&ttl=5s", nil, nil, open, 409, "participant-exists"},
		{"another count", "POST", "/v1/double-barriers/dbl/participants?id=p2&count=1", nil, nil, open, 409, "count-mismatch"},
		{"another count with a lease", "POST", "/v1/double-barriers/dbl/participants?id=p2&count=3&lease=" + lease, nil, nil, open, 409, "count-mismatch"},
		{"own participant, another count", "POST", "/v1/double-barriers/dbl/participants?id=p1&count=5&lease=" + lease, nil, nil, open, 409, "count-mismatch"},
		// Browser protections.
		{"foreign Origin", "POST", "/v1/queues/q/take", []byte("x"), []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}, open, 403, "origin-not-allowed"},
		{"foreign Origin on a form", "POST", "/v1/locks/x?ttl=1h", []byte("a=b"), []string{"Origin", "http://evil.example", "Content-Type", "application/x-www-form-urlencoded"}, open, 403, "origin-not-allowed"},
		{"null Origin", "PUT", "/v1/barriers/b", nil, []string{"Origin", "null"}, open, 403, "origin-not-allowed"},
		{"cross-site without Origin", "DELETE", "/v1/locks/held?lease=" + lease, nil, []string{"Sec-Fetch-Site", "cross-site"}, open, 403, "origin-not-allowed"},
		{"foreign preflight", "OPTIONS", "/v1/locks/x", nil, []string{"Origin", "http://evil.example", "Access-Control-Request-Method", "DELETE"}, open, 403, "origin-not-allowed"},
		{"DNS rebinding", "POST", "/v1/locks/x", nil, []string{"Host", "rebind.evil.example:" + port}, open, 403, "host-not-allowed"},
		{"DNS rebinding with a token", "POST", "/v1/leases", nil, []string{"Host", "rebind.evil.example", "Authorization", "Bearer s3cret"}, guarded, 403, "host-not-allowed"},
		// Scoped tokens.
		{"no token, scoped", "GET", "/v1/locks", nil, nil, scoped, 401, "unauthorized"},
		{"name outside the token", "POST", "/v1/locks/other-1", nil, sidecartest.Bearer(tokApp), scoped, 403, "forbidden"},
		{"kind outside the token", "PUT", "/v1/barriers/app-1", nil, sidecartest.Bearer(tokApp), scoped, 403, "forbidden"},
		{"read outside the token", "GET", "/v1/locks/other-1/events", nil, sidecartest.Bearer(tokApp), scoped, 403, "forbidden"},
		{"write with a read-only token", "POST", "/v1/locks/app-1", nil, sidecartest.Bearer(tokReader), scoped, 403, "forbidden"},
		{"lease with a read-only token", "POST", "/v1/leases", nil, sidecartest.Bearer(tokReader), scoped, 403, "forbidden"},
		{"another token's lease", "DELETE", "/v1/leases/" + appLease, nil, sidecartest.Bearer(tokOther), scoped, 404, "lease-not-found"},
		{"another token's lease on acquire", "POST", "/v1/locks/shared-1?lease=" + appLease, nil, sidecartest.Bearer(tokOther), scoped, 404, "lease-not-found"},
		{"another token's lease stream", "GET", "/v1/leases/" + appLease + "/events", nil, sidecartest.Bearer(tokOther), scoped, 404, "lease-not-found"},
		{"claim of no one", "DELETE", "/v1/queues/shared-q/claims/c1", nil, sidecartest.Bearer(tokApp), scoped, 404, "claim-not-found"},
		{"ticket without a token", "POST", "/ui/ticket", nil, nil, scoped, 401, "unauthorized"},
		// Keys and counters.
		{"key value over --max-item", "PUT", "/v1/kv/cfg", bytes.Repeat([]byte("v"), 600), nil, open, 413, "body-too-large"},
		{"key value over --max-body", "PUT", "/v1/kv/cfg", bytes.Repeat([]byte("v"), 4096), nil, open, 413, "body-too-large"},
		{"key with nine segments", "PUT", "/v1/kv/a/b/c/d/e/f/g/h/i", []byte("x"), nil, open, 400, "invalid-name"},
		{"key with an empty segment", "PUT", "/v1/kv/a//b", []byte("x"), nil, open, 400, "invalid-name"},
		{"key with a dot-dot segment", "PUT", "/v1/kv/a/../b", []byte("x"), nil, open, 400, "invalid-name"},
		{"nested key stream with nine segments", "GET", "/v1/kv/a/b/c/d/e/f/g/h/i/events", nil, nil, open, 400, "invalid-name"},
		{"key dot-dot", "GET", "/v1/kv/..", nil, nil, open, 400, "invalid-name"},
		{"key like a protected node", "PUT", "/v1/kv/_c_x", []byte("x"), nil, open, 400, "invalid-name"},
		{"over-long key", "PUT", "/v1/kv/" + long, []byte("x"), nil, open, 400, "invalid-name"},
		{"over-long key stream", "GET", "/v1/kv/" + long + "/events", nil, nil, open, 400, "invalid-name"},
		{"key version not a number", "PUT", "/v1/kv/cfg?version=one", []byte("x"), nil, open, 400, "invalid-parameter"},
		{"key version below -1", "PUT", "/v1/kv/cfg?version=-2", []byte("x"), nil, open, 400, "invalid-parameter"},
		{"key version above int32", "PUT", "/v1/kv/cfg?version=4294967296", []byte("x"), nil, open, 400, "invalid-parameter"},
		{"key delete at version -1", "DELETE", "/v1/kv/cfg?version=-1", nil, nil, open, 400, "invalid-parameter"},
		{"key long-poll bad wait", "GET", "/v1/kv/cfg?version=1&wait=soon", nil, nil, open, 400, "invalid-parameter"},
		{"key long-poll bad version", "GET", "/v1/kv/cfg?version=x&wait=1s", nil, nil, open, 400, "invalid-parameter"},
		{"key long Content-Type", "PUT", "/v1/kv/cfg", []byte("x"), []string{"Content-Type", "text/" + strings.Repeat("x", 300)}, open, 400, "invalid-parameter"},
		{"key stale version", "PUT", "/v1/kv/cfg?version=0", []byte("x"), nil, open, 409, "version-mismatch"},
		{"key create-only on an existing key", "PUT", "/v1/kv/cfg?version=-1", []byte("x"), nil, open, 409, "version-mismatch"},
		{"key compare-and-set on an absent key", "PUT", "/v1/kv/none?version=0", []byte("x"), nil, open, 409, "version-mismatch"},
		{"key stale delete", "DELETE", "/v1/kv/cfg?version=0", nil, nil, open, 409, "version-mismatch"},
		{"key delete absent", "DELETE", "/v1/kv/none", nil, nil, open, 404, "key-not-found"},
		{"key get absent", "GET", "/v1/kv/none", nil, nil, open, 404, "key-not-found"},
		{"key with an unknown lease", "PUT", "/v1/kv/cfg?lease=nosuchlease", []byte("x"), nil, open, 404, "lease-not-found"},
		{"key over another lease's key", "PUT", "/v1/kv/cfg?lease=" + lease, []byte("x"), nil, open, 409, "version-mismatch"},
		{"key write with a read-only token", "PUT", "/v1/kv/app-k?lease=" + appLease, []byte("x"), sidecartest.Bearer(tokReader), scoped, 403, "forbidden"},
		{"key outside the token", "PUT", "/v1/kv/cfg", []byte("x"), sidecartest.Bearer(tokApp), scoped, 403, "forbidden"},
		{"counter add not a number", "POST", "/v1/counters/c?add=one", nil, nil, open, 400, "invalid-parameter"},
		{"counter add fraction", "POST", "/v1/counters/c?add=1.5", nil, nil, open, 400, "invalid-parameter"},
		{"counter add above int64", "POST", "/v1/counters/c?add=9223372036854775808", nil, nil, open, 400, "invalid-parameter"},
		{"counter add overflows", "POST", "/v1/counters/top?add=1", nil, nil, open, 409, "counter-overflow"},
		{"counter bad name", "POST", "/v1/counters/a%2Fb", nil, nil, open, 400, "invalid-name"},
		{"counter expect not a number", "PUT", "/v1/counters/c?expect=x", []byte(`{"value":1}`), []string{"Content-Type", "application/json"}, open, 400, "invalid-parameter"},
		{"counter expect mismatch", "PUT", "/v1/counters/top?expect=0", []byte(`{"value":1}`), []string{"Content-Type", "application/json"}, open, 409, "value-mismatch"},
		{"counter set without a body", "PUT", "/v1/counters/c", nil, nil, open, 400, "invalid-body"},
		{"counter set a string", "PUT", "/v1/counters/c", []byte(`{"value":"1"}`), []string{"Content-Type", "application/json"}, open, 400, "invalid-body"},
		{"counter set a fraction", "PUT", "/v1/counters/c", []byte(`{"value":1.5}`), []string{"Content-Type", "application/json"}, open, 400, "invalid-body"},
		{"counter set as text", "PUT", "/v1/counters/c", []byte(`{"value":1}`), []string{"Content-Type", "text/plain"}, open, 415, "unsupported-media-type"},
		{"counter outside the token", "POST", "/v1/counters/c", nil, sidecartest.Bearer(tokApp), scoped, 403, "forbidden"},
		{"counter delete absent", "DELETE", "/v1/counters/none", nil, nil, open, 404, "counter-not-found"},
		{"counter delete bad name", "DELETE", "/v1/counters/a%2Fb", nil, nil, open, 400, "invalid-name"},
		{"counter delete with a read-only token", "DELETE", "/v1/counters/top", nil, sidecartest.Bearer(tokReader), scoped, 403, "forbidden"},
		{"counter delete outside the token", "DELETE", "/v1/counters/top", nil, sidecartest.Bearer(tokApp), scoped, 403, "forbidden"},
		// Partition groups and membership groups.
		{"partition count 0", "PUT", "/v1/partitions/bad-p", []byte(`{"count":0}`), ctJSON, open, 400, "invalid-body"},
		{"partition count over 10000", "PUT", "/v1/partitions/bad-p", []byte(`{"count":10001}`), ctJSON, open, 400, "invalid-body"},
		{"duplicate partition names", "PUT", "/v1/partitions/bad-p", []byte(`{"partitions":["a","b","a"]}`), ctJSON, open, 400, "invalid-parameter"},
		{"invalid partition name", "PUT", "/v1/partitions/bad-p", []byte(`{"partitions":["a","../b"]}`), ctJSON, open, 400, "invalid-name"},
		{"no partitions", "PUT", "/v1/partitions/bad-p", []byte(`{"partitions":[]}`), ctJSON, open, 400, "invalid-parameter"},
		{"count and names", "PUT", "/v1/partitions/bad-p", []byte(`{"count":2,"partitions":["a"]}`), ctJSON, open, 400, "invalid-parameter"},
		{"neither count nor names", "PUT", "/v1/partitions/bad-p", []byte(`{}`), ctJSON, open, 400, "invalid-body"},
		{"partition member weight 0", "POST", "/v1/partitions/bad-p/members?id=pm2&weight=0&lease=" + lease, nil, nil, open, 400, "invalid-parameter"},
		{"partition member exists", "POST", "/v1/partitions/bad-p/members?id=pm1", nil, nil, open, 409, "member-exists"},
		{"ack of an unknown version", "POST", fmt.Sprintf("/v1/partitions/bad-p/members/pm1/ack?version=%d&lease=%s", pmVersion+1, lease), nil, nil, open, 409, "version-mismatch"},
		{"ack of an old version", "POST", "/v1/partitions/bad-p/members/pm1/ack?version=1&lease=" + lease, nil, nil, open, 409, "version-mismatch"},
		{"ack under an unknown lease", "POST", fmt.Sprintf("/v1/partitions/bad-p/members/pm1/ack?version=%d&lease=nosuchlease", pmVersion), nil, nil, open, 404, "lease-not-found"},
		{"ack of a member the lease does not hold", "POST", fmt.Sprintf("/v1/partitions/bad-p/members/pm2/ack?version=%d&lease=%s", pmVersion, lease), nil, nil, open, 404, "not-held"},
		{"partition leave, wrong lease", "DELETE", "/v1/partitions/bad-p/members/pm1?lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"partition member unknown", "GET", "/v1/partitions/bad-p/members/nobody", nil, nil, open, 404, "member-not-found"},
		{"group member exists", "POST", "/v1/groups/bad-g/members?id=gm1", []byte(`{"value":"x"}`), ctJSON, open, 409, "member-exists"},
		{"group leave, not held", "DELETE", "/v1/groups/bad-g/members/gm2?lease=" + lease, nil, nil, open, 404, "not-held"},
		{"group value, wrong lease", "PUT", "/v1/groups/bad-g/members/gm1?lease=nosuchlease", []byte(`{"value":"x"}`), ctJSON, open, 404, "lease-not-found"},
		// Limits.
		{"too many leases", "POST", "/v1/leases", nil, nil, capped, 429, "too-many-leases"},
		{"too many leases, implicit", "POST", "/v1/locks/x", nil, nil, capped, 429, "too-many-leases"},
		{"a token past its own share of leases", "POST", "/v1/leases", nil, sidecartest.Bearer(tokApp), shared, 429, "too-many-leases"},
		{"a token past its own share, implicit", "POST", "/v1/locks/app-1", nil, sidecartest.Bearer(tokApp), shared, 429, "too-many-leases"},
		// A hold whose node was deleted by hand is no longer the lease's.
		{"release of a lost hold", "DELETE", "/v1/locks/lost-one?lease=" + lease, nil, nil, open, 404, "not-held"},
		// ZooKeeper ACLs of another identity.
		{"lock parent closed by another identity", "POST", "/v1/locks/closed?ttl=30s", nil, nil, open, 403, "zookeeper-acl"},
		{"queue closed by another identity", "POST", "/v1/queues/closed/items", []byte("x"), nil, open, 403, "zookeeper-acl"},
		{"lock parent closed by another identity, with a token", "POST", "/v1/locks/closed?wait=1s", nil, sidecartest.Bearer("s3cret"), guarded, 403, "zookeeper-acl"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body *bytes.Reader
			if c.body != nil {
				body = bytes.NewReader(c.body)
			} else {
				body = bytes.NewReader(nil)
			}
			r, err := c.car.Do(context.Background(), c.method, c.path, body, c.header...)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Raw)
			}
			if r.Status >= 500 {
				t.Fatalf("a client's fault answered %d", r.Status)
			}
			for _, id := range []string{lease, appLease} {
				if strings.Contains(string(r.Raw), id) && !strings.Contains(c.path, id) {
					t.Fatalf("a lease id the request did not name: %s", r.Raw)
				}
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if got := sidecartest.Str(r.Body["type"]); !strings.HasSuffix(got, "/problems/"+c.problem) {
				t.Fatalf("type %q, want .../problems/%s: %s", got, c.problem, r.Raw)
			}
			if sidecartest.Num(r.Body["status"]) != int64(c.status) || sidecartest.Str(r.Body["title"]) == "" || sidecartest.Str(r.Body["detail"]) == "" {
				t.Fatalf("incomplete problem document: %s", r.Raw)
			}
		})
	}
	if d := zktest.SnapshotDiff(before, zktest.Snapshot(t, conn, root)); d != "" {
		t.Fatalf("the ZooKeeper tree changed:\n%s", d)
	}
	// The right token passes; healthz and readyz stay open.
	guarded.Must(t, http.StatusOK, http.MethodGet, "/healthz")
	guarded.Must(t, http.StatusOK, http.MethodGet, "/readyz")
	r, err := guarded.Do(context.Background(), http.MethodGet, "/v1/session", nil, "Authorization", "Bearer s3cret")
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("with the token: %v %+v", err, r)
	}
}

// loseLock takes lock name for lease and deletes its holder node by hand with
// conn, then waits until the lease no longer lists it (a lost hold).
func loseLock(t *testing.T, car *sidecartest.Sidecar, conn *zk.Conn, root, name, lease string) {
	t.Helper()
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/"+name+"?lease="+lease)
	holder, _, err := conn.Children(root + "/locks/" + name)
	if err != nil || len(holder) != 1 {
		t.Fatalf("%s's holder: %v %v", name, holder, err)
	}
	if err := conn.Delete(root+"/locks/"+name+"/"+holder[0], -1); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the lost hold leaves the lease", func() bool {
		return !strings.Contains(string(car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease).Raw), `"`+name+`"`)
	})
}
