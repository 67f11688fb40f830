package line

import "sync"

// Handoffs passes a line's head between waiters of this sidecar without waiting
// for ZooKeeper, and tells a waiter when the node it waits on, a contender of
// this sidecar, is deleted here.
//
// A node that holds the head of its line (a granted lock) and is let go by this
// sidecar makes its successor the head: every node before it is gone already,
// and no node can come between them (sequence numbers only grow). So the
// successor may be told at once, before the delete is applied: until then both
// nodes are this session's, in front of every other contender, so no other
// client can be granted meanwhile, and the successor's fencing token (its czxid)
// is higher.
//
// A node this sidecar made (Enter) and has not deleted yet is local: it can only
// go by this sidecar's own delete (LetGo or Left, which tell its waiters), by the
// end of the session (which every waiter watches), or by another client deleting
// it behind the sidecar's back. A waiter on a local node therefore sets no
// ZooKeeper watch at first: on a hot lock whose waiters are all here, a handoff
// costs ZooKeeper the create and the delete, not a watch as well. A waiter still
// sets its watch after LocalGrace, so that a node deleted by another client is
// noticed then.
//
// Its zero value is ready to use; a recipe keeps one for all its lines.
type Handoffs struct {
	mu      sync.Mutex
	local   map[string]struct{}            // this sidecar's contender nodes, until deleted here
	waiting map[string][]*predecessorWatch // node → waits on it
}

// predecessorWatch is one wait on a node: handed closes when the node, as the
// head, is let go; gone closes when it is deleted here otherwise.
type predecessorWatch struct {
	handed chan struct{}
	gone   chan struct{}
	// local tells whether the node was this sidecar's, not yet deleted, when the
	// wait began: then handed or gone is sure to close when it is deleted here.
	local bool
}

// Enter marks node as this sidecar's contender. Every node entered is later
// ended with LetGo or Left.
func (h *Handoffs) Enter(node string) {
	h.mu.Lock()
	if h.local == nil {
		h.local = map[string]struct{}{}
	}
	h.local[node] = struct{}{}
	h.mu.Unlock()
}

// await begins a wait on node, and returns a function that ends it.
func (h *Handoffs) await(node string) (*predecessorWatch, func()) {
	pw := &predecessorWatch{handed: make(chan struct{}), gone: make(chan struct{})}
	h.mu.Lock()
	if h.waiting == nil {
		h.waiting = map[string][]*predecessorWatch{}
	}
	_, pw.local = h.local[node]
	h.waiting[node] = append(h.waiting[node], pw)
	h.mu.Unlock()
	return pw, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.waiting[node]
		for i, p := range list {
			if p == pw {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(h.waiting, node)
		} else {
			h.waiting[node] = list
		}
	}
}

// LetGo tells the waiters on node, which held the head of its line, that their
// node is the head, and whether there were any. The caller deletes node next.
func (h *Handoffs) LetGo(node string) bool {
	list := h.end(node)
	for _, pw := range list {
		close(pw.handed)
	}
	return len(list) > 0
}

// Left tells the waiters on node that it was deleted here (its delete was
// answered, or the session is gone), without handing them the head: they look
// at the line again. After LetGo it does nothing.
func (h *Handoffs) Left(node string) {
	for _, pw := range h.end(node) {
		close(pw.gone)
	}
}

// end forgets node and returns the waits on it.
func (h *Handoffs) end(node string) []*predecessorWatch {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.local, node)
	list := h.waiting[node]
	delete(h.waiting, node)
	return list
}
