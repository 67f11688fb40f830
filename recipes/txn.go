package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// Shared transactions. Independent callers' small writes on one connection (the
// creates and deletes of lock and election contenders) are grouped into one
// ZooKeeper multi (groupCommit): the server then handles one request, and logs
// one transaction, for many callers. Grouping never changes an outcome:
//   - when the server refuses a shared transaction (one caller's op failed),
//     nothing of it was applied, and each caller's ops are sent again alone;
//   - when its answer is lost or cannot be read, every caller gets
//     ErrUnavailable, as it would alone, and recovers as it would alone (finds
//     its node, or deletes again);
//   - every change of one transaction carries its zxid, so two creates under
//     one parent (whose czxids are fencing tokens and terms) never share a
//     transaction.

// txnReq is one caller's ops waiting for a shared transaction.
type txnReq struct {
	ops   []any
	key   string // a parent under which no other request of the batch may create, or ""
	bytes int
	res   []zk.MultiResponse
	err   error
	done  chan struct{}
}

const (
	// maxTxnOps and maxTxnBytes bound one shared transaction, well below
	// jute.maxbuffer (1 MiB by default).
	maxTxnOps   = 128
	maxTxnBytes = 512 << 10
	// maxTxnFlushes bounds the shared transactions under way at once.
	maxTxnFlushes = 2
)

func newTxnWriter(ep *epoch) *groupCommit[*txnReq] {
	return &groupCommit[*txnReq]{maxFlushes: maxTxnFlushes, take: takeTxn, send: ep.sendTxn}
}

// multi applies ops, all or none, possibly in one transaction with other
// callers' ops (see Shared transactions). key names a parent under which ops
// create a node ("" for none): no other request with that key joins the
// transaction. It returns the answers to ops, and errors as
// epoch.call does.
func (ep *epoch) multi(ctx context.Context, key string, ops ...any) ([]zk.MultiResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	r := &txnReq{ops: ops, key: key, done: make(chan struct{})}
	for _, op := range ops {
		r.bytes += opBytes(op)
	}
	ep.txns.submit(r)
	select {
	case <-r.done:
	case <-ctx.Done():
		if ep.txns.withdraw(r) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
		<-r.done // sent already: its answer comes within the call's timeout
	}
	return r.res, r.err
}

func opBytes(op any) int {
	switch o := op.(type) {
	case *zk.CreateRequest:
		return len(o.Path) + len(o.Data) + 64
	case *zk.SetDataRequest:
		return len(o.Path) + len(o.Data) + 32
	case *zk.DeleteRequest:
		return len(o.Path) + 32
	case *zk.CheckVersionRequest:
		return len(o.Path) + 32
	}
	return 64
}

// takeTxn takes pending requests, in order, up to the bounds and up to the
// first one whose key is already in the batch.
func takeTxn(pending []*txnReq) int {
	n, ops, size := 0, 0, 0
	var keys []string
	for ; n < len(pending); n++ {
		r := pending[n]
		if n > 0 && (ops+len(r.ops) > maxTxnOps || size+r.bytes > maxTxnBytes) {
			break
		}
		if r.key != "" {
			if slices.Contains(keys, r.key) {
				break
			}
			keys = append(keys, r.key)
		}
		ops += len(r.ops)
		size += r.bytes
	}
	return n
}

// sendTxn sends one shared transaction and answers its requests.
func (ep *epoch) sendTxn(batch []*txnReq) {
	ep.s.metrics.txns.Inc()
	ep.s.metrics.txnRequests.Add(float64(len(batch)))
	if len(batch) == 1 {
		batch[0].res, batch[0].err = ep.sendOps(batch[0].ops)
		close(batch[0].done)
		return
	}
	var ops []any
	for _, r := range batch {
		ops = append(ops, r.ops...)
	}
	res, err := ep.sendOps(ops)
	switch {
	case err == nil:
		for _, r := range batch {
			r.res, res = res[:len(r.ops):len(r.ops)], res[len(r.ops):]
		}
	case refused(res, len(ops)):
		// Nothing was applied: each caller's ops alone, pipelined.
		alone := make([]func() error, len(batch))
		for i, r := range batch {
			alone[i] = func() error {
				r.res, r.err = ep.sendOps(r.ops)
				return nil
			}
		}
		_ = parallel(alone...)
	default:
		for _, r := range batch {
			r.err = err
		}
	}
	for _, r := range batch {
		close(r.done)
	}
}

// refused tells whether a failed multi was refused by the server, which then
// answers every op (one of them with its error) and applies none.
func refused(res []zk.MultiResponse, ops int) bool {
	if len(res) != ops {
		return false
	}
	for _, r := range res {
		if r.Error != nil {
			return true
		}
	}
	return false
}

// sendOps sends ops as one multi, with errors as epoch.call gives them, except
// that a failure that is not the server's refusal (a lost answer, or one that
// could not be read) is ErrUnavailable or ErrSessionLost: the ops may have been
// applied, and callers recover as from a lost answer.
func (ep *epoch) sendOps(ops []any) ([]zk.MultiResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ep.s.cfg.OpTimeout)
	defer cancel()
	var res []zk.MultiResponse
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		res, err = c.Multi(ops...)
		return err
	})
	switch {
	case err == nil && len(res) != len(ops):
		err = fmt.Errorf("%w: a transaction of %d ops answered with %d results", ErrUnavailable, len(ops), len(res))
	case err == nil, refused(res, len(ops)), errors.Is(err, ErrUnavailable), errors.Is(err, ErrSessionLost):
	default:
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return res, err
}
