package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// Op is one operation of a transaction: CreateOp, SetOp, DeleteOp or CheckOp.
type Op interface {
	request(acl []zk.ACL) any
	size() int
}

// CreateOp creates Path (mode: Persistent, Ephemeral, ..., with the sequence
// flag for a sequential node).
type CreateOp struct {
	Path string
	Data []byte
	Mode int32
}

// SetOp writes Path's data if its version is Version (-1: any).
type SetOp struct {
	Path    string
	Data    []byte
	Version int32
}

// DeleteOp deletes Path if its version is Version (-1: any).
type DeleteOp struct {
	Path    string
	Version int32
}

// CheckOp fails the transaction unless Path's version is Version.
type CheckOp struct {
	Path    string
	Version int32
}

func (o CreateOp) request(acl []zk.ACL) any {
	return &zk.CreateRequest{Path: o.Path, Data: o.Data, Acl: acl, Flags: o.Mode}
}
func (o SetOp) request([]zk.ACL) any {
	return &zk.SetDataRequest{Path: o.Path, Data: o.Data, Version: o.Version}
}
func (o DeleteOp) request([]zk.ACL) any {
	return &zk.DeleteRequest{Path: o.Path, Version: o.Version}
}
func (o CheckOp) request([]zk.ACL) any {
	return &zk.CheckVersionRequest{Path: o.Path, Version: o.Version}
}

func (o CreateOp) size() int { return len(o.Path) + len(o.Data) + 64 }
func (o SetOp) size() int    { return len(o.Path) + len(o.Data) + 32 }
func (o DeleteOp) size() int { return len(o.Path) + 32 }
func (o CheckOp) size() int  { return len(o.Path) + 32 }

// OpResult is the answer to one Op of a transaction: the created path of a
// CreateOp, the new stat of a SetOp, and the op's error when the transaction
// was refused (ErrNoNode, ErrBadVersion, ...; nil for the ops that were fine).
type OpResult struct {
	Path string
	Stat *Stat
	Err  error
}

// FailedOp returns the index of the op of a refused transaction whose error is
// err (errors.Is), or -1.
func FailedOp(res []OpResult, err error) int {
	for i, r := range res {
		if r.Err != nil && errors.Is(r.Err, err) {
			return i
		}
	}
	return -1
}

// Multi applies ops, all or none, in one transaction of its own. A refused
// transaction answers every op (the failing one with its error) and the error
// of the failing op; see SharedMulti for transactions shared between callers.
func (ep *Epoch) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	reqs := make([]any, len(ops))
	acl := ep.s.acl()
	for i, o := range ops {
		reqs[i] = o.request(acl)
	}
	var res []zk.MultiResponse
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		res, err = c.Multi(reqs...)
		return err
	})
	return results(res), err
}

func results(res []zk.MultiResponse) []OpResult {
	if res == nil {
		return nil
	}
	out := make([]OpResult, len(res))
	for i, r := range res {
		out[i] = OpResult{Path: r.String, Stat: r.Stat, Err: r.Error}
	}
	return out
}
