package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
)

// linePlace is where a node stands in the line of its parent's sequential
// children: locks and elections share it.
type linePlace struct {
	// Head is true when the node is first in line (holds the lock, leads).
	Head bool
	// Czxid is the node's creation zxid: the fencing token or term it carries.
	Czxid int64
	// Line is the line as last listed, sorted by sequence suffix.
	Line []string
}

// awaitHead waits up to wait (0: look once) until node is first among its
// parent's sequential children, watching only its predecessor, so that a release
// wakes one waiter. It returns the place when node is first or when wait ends
// (Head false); ErrLeaseEnded when ending closes, ErrSessionLost when the session
// is lost or the node vanished, ctx's error when ctx ends. A suspended session is
// waited out within wait; the head is reported only while connected under the
// node's own session, never while suspended.
//
// Round trips on the hot path: a node made by a stamped create that was alone
// under its parent is the head at once, with the czxid its create's answer
// carried (no node with a lower sequence can appear later). Otherwise the line
// is listed, and a czxid not known yet is read with an exists sent together with
// that listing, so the two cost one round trip. When the predecessor was the head
// of the listed line and is deleted, the node is the head without listing again
// (every node created later has a higher sequence); when this sidecar lets the
// predecessor go as the head, the node is the head at once (handoffs).
func awaitHead(ctx context.Context, ep *epoch, c created, wait time.Duration, ending <-chan struct{}) (linePlace, error) {
	node := c.Path
	parent, self := path.Split(node)
	parent = path.Clean(parent)
	var deadline <-chan time.Time
	waitCtx := ctx // bounds waiting for a suspended session to come back
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	expired := func() bool {
		select {
		case <-deadline:
			return true
		default:
			return wait <= 0
		}
	}
	place := linePlace{Czxid: c.Czxid}
	var children []string
	list := func() error {
		var err error
		children, _, err = ep.s.lister.children(ctx, ep, parent)
		return err
	}
	readCzxid := func() error {
		return ep.call(ctx, func(c *zk.Conn) error {
			_, st, err := c.Exists(node)
			if err == nil && st != nil {
				place.Czxid = st.Czxid
			}
			return err
		})
	}
	head := func() (linePlace, error) {
		if place.Czxid == 0 {
			if err := readCzxid(); err != nil {
				return place, err
			}
			if place.Czxid == 0 {
				return place, fmt.Errorf("node %s vanished: %w", node, ErrSessionLost)
			}
		}
		if cur, _ := ep.s.current(); cur != ep {
			if err := waitConnected(waitCtx, ep); err != nil {
				return place, err
			}
		}
		place.Head = true
		return place, nil
	}
	// waitGone watches pred (reading the czxid alongside when not known yet)
	// until it goes or this sidecar hands its place over, and tells whether it
	// went; errWaitOver when wait ends first.
	waitGone := func(pred string, handed <-chan struct{}) (bool, error) {
		var watch <-chan zk.Event
		var exists bool
		watchPred := func() error {
			return ep.call(ctx, func(c *zk.Conn) error {
				var err error
				exists, _, watch, err = c.ExistsW(pred)
				return err
			})
		}
		var err error
		if place.Czxid == 0 {
			err = parallel(watchPred, readCzxid)
		} else {
			err = watchPred()
		}
		if err != nil || !exists {
			return !exists, err
		}
		select {
		case ev := <-watch:
			return ev.Type == zk.EventNodeDeleted, nil
		case <-handed:
			return true, nil
		case <-deadline:
			return false, errWaitOver
		case <-ctx.Done():
			return false, ctx.Err()
		case <-ending:
			return false, ErrLeaseEnded
		case <-ep.lost:
			return false, ErrSessionLost
		}
	}
	if c.Alone && c.Czxid != 0 {
		place.Line = []string{self}
		return head()
	}
	var err error
	if place.Czxid == 0 {
		err = parallel(list, readCzxid)
	} else {
		err = list()
	}
	for {
		if err != nil {
			if errors.Is(err, ErrUnavailable) && ctx.Err() == nil && !expired() {
				if err = waitConnected(waitCtx, ep); err == nil {
					err = list()
				}
				continue
			}
			return place, err
		}
		place.Line = sortBySeq(children)
		idx := indexOf(place.Line, self)
		if idx < 0 {
			return place, fmt.Errorf("node %s vanished: %w", node, ErrSessionLost)
		}
		if idx == 0 {
			return head()
		}
		if expired() {
			return place, nil
		}
		pred := parent + "/" + place.Line[idx-1]
		handed, stopWaiting := ep.s.handoffs.await(pred)
		var gone bool
		gone, err = waitGone(pred, handed)
		stopWaiting()
		switch {
		case errors.Is(err, errWaitOver):
			return place, nil
		case err != nil:
			continue
		case gone && idx == 1, gone && handedOver(handed):
			return head()
		}
		err = list()
	}
}

// errWaitOver ends awaitHead's watch when wait is over.
var errWaitOver = errors.New("wait over")

// handedOver tells whether handed has fired.
func handedOver(handed <-chan struct{}) bool {
	select {
	case <-handed:
		return true
	default:
		return false
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// parallel runs the functions at once and returns the first error. Calls on one
// ZooKeeper connection are pipelined, so two calls cost one round trip.
func parallel(fns ...func() error) error {
	errs := make(chan error, len(fns))
	for _, f := range fns[1:] {
		go func() { errs <- f() }()
	}
	first := fns[0]()
	for range fns[1:] {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}
