package barriers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// brAsync sends one request in a goroutine; the answer (nil on a transport error)
// arrives on the channel.
func brAsync(car *sidecartest.Sidecar, method, path string) <-chan *sidecartest.Response {
	ch := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), method, path, nil)
		ch <- r
	}()
	return ch
}

// brExpect waits for an answer with the given status.
func brExpect(t *testing.T, ch <-chan *sidecartest.Response, within time.Duration, status int, what string) *sidecartest.Response {
	t.Helper()
	select {
	case r := <-ch:
		if r == nil || r.Status != status {
			t.Fatalf("%s: %+v, want status %d", what, r, status)
		}
		return r
	case <-time.After(within):
		t.Fatalf("%s: no answer within %s", what, within)
	}
	return nil
}

// brPending checks that none of the channels has answered within d.
func brPending(t *testing.T, d time.Duration, what string, chs ...<-chan *sidecartest.Response) {
	t.Helper()
	deadline := time.After(d)
	for {
		for i, ch := range chs {
			select {
			case r := <-ch:
				t.Fatalf("%s: request %d answered early: %+v", what, i, r)
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Raise, wait and lower a barrier over HTTP, across two sidecars.
func TestBarrierRaiseWaitLower(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)

	if r := b.Must(t, http.StatusOK, "GET", "/v1/barriers/release-1"); r.Body["raised"] != false || sidecartest.Str(r.Body["name"]) != "release-1" {
		t.Fatalf("barrier never raised: %s", r.Raw)
	}
	b.Must(t, http.StatusOK, "POST", "/v1/barriers/release-1/wait") // lowered: passes at once
	a.Must(t, http.StatusNoContent, "PUT", "/v1/barriers/release-1")
	a.Must(t, http.StatusNoContent, "PUT", "/v1/barriers/release-1") // idempotent
	if r := b.Must(t, http.StatusOK, "GET", "/v1/barriers/release-1"); r.Body["raised"] != true {
		t.Fatalf("after PUT: %s", r.Raw)
	}
	sidecartest.ProblemIs(t, b.Must(t, http.StatusConflict, "POST", "/v1/barriers/release-1/wait?wait=0s"), 409, "barrier-raised")
	sidecartest.ProblemIs(t, b.Must(t, http.StatusConflict, "POST", "/v1/barriers/release-1/wait?wait=300ms"), 409, "barrier-raised")

	waiters := []<-chan *sidecartest.Response{
		brAsync(a, "POST", "/v1/barriers/release-1/wait?wait=30s"),
		brAsync(b, "POST", "/v1/barriers/release-1/wait?wait=30s"),
	}
	brPending(t, 300*time.Millisecond, "waiters on a raised barrier", waiters...)
	lowered := time.Now()
	a.Must(t, http.StatusNoContent, "DELETE", "/v1/barriers/release-1")
	for i, w := range waiters {
		r := brExpect(t, w, 5*time.Second, http.StatusOK, fmt.Sprintf("waiter %d", i))
		if r.Body["raised"] != false {
			t.Fatalf("waiter %d: %s", i, r.Raw)
		}
	}
	t.Logf("waiters passed %s after the lower", time.Since(lowered).Round(time.Millisecond))
	a.Must(t, http.StatusNoContent, "DELETE", "/v1/barriers/release-1") // lowering twice is fine
}

// A barrier raised with lease= falls when the lease ends: at its TTL when not kept
// alive, or at once when revoked.
func TestLeaseBoundBarrierFallsWithLease(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)

	const ttl = 2 * time.Second
	lease := sidecartest.Str(a.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl="+ttl.String()).Body["lease"])
	raised := time.Now()
	a.Must(t, http.StatusNoContent, "PUT", "/v1/barriers/maintenance?lease="+lease)
	waiter := brAsync(b, "POST", "/v1/barriers/maintenance/wait?wait=30s")
	brPending(t, 500*time.Millisecond, "waiter while the lease lives", waiter)
	brExpect(t, waiter, ttl+5*time.Second, http.StatusOK, "waiter after the TTL")
	if fell := time.Since(raised); fell > ttl+time.Second {
		t.Fatalf("the barrier fell %s after being raised, TTL %s", fell, ttl)
	}
	if r := b.Must(t, http.StatusOK, "GET", "/v1/barriers/maintenance"); r.Body["raised"] != false {
		t.Fatalf("after the lease expired: %s", r.Raw)
	}

	lease = sidecartest.Str(a.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	a.Must(t, http.StatusNoContent, "PUT", "/v1/barriers/maintenance?lease="+lease)
	if h := a.Must(t, http.StatusOK, "GET", "/v1/leases/"+lease).Body["holds"].([]any); len(h) != 1 {
		t.Fatalf("lease holds %v", h)
	}
	waiter = brAsync(b, "POST", "/v1/barriers/maintenance/wait?wait=30s")
	brPending(t, 300*time.Millisecond, "waiter while the lease lives", waiter)
	a.Must(t, http.StatusNoContent, "DELETE", "/v1/leases/"+lease)
	brExpect(t, waiter, 5*time.Second, http.StatusOK, "waiter after the revoke")

	// Unknown lease: 404, nothing raised.
	sidecartest.ProblemIs(t, a.Must(t, http.StatusNotFound, "PUT", "/v1/barriers/maintenance?lease=nosuchlease"), 404, "lease-not-found")
	if r := b.Must(t, http.StatusOK, "GET", "/v1/barriers/maintenance"); r.Body["raised"] != false {
		t.Fatalf("raised by a bad request: %s", r.Raw)
	}
}

// Five participants over two sidecars: nobody passes enter before the fifth
// arrives; nobody passes leave before the last one leaves; a participant killed
// inside the barrier (its lease revoked) does not block the others.
func TestDoubleBarrierFiveParticipantsTwoSidecars(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}
	const n = 5
	leases := make([]string, n)
	for i := range n {
		leases[i] = sidecartest.Str(cars[i%2].Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	}
	enter := func(i int, wait string) <-chan *sidecartest.Response {
		return brAsync(cars[i%2], "POST", fmt.Sprintf("/v1/double-barriers/batch/participants?id=w%d&count=%d&wait=%s&lease=%s", i, n, wait, leases[i]))
	}

	// Participant 0 tries once: not ready, but it stays enrolled.
	r := brExpect(t, enter(0, "0s"), 5*time.Second, http.StatusConflict, "first enter")
	sidecartest.ProblemIs(t, r, 409, "barrier-not-ready")
	if sidecartest.Num(r.Body["participants"]) != 1 || sidecartest.Num(r.Body["count"]) != n || sidecartest.Str(r.Body["lease"]) != leases[0] {
		t.Fatalf("not-ready problem: %s", r.Raw)
	}
	var entering []<-chan *sidecartest.Response
	for i := range n - 1 {
		entering = append(entering, enter(i, "30s")) // 0 goes on waiting
	}
	testutil.Eventually(t, 10*time.Second, "four participants are enrolled", func() bool {
		st := cars[1].Must(t, http.StatusOK, "GET", "/v1/double-barriers/batch")
		return len(st.Body["participants"].([]any)) == n-1 && st.Body["ready"] == false
	})
	brPending(t, 500*time.Millisecond, "enter with four of five", entering...)
	fifth := enter(n-1, "30s")
	entering = append(entering, fifth)
	for i, ch := range entering {
		r := brExpect(t, ch, 10*time.Second, http.StatusCreated, fmt.Sprintf("enter %d once the fifth arrived", i))
		if r.Body["ready"] != true || sidecartest.Str(r.Body["lease"]) != leases[i] {
			t.Fatalf("enter %d: %s", i, r.Raw)
		}
	}
	st := cars[0].Must(t, http.StatusOK, "GET", "/v1/double-barriers/batch")
	if st.Body["ready"] != true || sidecartest.Num(st.Body["count"]) != n || len(st.Body["participants"].([]any)) != n {
		t.Fatalf("double barrier after enter: %s", st.Raw)
	}

	// Leave: 0..2 wait for the others; 3 tries once (409, but it has left); 4 is
	// killed (lease revoked) and everyone passes.
	leave := func(i int, wait string) <-chan *sidecartest.Response {
		return brAsync(cars[i%2], "DELETE", fmt.Sprintf("/v1/double-barriers/batch/participants/w%d?wait=%s&lease=%s", i, wait, leases[i]))
	}
	var leaving []<-chan *sidecartest.Response
	for i := range 3 {
		leaving = append(leaving, leave(i, "30s"))
	}
	r = brExpect(t, leave(3, "0s"), 5*time.Second, http.StatusConflict, "participant 3 leaving once")
	sidecartest.ProblemIs(t, r, 409, "barrier-not-empty")
	testutil.Eventually(t, 10*time.Second, "only participant 4 is left", func() bool {
		st := cars[0].Must(t, http.StatusOK, "GET", "/v1/double-barriers/batch")
		ps := st.Body["participants"].([]any)
		return len(ps) == 1 && ps[0] == "w4"
	})
	brPending(t, 500*time.Millisecond, "leave while participant 4 is inside", leaving...)
	killed := time.Now()
	cars[0].Must(t, http.StatusNoContent, "DELETE", "/v1/leases/"+leases[4])
	for i, ch := range leaving {
		brExpect(t, ch, 10*time.Second, http.StatusNoContent, fmt.Sprintf("leave %d after 4 was killed", i))
	}
	t.Logf("leavers passed %s after participant 4's lease was revoked", time.Since(killed).Round(time.Millisecond))
	// Participant 3 asks again: it has left already, the barrier is empty now.
	cars[1].Must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/v1/double-barriers/batch/participants/w3?wait=5s&lease=%s", leases[3]))
	st = cars[1].Must(t, http.StatusOK, "GET", "/v1/double-barriers/batch")
	if st.Body["ready"] != false || len(st.Body["participants"].([]any)) != 0 {
		t.Fatalf("double barrier after everyone left: %s", st.Raw)
	}
}

// A participant whose client disconnects while entering leaves nothing behind;
// an implicit lease lets it enter again with lease= its id, and the same id from
// another lease, or from a request without one, is refused without the lease.
func TestDoubleBarrierImplicitLeaseAndDisconnect(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := car.Do(ctx, "POST", "/v1/double-barriers/dc/participants?id=a&count=2&wait=30s", nil)
		gone <- err
	}()
	testutil.Eventually(t, 10*time.Second, "a is enrolled", func() bool {
		return len(car.Must(t, 200, "GET", "/v1/double-barriers/dc").Body["participants"].([]any)) == 1
	})
	cancel()
	<-gone
	testutil.Eventually(t, 10*time.Second, "a's enrolment is withdrawn", func() bool {
		return len(car.Must(t, 200, "GET", "/v1/double-barriers/dc").Body["participants"].([]any)) == 0
	})
	testutil.Eventually(t, 10*time.Second, "the implicit lease ended", func() bool {
		return sidecartest.Num(car.Must(t, 200, "GET", "/v1/session").Body["leases"]) == 0
	})

	r := car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/dc/participants?id=a&count=2&ttl=30s")
	implicit := sidecartest.Str(r.Body["lease"])
	// Again with its lease: the enrolment of the implicit lease goes on.
	r = car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/dc/participants?id=a&count=2&lease="+implicit)
	if sidecartest.Str(r.Body["lease"]) != implicit || sidecartest.Num(r.Body["participants"]) != 1 {
		t.Fatalf("second enter: %s (lease was %s)", r.Raw, implicit)
	}
	// Without it, the id is someone else's: refused, and its lease is not shown.
	r = car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/dc/participants?id=a&count=2")
	sidecartest.ProblemIs(t, r, 409, "participant-exists")
	if strings.Contains(string(r.Raw), implicit) {
		t.Fatalf("the enrolled participant's lease leaked: %s", r.Raw)
	}
	other := sidecartest.Str(car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=30s").Body["lease"])
	sidecartest.ProblemIs(t, car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/dc/participants?id=a&count=2&lease="+other), 409, "participant-exists")
	car.Must(t, http.StatusCreated, "POST", "/v1/double-barriers/dc/participants?id=b&count=2&lease="+other)
	car.Must(t, http.StatusCreated, "POST", "/v1/double-barriers/dc/participants?id=a&count=2&lease="+implicit)
	// Leaving needs the lease that holds the participant.
	sidecartest.ProblemIs(t, car.Must(t, http.StatusNotFound, "DELETE", "/v1/double-barriers/dc/participants/a?lease="+other), 404, "not-held")
	sidecartest.ProblemIs(t, car.Must(t, http.StatusConflict, "DELETE", "/v1/double-barriers/dc/participants/a?lease="+implicit), 409, "barrier-not-empty")
	car.Must(t, http.StatusNoContent, "DELETE", "/v1/double-barriers/dc/participants/b?wait=5s&lease="+other)
}
