package recipes

import "sync"

// handoffs passes a line's head between waiters of this sidecar without waiting
// for ZooKeeper. A node that holds the head of its line (a granted lock) and is
// let go by this sidecar makes its successor the head: every node before it is
// gone already, and no node can come between them (sequence numbers only grow).
// So the successor may be told at once, before the delete is applied: until
// then both nodes are this session's, in front of every other contender, so no
// other client can be granted meanwhile, and the successor's fencing token (its
// czxid) is higher. The waiter still watches its predecessor in ZooKeeper, for
// every other way that node can go.
type handoffs struct {
	mu      sync.Mutex
	waiting map[string][]chan struct{} // predecessor path → its successors' signals
}

// await returns a channel closed when node is let go as head by this sidecar,
// and a function that stops waiting.
func (h *handoffs) await(node string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	if h.waiting == nil {
		h.waiting = map[string][]chan struct{}{}
	}
	h.waiting[node] = append(h.waiting[node], ch)
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.waiting[node]
		for i, c := range list {
			if c == ch {
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

// letGo tells the successors of node, which held the head of its line, that
// they are the head. The caller deletes node next.
func (h *handoffs) letGo(node string) {
	h.mu.Lock()
	list := h.waiting[node]
	delete(h.waiting, node)
	h.mu.Unlock()
	for _, ch := range list {
		close(ch)
	}
}
