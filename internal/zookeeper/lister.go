package zookeeper

import (
	"context"
	"sync"
	"time"
)

// lister coalesces listings of one parent's children: callers that ask while a
// listing is on the wire share the next one, so a burst of a thousand waiters on
// one lock costs a few listings instead of a thousand (each of them megabytes).
// A caller always gets a listing sent after it asked, so a node it created before
// asking is in it.
type lister struct {
	mu      sync.Mutex
	parents map[string]*listBatch
}

// listBatch is the callers waiting for the next listing of one parent.
type listBatch struct {
	waiting []chan listResult
	running bool // a listing is on the wire
}

type listResult struct {
	children []string
	pstat    *Stat
	err      error
	lead     bool // the receiver sends the next listing for everyone waiting
}

// ChildrenShared is Children, sharing the listing with concurrent callers of
// the same parent: every caller gets a listing sent after it asked. Under a
// context of WithSuspendWait it waits through a suspension, as a read does.
func (ep *Epoch) ChildrenShared(ctx context.Context, parent string) ([]string, *Stat, error) {
	var end time.Time
	for {
		if err := ep.AwaitConnected(ctx); err != nil {
			return nil, nil, err
		}
		children, st, err := ep.childrenShared(ctx, parent)
		again, err := ep.resend(ctx, err, true, &end)
		if !again {
			return children, st, err
		}
	}
}

func (ep *Epoch) childrenShared(ctx context.Context, parent string) ([]string, *Stat, error) {
	l := &ep.s.lister
	ch := make(chan listResult, 1)
	l.mu.Lock()
	if l.parents == nil {
		l.parents = map[string]*listBatch{}
	}
	b := l.parents[parent]
	if b == nil {
		b = &listBatch{}
		l.parents[parent] = b
	}
	b.waiting = append(b.waiting, ch)
	lead := !b.running
	if lead {
		b.running = true
	}
	l.mu.Unlock()
	if !lead {
		select {
		case r := <-ch:
			if !r.lead {
				return r.children, r.pstat, r.err
			}
		case <-ctx.Done():
			// The batch still delivers to ch (buffered) or hands it the lead; a
			// lead handed to a caller that left must be passed on. Once the
			// Session is closing, this caller does it: the batch under way
			// ends at once (its connection is closed), and so does the next.
			if !ep.s.Go(func() { l.passOn(ep, parent, ch) }) {
				l.passOn(ep, parent, ch)
			}
			return nil, nil, ctx.Err()
		}
	}
	return l.run(ep, parent, ch)
}

// run sends one listing for every caller waiting now and delivers it; it hands
// the lead to one of the callers that arrived meanwhile, if any.
func (l *lister) run(ep *Epoch, parent string, self chan listResult) ([]string, *Stat, error) {
	l.mu.Lock()
	b := l.parents[parent]
	batch := b.waiting
	b.waiting = nil
	l.mu.Unlock()

	// The listing serves every caller of the batch: one caller's context ending
	// must not fail it for the others.
	var r listResult
	r.children, r.pstat, r.err = ep.Children(context.Background(), parent)
	for _, ch := range batch {
		if ch != self {
			ch <- r
		}
	}
	l.mu.Lock()
	if len(b.waiting) > 0 {
		next := b.waiting[0]
		l.mu.Unlock()
		next <- listResult{lead: true}
	} else {
		b.running = false
		delete(l.parents, parent)
		l.mu.Unlock()
	}
	return r.children, r.pstat, r.err
}

// passOn serves a lead handed to a caller that gave up waiting.
func (l *lister) passOn(ep *Epoch, parent string, ch chan listResult) {
	if r := <-ch; r.lead {
		_, _, _ = l.run(ep, parent, ch)
	}
}
