package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"

	"github.com/go-zookeeper/zk"
)

const (
	// maxBatch and maxBatchBytes bound one enqueue transaction (ZooKeeper refuses a
	// request above jute.maxbuffer, 1 MiB by default); an item of any allowed size
	// still goes alone.
	maxBatch      = 128
	maxBatchBytes = 768 << 10
	// enqueueAttempts bounds the retries of one batch (stale tails, lost answers).
	enqueueAttempts = 20
)

// Enqueue stores payload with its content type ("" stores DefaultContentType) at
// the end of priority prio (0..MaxPriority) and returns the item's id. The item
// is persistent. Concurrent enqueues to one queue and priority through this
// sidecar are written in one transaction, in arrival order. When ctx ends before
// the item was sent, nothing is stored; ErrUnavailable means it may or may not
// have been stored (the answer was lost and the item could not be found again).
func (q *Queues) Enqueue(ctx context.Context, name string, prio int, contentType string, payload []byte) (string, error) {
	if err := CheckName("queue", name); err != nil {
		return "", err
	}
	if prio < 0 || prio > MaxPriority {
		return "", fmt.Errorf("priority %d: must be between 0 and %d: %w", prio, MaxPriority, ErrInvalidArgument)
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	if len(contentType) > maxContentType {
		return "", fmt.Errorf("content type of %d bytes: at most %d: %w", len(contentType), maxContentType, ErrInvalidArgument)
	}
	if _, err := q.s.current(); err != nil {
		return "", err
	}
	data, h := encodeItem(contentType, payload)
	token := newToken()
	req := &enqReq{data: data, prefix: itemPrefix(h, token), token: token, done: make(chan struct{})}
	st := q.state(name)
	b := st.batcher(prio)
	b.submit(req)
	select {
	case <-req.done:
	case <-ctx.Done():
		if b.withdraw(req) {
			return "", ctx.Err()
		}
		<-req.done // sent already: its outcome is known soon (calls are bounded)
	}
	if req.err != nil {
		return "", req.err
	}
	q.metrics.enqueued.Inc()
	st.enqueued(prio)
	return req.id, nil
}

// enqReq is one enqueue waiting for its transaction.
type enqReq struct {
	data   []byte
	prefix string
	token  string
	done   chan struct{}
	id     string
	err    error
}

// enqBatcher writes the enqueues of one queue and priority, grouped into
// transactions (groupCommit, up to maxFlushes pipelined on the connection). It
// remembers the tail bucket between transactions.
type enqBatcher struct {
	q    *Queues
	name string
	prio int
	groupCommit[*enqReq]

	mu   sync.Mutex // guards tail
	tail int64      // -1 unknown
}

// maxFlushes bounds the transactions of one batcher under way at once.
const maxFlushes = 1

func (st *queueState) batcher(p int) *enqBatcher {
	st.bmu.Lock()
	defer st.bmu.Unlock()
	b := st.batchers[p]
	if b == nil {
		b = &enqBatcher{q: st.q, name: st.name, prio: p, tail: -1}
		b.groupCommit = groupCommit[*enqReq]{maxFlushes: maxFlushes, take: takeEnqueues, send: b.write}
		st.batchers[p] = b
	}
	return b
}

// takeEnqueues bounds one transaction by maxBatch items and maxBatchBytes (an
// item of any allowed size still goes alone).
func takeEnqueues(pending []*enqReq) int {
	n, size := 0, 0
	for n < len(pending) && n < maxBatch && (n == 0 || size+len(pending[n].data) <= maxBatchBytes) {
		size += len(pending[n].data)
		n++
	}
	return n
}

// write flushes a batch and answers its requests.
func (b *enqBatcher) write(batch []*enqReq) {
	err := b.flush(batch)
	for _, r := range batch {
		if err != nil {
			r.err = err
		}
		close(r.done)
	}
}

// flush writes one batch: Check(tail is open) + one sequential create per item.
func (b *enqBatcher) flush(batch []*enqReq) error {
	q := b.q
	ctx, cancel := context.WithTimeout(context.Background(), 3*q.s.cfg.OpTimeout)
	defer cancel()
	for attempt := 0; attempt < enqueueAttempts; attempt++ {
		changed := q.s.Changed()
		ep, err := q.s.current()
		if err != nil {
			if errors.Is(err, ErrClosed) || !waitChange(ctx, changed) {
				return err
			}
			continue
		}
		bucket := b.getTail()
		if bucket < 0 {
			if bucket, err = q.findTail(ctx, ep, b.name, b.prio); err != nil {
				if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
					continue
				}
				return err
			}
			b.setTail(-1, bucket)
		}
		bp := q.bpath(b.name, b.prio, bucket)
		ops := make([]any, 0, len(batch)+1)
		ops = append(ops, &zk.CheckVersionRequest{Path: bp, Version: 0})
		for _, r := range batch {
			ops = append(ops, &zk.CreateRequest{Path: bp + "/" + r.prefix, Data: r.data, Acl: openACL, Flags: zk.FlagSequence})
		}
		var mr []zk.MultiResponse
		err = ep.call(ctx, func(c *zk.Conn) error {
			var err error
			mr, err = c.Multi(ops...)
			return err
		})
		switch {
		case err == nil:
			top := int64(0)
			for i, r := range batch {
				ref, ok := b.ref(bucket, path.Base(mr[i+1].String))
				if !ok {
					return fmt.Errorf("queue %q: unexpected node %q", b.name, mr[i+1].String)
				}
				r.id = ref.key
				top = max(top, ref.seq)
			}
			if top >= bucketSize-1 {
				q.closeBucket(ctx, ep, b.name, b.prio, bucket)
				b.setTail(bucket, bucket+1)
			}
			return nil
		case errors.Is(err, zk.ErrBadVersion):
			b.setTail(bucket, bucket+1) // closed: the next one was made with it
		case errors.Is(err, zk.ErrNoNode):
			b.setTail(bucket, -1) // drained and deleted, or a new queue: look it up
		case errors.Is(err, ErrUnavailable), errors.Is(err, ErrSessionLost):
			// The transaction may have been applied: find our items once connected.
			if !b.recover(ctx, bucket, batch) {
				if ctx.Err() != nil {
					return fmt.Errorf("queue %q: %w", b.name, ErrUnavailable)
				}
				continue
			}
			return nil
		default:
			return fmt.Errorf("enqueue to %q: %w", b.name, err)
		}
	}
	return fmt.Errorf("enqueue to %q: gave up after %d attempts: %w", b.name, enqueueAttempts, ErrUnavailable)
}

