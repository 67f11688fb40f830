package ctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// How the subcommands ride through a restart of the sidecar (kill -USR2, or
// kill -9 and a successor on the same --state-dir): an event stream that
// breaks is opened again, and a request that could not be made is made again,
// after a backoff that starts at backoffFirst and doubles up to backoffMax.
// Only an answer is final: 404 (the lease, or whatever the path names, is
// gone) or another 4xx but 429. A connection refused or broken, a 5xx (503
// while the successor reconciles or the session is suspended) and 429 are
// the sidecar restarting or busy, and are tried again.
const (
	backoffFirst = 50 * time.Millisecond
	backoffMax   = time.Second
)

// backoff is the pause before the next attempt: backoffFirst doubling to
// backoffMax. The zero value starts at backoffFirst.
type backoff struct{ next time.Duration }

// pause returns the pause to wait now and doubles the next one.
func (b *backoff) pause() time.Duration {
	d := max(b.next, backoffFirst)
	b.next = min(2*d, backoffMax)
	return d
}

// reset makes the next pause backoffFirst again (after a success).
func (b *backoff) reset() { b.next = 0 }

// sleep waits d or until ctx ends (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryable tells whether err from a request is the sidecar restarting or
// busy (try again: no answer, or not in time), rather than its final answer
// or the caller's cancellation.
func retryable(err error) bool {
	var ae *apiError
	if !errors.As(err, &ae) {
		return !errors.Is(err, context.Canceled)
	}
	return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
}

// callRetrying is call, made again after a retryable failure (retryable)
// until it succeeds, fails for good, or ctx ends (then the last failure is
// returned). For requests that may be repeated: a release, a resignation, a
// revocation, a keepalive.
func (c *apiClient) callRetrying(ctx context.Context, method, path string, q map[string][]string, body, out any) error {
	var b backoff
	for {
		err := c.call(ctx, method, path, q, body, out)
		if err == nil || !retryable(err) {
			return err
		}
		if sleep(ctx, b.pause()) != nil {
			return err
		}
	}
}

// follower keeps one event stream open across restarts of the sidecar: when
// the stream breaks it is opened again (with Last-Event-ID: the last event id
// received), after a backoff. A stream that comes back starts with the
// current state again (the API's streams are state-based), so a reader may
// see a state it already had once more.
//
// Events arrive on Events in order; Events is closed when the follower ends:
// its context ended, the sidecar gave a final answer to a reconnect (Err: an
// *apiError, e.g. 404), or giveUp passed without a stream open (Err says
// so). Its goroutine is owned by whoever made it: end the context and call
// Wait.
type follower struct {
	Events <-chan sse.Event
	c      *apiClient
	path   string
	giveUp time.Duration // 0: never
	// onOpen, when set, is called on the follower's goroutine each time a
	// stream is opened again (not for the first).
	onOpen func()
	lastID string
	err    error
	done   chan struct{}
}

// follow opens the stream at path and keeps it open until ctx ends (see
// follower). The first open's failure is returned as it is: the caller
// decides what a sidecar unreachable at the start means. giveUp bounds how
// long reconnecting is tried after a break (0: until ctx ends); onOpen may
// be nil.
func (c *apiClient) follow(ctx context.Context, path string, giveUp time.Duration, onOpen func()) (*follower, error) {
	first, err := c.stream(ctx, path, "")
	if err != nil {
		return nil, err
	}
	events := make(chan sse.Event, 16)
	f := &follower{Events: events, c: c, path: path, giveUp: giveUp, onOpen: onOpen, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer close(events)
		f.err = f.run(ctx, first, events)
	}()
	return f, nil
}

// Wait returns once the follower's goroutine has ended (its context ended,
// or Events was closed).
func (f *follower) Wait() { <-f.done }

// Err is why the follower ended; read it once Events is closed.
func (f *follower) Err() error {
	<-f.done
	return f.err
}

// run passes on the events of each stream and opens the next one when a
// stream ends, until ctx ends or reopen fails for good.
func (f *follower) run(ctx context.Context, stream <-chan sse.Event, out chan<- sse.Event) error {
	for {
		for ev := range stream {
			if ev.ID != "" {
				f.lastID = ev.ID
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var err error
		if stream, err = f.reopen(ctx); err != nil {
			return err
		}
		if f.onOpen != nil {
			f.onOpen()
		}
	}
}

// reopen opens the stream again, retrying with backoff while the sidecar is
// unreachable or restarting, until ctx ends, the answer is final, or giveUp
// passes.
func (f *follower) reopen(ctx context.Context) (<-chan sse.Event, error) {
	var b backoff
	start := time.Now()
	for {
		if err := sleep(ctx, b.pause()); err != nil {
			return nil, err
		}
		stream, err := f.c.stream(ctx, f.path, f.lastID)
		switch {
		case err == nil:
			return stream, nil
		case !retryable(err):
			return nil, err
		case f.giveUp > 0 && time.Since(start) > f.giveUp:
			return nil, fmt.Errorf("the sidecar was not reached again within %s: %w", f.giveUp, err)
		}
	}
}
