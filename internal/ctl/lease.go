package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// leaseKeeper holds a wrapper's lease alive through its keepalive stream, and
// through restarts of the sidecar.
//
// The stream (GET /v1/leases/{lease}/events) keeps the lease alive while it is
// open. When it breaks, the keeper opens it again (follow.go): the sidecar may
// be restarting (kill -USR2, or kill -9 and a successor on the same
// --state-dir), and its successor has the lease. Meanwhile the keeper posts a
// keepalive every interval; each one answered is a confirmation, at the time
// it was sent, that the lease lived until then plus its TTL (and it makes a
// sidecar with --state-dir write the lease's new expiry down for a successor).
//
// Lost closes, with why set, exactly when the lease is gone or may be gone:
//   - the sidecar says so: a `lost`, `expired` or `revoked` event, a
//     `lost-hold` (a wrapper's lease holds one thing), or 404 to a keepalive
//     or to the stream's reopening;
//   - or no confirmation came for so long that the lease could have ended
//     unseen (deadline): its TTL since the last confirmation but one (a
//     successor resumes the expiry a sidecar last wrote down, which may lag
//     the last keepalive by its saving interval), or half the ZooKeeper
//     session timeout since the last one (a sidecar that died for good leaves
//     its session to expire one timeout after its last contact with
//     ZooKeeper, and everything it held with it).
//
// So a wrapper that stops its command when Lost closes never lets it run
// after the lease really could have ended; a sidecar that is down for less
// than that costs it nothing.
type leaseKeeper struct {
	ID   string
	Lost chan struct{}
	why  string
	c    *apiClient
	// ttl is the lease's; session is the sidecar's ZooKeeper session timeout
	// (0 when the sidecar did not say).
	ttl, session time.Duration
	lostOnce     sync.Once
	lostCtx      context.Context // ends when Lost closes
	lostCancel   context.CancelFunc
	reopened     chan struct{} // a token each time the stream was opened again
	stop         context.CancelFunc
	done         chan struct{} // closed once run has ended (nil before it starts)
}

// keepLease makes a lease and holds it (see leaseKeeper). ctx bounds the
// making only: the lease is held until Close.
func (c *apiClient) keepLease(ctx context.Context, ttl time.Duration) (*leaseKeeper, error) {
	created := time.Now()
	var lease struct {
		Lease string `json:"lease"`
	}
	if err := c.call(ctx, http.MethodPost, "/v1/leases", url.Values{"ttl": {ttl.String()}}, nil, &lease); err != nil {
		return nil, fmt.Errorf("create lease: %w", err)
	}
	sctx, stop := context.WithCancel(context.Background())
	k := &leaseKeeper{ID: lease.Lease, Lost: make(chan struct{}), c: c, ttl: ttl, reopened: make(chan struct{}, 1), stop: stop}
	k.lostCtx, k.lostCancel = context.WithCancel(context.Background())
	var err error
	if k.session, err = c.sessionTimeout(ctx); err != nil {
		k.Close()
		return nil, fmt.Errorf("session: %w", err)
	}
	f, err := c.follow(sctx, "/v1/leases/"+url.PathEscape(lease.Lease)+"/events", 0, k.onReopen)
	if err != nil {
		k.Close()
		return nil, fmt.Errorf("lease stream: %w", err)
	}
	select {
	case ev, ok := <-f.Events:
		if !ok || ev.Name != "lease" {
			k.Close()
			return nil, errors.New("lease stream: no first event")
		}
	case <-ctx.Done():
		k.Close()
		return nil, ctx.Err()
	}
	k.done = make(chan struct{})
	go func() {
		defer close(k.done)
		k.run(sctx, f, created)
	}()
	return k, nil
}

// sessionTimeout reads the sidecar's negotiated ZooKeeper session timeout
// (GET /v1/session, open to every token); 0 when it gives none.
func (c *apiClient) sessionTimeout(ctx context.Context) (time.Duration, error) {
	var s struct {
		Timeout string `json:"timeout"`
	}
	if err := c.call(ctx, http.MethodGet, "/v1/session", nil, nil, &s); err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil {
		return 0, nil
	}
	return d, nil
}

// onReopen is the follower's: the stream was opened again.
func (k *leaseKeeper) onReopen() {
	select {
	case k.reopened <- struct{}{}:
	default:
	}
}

// lose closes Lost with why, once.
func (k *leaseKeeper) lose(why string) {
	k.lostOnce.Do(func() {
		k.why = why
		close(k.Lost)
		k.lostCancel()
	})
}

