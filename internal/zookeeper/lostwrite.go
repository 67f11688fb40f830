package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
)

// A write whose answer was lost. When the connection a write was sent on goes
// away before its answer came (a ZooKeeper server restarting: "zk: connection
// closed"), the write may or may not have been applied. SetChecked,
// DeleteChecked, CreateChecked and MultiChecked find out, under a context of
// WithSuspendWait and within its allowance: once the session's connection is
// back they make its server catch up with the leader (sync) and read the node,
// then
//
//   - adopt the write when the node shows it (its answer is made from what
//     was read),
//   - send it again when the node shows that nothing wrote it since before the
//     write was sent (its mzxid, czxid or its parent's pzxid no later than the
//     last zxid the session had seen then: Epoch.LastZxid),
//   - and otherwise return ErrUnavailable with errOutcomeUnknown: nothing is
//     sent twice when it may have been applied.
//
// Why a read after the connection is back tells: a session that reconnects is
// revalidated through the leader, which from then on refuses whatever the old
// server still forwards for it (session moved); so the lost write was decided
// before, and the sync puts the new server past it.
//
// What shows a write (zxid L: the last one seen before sending):
//
//   - Set at version v: the node at version v+1, mzxid > L, holding the data
//     written. Set at any version (-1): mzxid > L and the data written. Not
//     applied: mzxid <= L.
//   - Create (not sequential): the node with czxid > L, version 0 and the data
//     written (an ephemeral one owned by this session). Not applied: absent with
//     its parent's pzxid <= L, or present with czxid <= L.
//   - Delete: the node absent and its parent's pzxid > L. Not applied: present
//     with czxid <= L, or absent with its parent's pzxid <= L.
//
// The case the checks cannot tell apart: another client making, in the same
// instant, the very same change (the same data from the same version, the same
// create, a delete of the same node); that write is then taken as this one.
// Every other outcome that cannot be told (the node changed again, or was
// deleted, since) stays unknown.

// errOutcomeUnknown is the cause of a write whose answer was lost and whose
// outcome could not be told.
var errOutcomeUnknown = errors.New("the write was sent but its answer was lost with the connection, and whether ZooKeeper applied it cannot be told")

// maxLostResends bounds how many times a write whose answer was lost is sent
// again after it was found not applied.
const maxLostResends = 4

// answerLost tells whether err (from call) is a write's answer lost with its
// connection: sent, not refused, not cut short by the caller.
func answerLost(err error) bool {
	return errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrSessionLost) && !errors.Is(err, errNotBack) &&
		!errors.Is(err, zk.ErrNoServer) && !errors.Is(err, errDeadline) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// outcome of a lost write, as the node shows it.
type outcome int

const (
	unknown outcome = iota
	applied
	notApplied
)

// SetChecked is Set recovering from a lost answer (see above).
func (ep *Epoch) SetChecked(ctx context.Context, p string, data []byte, version int32) (*Stat, error) {
	res, err := ep.checked(ctx, SetOp{Path: p, Data: data, Version: version}, func() ([]OpResult, error) {
		st, err := ep.Set(ctx, p, data, version)
		return []OpResult{{Stat: st}}, err
	})
	if len(res) == 0 {
		return nil, err
	}
	return res[0].Stat, err
}

// DeleteChecked is Delete recovering from a lost answer (see above).
func (ep *Epoch) DeleteChecked(ctx context.Context, p string, version int32) error {
	_, err := ep.checked(ctx, DeleteOp{Path: p, Version: version}, func() ([]OpResult, error) {
		return nil, ep.Delete(ctx, p, version)
	})
	return err
}

// CreateChecked is Create recovering from a lost answer (see above); a
// sequential create cannot be checked (use CreateProtected).
func (ep *Epoch) CreateChecked(ctx context.Context, p string, data []byte, mode int32) (string, error) {
	res, err := ep.checked(ctx, CreateOp{Path: p, Data: data, Mode: mode}, func() ([]OpResult, error) {
		made, err := ep.Create(ctx, p, data, mode)
		return []OpResult{{Path: made}}, err
	})
	if len(res) == 0 {
		return "", err
	}
	return res[0].Path, err
}

// MultiChecked is Multi recovering from a lost answer (see above): ops[0], a
// SetOp, CreateOp or DeleteOp, tells whether the transaction was applied. An
// adopted transaction answers ops[0] as read (the Stat of a SetOp, the Path of a
// CreateOp) and the other ops without a Stat.
func (ep *Epoch) MultiChecked(ctx context.Context, ops ...Op) ([]OpResult, error) {
	return ep.MultiCheckedOn(ctx, 0, ops...)
}

// MultiCheckedOn is MultiChecked with ops[i] telling whether the transaction
// was applied (e.g. the create of a node the transaction deletes first).
func (ep *Epoch) MultiCheckedOn(ctx context.Context, i int, ops ...Op) ([]OpResult, error) {
	res, err := ep.checked(ctx, ops[i], func() ([]OpResult, error) { return ep.Multi(ctx, ops...) })
	if err == nil && len(res) == 1 && len(ops) > 1 { // adopted: one result, ops[i]'s
		all := make([]OpResult, len(ops))
		all[i] = res[0]
		res = all
	}
	return res, err
}