func (b *enqBatcher) getTail() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tail
}

// setTail moves the cached tail from old to next, unless another flush moved it
// meanwhile.
func (b *enqBatcher) setTail(old, next int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tail == old {
		b.tail = next
	}
}

func (b *enqBatcher) ref(bucket int64, name string) (itemRef, bool) {
	seq, _, _, ok := parseItemName(name)
	r := itemRef{prio: b.prio, bucket: bucket, seq: seq, name: name}
	r.key = r.id()
	return r, ok
}

// recover looks for a batch whose answer was lost; the transaction is atomic, so
// finding one item finds them all. It reports whether they were found.
func (b *enqBatcher) recover(ctx context.Context, bucket int64, batch []*enqReq) bool {
	q := b.q
	for ctx.Err() == nil {
		changed := q.s.Changed()
		ep, err := q.s.current()
		if err != nil {
			if !waitChange(ctx, changed) {
				return false
			}
			continue
		}
		names, _, _, err := q.listBucket(ctx, ep, q.bpath(b.name, b.prio, bucket), false)
		if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost) {
			continue
		}
		if err != nil {
			return false // gone (drained since, or never made): send again
		}
		byToken := map[string]string{}
		for _, n := range names {
			if _, _, tok, ok := parseItemName(n); ok {
				byToken[tok] = n
			}
		}
		if _, ok := byToken[batch[0].token]; !ok {
			return false
		}
		for _, r := range batch {
			ref, _ := b.ref(bucket, byToken[r.token])
			r.id = ref.key
		}
		return true
	}
	return false
}

func waitChange(ctx context.Context, changed <-chan struct{}) bool {
	select {
	case <-changed:
		return true
	case <-ctx.Done():
		return false
	}
}

// findTail returns the open bucket of priority p, making the queue, the priority
// and the first bucket when missing.
func (q *Queues) findTail(ctx context.Context, ep *epoch, name string, p int) (int64, error) {
	pp := q.ppath(name, p)
	for range 3 {
		if err := ensurePersistent(ctx, ep, pp); err != nil {
			return 0, err
		}
		var children []string
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			children, _, err = c.Children(pp)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			// Deleted behind the cache of known paths: make it again.
			q.s.knownPaths.Delete(pp)
			q.s.knownPaths.Delete(q.qpath(name))
			continue
		}
		if err != nil {
			return 0, err
		}
		tail := int64(-1)
		for _, ch := range children {
			if b, ok := parseBucket(ch); ok && b > tail {
				tail = b
			}
		}
		if tail >= 0 {
			return tail, nil
		}
		err = ep.call(ctx, func(c *zk.Conn) error {
			_, err := c.Create(q.bpath(name, p, 0), nil, zk.FlagPersistent, openACL)
			return err
		})
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			return 0, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("queue %q: priority %d keeps vanishing: %w", name, p, ErrUnavailable)
}

// closeBucket closes bucket b and opens b+1 in one transaction; someone else
// having done it already is fine.
func (q *Queues) closeBucket(ctx context.Context, ep *epoch, name string, p int, b int64) {
	_ = ep.call(ctx, func(c *zk.Conn) error {
		_, err := c.Multi(
			&zk.SetDataRequest{Path: q.bpath(name, p, b), Data: []byte("closed"), Version: 0},
			&zk.CreateRequest{Path: q.bpath(name, p, b+1), Acl: openACL, Flags: zk.FlagPersistent},
		)
		return err
	})
}