// untilLost returns a context of parent's that also ends when the lease is
// lost: for a request made on the lease's behalf, which is pointless after.
func (k *leaseKeeper) untilLost(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(k.lostCtx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// vouched is how long the last confirmation vouches for the lease by the
// session timeout's bound (see leaseKeeper).
func (k *leaseKeeper) vouched() time.Duration {
	if k.session > 0 {
		return min(k.ttl, k.session/2)
	}
	return k.ttl
}

// interval is the time between two keepalives: three per vouched period.
func (k *leaseKeeper) interval() time.Duration { return max(k.vouched()/3, 10*time.Millisecond) }

// confirmations are the send times of the last two keepalives answered (the
// lease's creation counts as one).
type confirmations struct{ prev, last time.Time }

func (cf *confirmations) add(sent time.Time) { cf.prev, cf.last = cf.last, sent }

// deadline is when the lease may have ended unseen (see leaseKeeper).
func (k *leaseKeeper) deadline(cf confirmations) time.Time {
	d := cf.prev.Add(k.ttl)
	if k.session > 0 {
		if s := cf.last.Add(k.session / 2); s.Before(d) {
			d = s
		}
	}
	return d
}

// keepalive is one keepalive's outcome: sent when it was sent, err its error.
type keepalive struct {
	sent time.Time
	err  error
}

// run follows the stream and posts the keepalives until the lease is lost or
// ctx ends; it returns once every goroutine it started has ended.
func (k *leaseKeeper) run(ctx context.Context, f *follower, created time.Time) {
	ctx, cancel := context.WithCancel(ctx)
	var inFlight sync.WaitGroup
	defer f.Wait()
	defer inFlight.Wait()
	defer cancel()
	cf := confirmations{prev: created, last: created}
	results := make(chan keepalive, 1)
	next := time.NewTimer(k.interval())
	defer next.Stop()
	expiry := time.NewTimer(time.Until(k.deadline(cf)))
	defer expiry.Stop()
	var b backoff
	sending := false
	send := func() {
		if sending {
			return
		}
		sending = true
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			results <- k.keepalive(ctx)
		}()
	}
	for {
		select {
		case ev, ok := <-f.Events:
			if why := leaseEnd(ev, ok, f); why != "" {
				k.lose(why)
				return
			}
		case <-k.reopened:
			send() // at once: the successor writes the expiry down for its own successor
		case <-next.C:
			send()
		case r := <-results:
			sending = false
			if r.err == nil {
				cf.add(r.sent)
				expiry.Reset(time.Until(k.deadline(cf)))
				b.reset()
				next.Reset(k.interval())
				continue
			}
			if !retryable(r.err) {
				k.lose(fmt.Sprintf("lease gone (keepalive: %v)", r.err))
				return
			}
			next.Reset(min(b.pause(), k.interval()))
		case <-expiry.C:
			k.lose(fmt.Sprintf("no word from the sidecar for %s: the lease may have expired", time.Since(cf.last).Round(time.Millisecond)))
			return
		case <-ctx.Done():
			return
		}
	}
}

// keepalive posts one keepalive of the lease, bounded by the interval.
func (k *leaseKeeper) keepalive(ctx context.Context) keepalive {
	ctx, cancel := context.WithTimeout(ctx, k.interval())
	defer cancel()
	sent := time.Now()
	return keepalive{sent: sent, err: k.c.call(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(k.ID)+"/keepalive", nil, nil, nil)}
}

// leaseEnd says why the lease is over after the stream gave ev (ok false:
// the follower ended, with its Err), "" when it is not.
func leaseEnd(ev sse.Event, ok bool, f *follower) string {
	if !ok {
		return fmt.Sprintf("lease gone (%v)", f.Err())
	}
	switch ev.Name {
	case "lost", "expired", "revoked":
		return "lease " + ev.Name
	case "lost-hold": // the wrapper's lease holds one thing: that is gone
		var h struct{ Kind, Name, Reason string }
		_ = json.Unmarshal(ev.Data, &h)
		return fmt.Sprintf("%s %q lost (%s)", h.Kind, h.Name, h.Reason)
	}
	return ""
}

// Close revokes the lease, so that everything it still holds is released by
// the time Close returns (tried again while the sidecar restarts, for up to
// 10s; once the lease is lost, tried once), and ends the keeper. A lease
// already gone is no error.
func (k *leaseKeeper) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := "/v1/leases/" + url.PathEscape(k.ID)
	if isClosed(k.Lost) {
		_ = k.c.call(ctx, http.MethodDelete, path, nil, nil, nil)
	} else {
		_ = k.c.callRetrying(ctx, http.MethodDelete, path, nil, nil, nil)
	}
	k.stop()
	if k.done != nil {
		<-k.done
	}
	k.lostCancel()
}