// checked sends a write by send and, when its answer is lost, finds out
// whether it was applied (op is the write, or the deciding op of a
// transaction): it adopts it, sends it again, or returns ErrUnavailable
// wrapping errOutcomeUnknown.
func (ep *Epoch) checked(ctx context.Context, op Op, send func() ([]OpResult, error)) ([]OpResult, error) {
	var end time.Time
	for resends := 0; ; resends++ {
		before := ep.LastZxid()
		res, err := send()
		if !answerLost(err) {
			return res, err
		}
		if end.IsZero() {
			var ok bool
			if end, ok = suspendBound(ctx, time.Now()); !ok {
				return res, err // no allowance to wait: as it was
			}
		}
		lost := err
		if err := ep.awaitUntil(ctx, end); err != nil {
			return nil, fmt.Errorf("%w (%w: %w)", err, errOutcomeUnknown, lost)
		}
		got, read, err := ep.settle(ctx, op, before)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w (%w: %w)", err, errOutcomeUnknown, lost)
		case got == applied:
			ep.s.waits.lost.WithLabelValues("applied").Inc()
			return read, nil
		case got == notApplied && resends < maxLostResends:
			ep.s.waits.lost.WithLabelValues("resent").Inc()
			continue
		}
		ep.s.waits.lost.WithLabelValues("unknown").Inc()
		return nil, fmt.Errorf("%w: %w: %w", ErrUnavailable, errOutcomeUnknown, lost)
	}
}

// settle reads what became of op, sent after zxid before was seen, once the
// connection is back.
func (ep *Epoch) settle(ctx context.Context, op Op, before int64) (outcome, []OpResult, error) {
	var p string
	switch o := op.(type) {
	case SetOp:
		p = o.Path
	case CreateOp:
		if o.Mode&Sequential != 0 {
			return unknown, nil, nil
		}
		p = o.Path
	case DeleteOp:
		p = o.Path
	default:
		return unknown, nil, nil
	}
	if err := ep.Sync(ctx, p); err != nil {
		return unknown, nil, err
	}
	data, st, err := ep.Get(ctx, p)
	if err != nil && !errors.Is(err, ErrNoNode) {
		return unknown, nil, err
	}
	if err != nil {
		st = nil // absent
	}
	switch o := op.(type) {
	case SetOp:
		got, res := settleSet(o, data, st, before)
		return got, res, nil
	case CreateOp:
		if st != nil {
			got, res := ep.settleCreate(o, data, st, before)
			return got, res, nil
		}
		return ep.settleAbsent(ctx, p, before, notApplied)
	default: // DeleteOp
		if st != nil {
			if st.Czxid <= before {
				return notApplied, nil, nil // never deleted since
			}
			return unknown, nil, nil // deleted and made again since
		}
		return ep.settleAbsent(ctx, p, before, applied)
	}
}

// settleSet tells a set's outcome from the node (st nil: absent).
func settleSet(o SetOp, data []byte, st *Stat, before int64) (outcome, []OpResult) {
	switch {
	case st == nil:
		return unknown, nil // deleted since: it may have been written first
	case st.Mzxid <= before:
		return notApplied, nil
	case (o.Version < 0 || st.Version == o.Version+1) && bytes.Equal(data, o.Data):
		return applied, []OpResult{{Stat: st}}
	}
	return unknown, nil
}

// settleCreate tells a create's outcome from the node made.
func (ep *Epoch) settleCreate(o CreateOp, data []byte, st *Stat, before int64) (outcome, []OpResult) {
	switch {
	case st.Czxid <= before:
		return notApplied, nil // made before: the create would be refused
	case st.Version == 0 && bytes.Equal(data, o.Data) && (o.Mode != Ephemeral || st.EphemeralOwner == ep.ID()):
		return applied, []OpResult{{Path: o.Path, Stat: st}}
	}
	return unknown, nil
}

// settleAbsent tells the outcome of a write to p, found absent: notApplied when
// no child of p's parent was made or deleted since before, otherwise changed
// (a delete: applied; a create: made and deleted since, unknown).
func (ep *Epoch) settleAbsent(ctx context.Context, p string, before int64, changed outcome) (outcome, []OpResult, error) {
	ok, pst, err := ep.Exists(ctx, path.Dir(p))
	switch {
	case err != nil:
		return unknown, nil, err
	case ok && pst.Pzxid <= before:
		return notApplied, nil, nil
	case changed == applied:
		return applied, []OpResult{{}}, nil
	}
	return unknown, nil, nil
}

// IsOutcomeUnknown tells whether err is a write's answer lost with its
// connection whose outcome could not be told.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, errOutcomeUnknown) }
