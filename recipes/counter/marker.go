package counter

import (
	"context"
	"errors"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Write markers. Every compare-and-set of a counter writes, in the same
// transaction, a fresh id to a marker node of the writing session for that
// counter: counter-writes/{name}.{session id in hex}, ephemeral. Only this
// session writes it, one compare-and-set at a time per counter (the adder's
// group commit; a set runs on its own, see below), so when the answer to a
// compare-and-set is lost with its connection, the marker tells for certain
// whether it was applied (zookeeper.MultiCheckedOn on the marker's op): an
// add is never applied twice, nor taken for another writer's identical one.
// A Set racing an Add on one sidecar may overwrite the marker; the check then
// finds the id not there and, its mzxid being newer, answers the outcome
// unknown rather than guess.

// markerDir is the markers' parent under the session's root.
const markerDir = "counter-writes"

// marker is ep's session's marker node for counter name.
func (c *Counters) marker(ep *zookeeper.Epoch, name string) string {
	return c.markDir + "/" + name + "." + strconv.FormatInt(ep.ID(), 16)
}

// cas writes v as counter name's value, at version when exists (a create
// otherwise), with a fresh id in the session's marker, and returns the
// value's new stat (nil when a lost answer was adopted: the write was
// applied, its stat not read). ZooKeeper's refusal of the value's op comes
// back as it is (ErrBadVersion, ErrNodeExists, ErrNoNode).
func (c *Counters) cas(ctx context.Context, ep *zookeeper.Epoch, name string, v int64, version int32, exists bool) (*zookeeper.Stat, error) {
	p, m := c.node(name), c.marker(ep, name)
	var valueOp zookeeper.Op = zookeeper.SetOp{Path: p, Data: encode(v), Version: version}
	if !exists {
		valueOp = zookeeper.CreateOp{Path: p, Data: encode(v), Mode: zookeeper.Persistent}
	}
	id := []byte(kit.NewID())
	_, known := c.marked.Load(m)
	for attempt := 0; ; attempt++ {
		var markOp zookeeper.Op = zookeeper.SetOp{Path: m, Data: id, Version: -1}
		if !known {
			markOp = zookeeper.CreateOp{Path: m, Data: id, Mode: zookeeper.Ephemeral}
		}
		res, err := ep.MultiCheckedOn(ctx, 1, valueOp, markOp)
		if err == nil {
			c.marked.Store(m, true)
			return res[0].Stat, nil
		}
		if len(res) != 2 {
			return nil, err // no answer, or one that could not be told
		}
		if attempt >= 4 {
			return nil, firstErr(res[0].Err, res[1].Err)
		}
		retry, err := c.repairRefused(ctx, ep, res, exists, m, &known)
		if !retry {
			return nil, err
		}
	}
}

// repairRefused mends what made cas's multi fail, when it can be mended, and
// says whether to send it again: the counters' parent deleted (made again),
// the marker gone (its session's end, or by hand: made again, its parent too)
// or already there (set instead of created). Otherwise the refusal comes back:
// the value's op's first, then the marker's.
func (c *Counters) repairRefused(ctx context.Context, ep *zookeeper.Epoch, res []zookeeper.OpResult, exists bool, m string, known *bool) (bool, error) {
	valueErr, markErr := res[0].Err, res[1].Err
	switch {
	case !exists && errors.Is(valueErr, zookeeper.ErrNoNode):
		err := ep.EnsurePersistent(ctx, c.dir) // the counters' parent deleted
		return err == nil, err
	case valueErr != nil:
		return false, valueErr
	case errors.Is(markErr, zookeeper.ErrNoNode):
		c.marked.Delete(m)
		if *known {
			*known = false // deleted (its session's end, or by hand): made again
			return true, nil
		}
		err := ep.EnsurePersistent(ctx, c.markDir)
		return err == nil, err
	case errors.Is(markErr, zookeeper.ErrNodeExists):
		*known = true
		return true, nil
	}
	return false, markErr
}

// firstErr is the first of errs that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
