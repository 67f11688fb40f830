package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/guid"
)

// Created is a node made by CreateProtected.
type Created struct {
	// Path is the node's full path; GUID the guid of its protected prefix.
	Path string
	GUID string
	// Czxid is the node's creation zxid, and Alone tells that the node was its
	// parent's only child just after the create. Both are known only from a
	// stamped create whose answer came (Czxid 0 otherwise).
	Czxid int64
	Alone bool
	// Siblings is the parent's number of children just after the create, the
	// node included (0 when not known): a semaphore's lease count.
	Siblings int
}

// CreateProtected creates the ephemeral sequential node
// parent/_c_<guid>-<infix><seq> under ep's session, with a fresh guid, creating
// parent as a container when missing. When the create's answer is lost with the
// connection, it waits for the same session to come back and adopts the node it
// finds by its guid, but only if that node's ephemeral owner is this session; a
// lost session is ErrSessionLost. On failure the node, if it was made after all,
// is deleted before CreateProtected returns (CleanupProtected: in a suspension
// longer than OpTimeout, the delete goes on in the background).
//
// A stamped create sends, in one shared transaction with the create, a write of
// empty data to parent: every change of one transaction carries its zxid, so the
// parent's stat in the answer tells the node's czxid (the parent's new mzxid) and
// whether the node is alone under parent (its child count), without a second
// request. Only parents whose data is the sidecar's own (the lines of locks and
// elections, always empty) may be stamped; parents whose ACL refuses this
// session the write are then created without the stamp.
func (ep *Epoch) CreateProtected(ctx context.Context, parent, infix string, data []byte, stamp bool) (Created, error) {
	want, guid := protectedPath(parent, infix)
	c, err := ep.createProtected(ctx, parent, want, guid, data, stamp)
	if err != nil {
		ep.CleanupProtected(parent, guid, "")
	}
	return c, err
}

// protectedPath returns a new guid and the path of a protected create under
// parent with it, parent/ProtectedPrefix(guid)infix, in one string made (the
// guid is a part of it).
func protectedPath(parent, infix string) (want, id string) {
	var g [36]byte
	guid.Encode(&g)
	var b strings.Builder
	b.Grow(len(parent) + len("/_c_") + len(g) + len("-") + len(infix))
	b.WriteString(parent)
	b.WriteString("/_c_")
	b.Write(g[:])
	b.WriteByte('-')
	b.WriteString(infix)
	want = b.String()
	start := len(parent) + len("/_c_")
	return want, want[start : start+len(g)]
}

// protectedCreate is a protected create's shared transaction: the request
// and the go-zookeeper requests its ops point to, made at once.
type protectedCreate struct {
	txnReq
	create zk.CreateRequest
	stamp  zk.SetDataRequest
}

// knownDelete is deleteKnown's shared transaction, made at once.
type knownDelete struct {
	txnReq
	del zk.DeleteRequest
}

func (ep *Epoch) createProtected(ctx context.Context, parent, want, guid string, data []byte, stamp bool) (Created, error) {
	for {
		if _, ok := ep.s.unstamped.Load(parent); ok {
			stamp = false
		}
		// SharedMulti's request, its create and its stamp in one allocation.
		// Keyed by parent: siblings made in one transaction would share a czxid.
		pc := &protectedCreate{create: zk.CreateRequest{Path: want, Data: data, Acl: ep.s.acl(), Flags: EphemeralSequential}}
		pc.key = parent
		pc.ops = append(pc.opBuf[:0], createRequest{&pc.create})
		if stamp {
			pc.stamp = zk.SetDataRequest{Path: parent, Version: -1}
			pc.ops = append(pc.ops, setRequest{&pc.stamp})
		}
		res, err := ep.shared(ctx, &pc.txnReq)
		if stamp && errors.Is(err, ErrNoAuth) {
			// A parent made by someone else may let us create but not write:
			// create without the stamp there (the czxid is then read).
			ep.s.unstamped.Store(parent, true)
			continue
		}
		switch {
		case err == nil:
			return createdOf(guid, res, stamp), nil
		case errors.Is(err, ErrNoNode):
			if err := ep.EnsureContainer(ctx, parent); err != nil {
				return Created{}, err
			}
		case errors.Is(err, errNotBack):
			return Created{}, err // never sent: the wait through the suspension is spent
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			found, err := ep.findOnceConnected(ctx, parent, guid)
			if err != nil {
				return Created{}, err
			}
			if found != "" {
				return Created{GUID: guid, Path: found}, nil
			}
			// The create never happened: try again.
		default:
			return Created{}, fmt.Errorf("create under %s: %w", parent, err)
		}
	}
}

// createdOf is what a protected create's answer res tells: the node's path
// and, when the parent was stamped, its czxid and siblings.
func createdOf(guid string, res []OpResult, stamp bool) Created {
	c := Created{GUID: guid, Path: res[0].Path}
	if stamp {
		if st := res[1].Stat; st != nil {
			c.Czxid, c.Alone, c.Siblings = st.Mzxid, st.NumChildren == 1, int(st.NumChildren)
		}
	}
	return c
}

// findOnceConnected waits for the connection, then finds the node a protected
// create whose answer was lost made ("" when the create never happened).
func (ep *Epoch) findOnceConnected(ctx context.Context, parent, guid string) (string, error) {
	if err := ep.WaitConnected(ctx); err != nil {
		return "", err
	}
	return ep.FindProtected(ctx, parent, guid)
}

// FindProtected returns the child of parent made by the protected create with
// this guid and owned by ep's session, or "" when there is none.
func (ep *Epoch) FindProtected(ctx context.Context, parent, guid string) (string, error) {
	children, _, err := ep.Children(ctx, parent)
	if errors.Is(err, ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	prefix := ProtectedPrefix(guid)
	for _, ch := range children {
		if !strings.HasPrefix(ch, prefix) {
			continue
		}
		p := parent + "/" + ch
		_, st, err := ep.Exists(ctx, p)
		if err != nil {
			return "", err
		}
		if st != nil && st.EphemeralOwner == ep.ID() {
			return p, nil
		}
	}
	return "", nil
}

// DeleteProtected removes the node the protected create with guid made under
// parent (known: its path, or "" if the create's answer never came). It is
// bounded by ctx, and a node left behind would stand in its line until the
// session ends, so it settles (Settle): through a suspension it waits for the
// session while ctx lives, and if ctx ends first the delete goes on in a
// goroutine the Session owns, until the session is back (the node is deleted)
// or lost (its ephemerals are gone with it). Then it returns the ErrUnavailable
// that stopped it.
func (ep *Epoch) DeleteProtected(ctx context.Context, parent, guid, known string) error {
	if known != "" {
		// The usual case, tried first without Settle's closure: Settle goes on
		// (and deletes again: a delete that finds nothing is done) only when
		// this one's answer did not come.
		switch err := ep.deleteKnown(ctx, known); {
		case err == nil, errors.Is(err, ErrSessionLost), errors.Is(err, ErrClosed):
			return nil
		case !errors.Is(err, ErrUnavailable):
			return err
		}
	}
	return ep.Settle(ctx, func(ctx context.Context) error {
		p := known
		if p == "" {
			var err error
			if p, err = ep.FindProtected(ctx, parent, guid); err != nil || p == "" {
				return err
			}
		}
		return ep.deleteKnown(ctx, p)
	})
}

// deleteKnown deletes node p in a shared transaction; a node already gone is
// no error.
func (ep *Epoch) deleteKnown(ctx context.Context, p string) error {
	// SharedMulti's request and its delete in one allocation.
	kd := &knownDelete{del: zk.DeleteRequest{Path: p, Version: -1}}
	kd.ops = append(kd.opBuf[:0], deleteRequest{&kd.del})
	_, err := ep.shared(ctx, &kd.txnReq)
	if errors.Is(err, ErrNoNode) {
		return nil
	}
	return err
}

// CleanupProtected deletes a protected node that must not outlive a failed or
// abandoned operation, with a fresh context bounded by OpTimeout (the caller's
// may have ended: that is often why it cleans up); past it, the delete goes on
// in the background while the session lives (see DeleteProtected).
func (ep *Epoch) CleanupProtected(parent, guid, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), ep.s.cfg.OpTimeout)
	defer cancel()
	_ = ep.DeleteProtected(ctx, parent, guid, node)
}

// CreateOwned creates the ephemeral node p holding data under ep's session. A
// missing parent is made: a container when container is set, else persistent
// ancestors. When the create's answer is lost with the connection, it waits for
// the same session to come back and adopts the node if it is ep's and holds
// data. It returns the node's stat when it read one (nil after a plain create).
// When p exists and is not ep's node with data, it returns ErrNodeExists with the
// stat of the node found.
func (ep *Epoch) CreateOwned(ctx context.Context, p string, data []byte, container bool) (*Stat, error) {
	parent := p[:strings.LastIndexByte(p, '/')]
	for {
		_, err := ep.Create(ctx, p, data, Ephemeral)
		switch {
		case err == nil:
			return nil, nil
		case errors.Is(err, ErrNoNode):
			if container {
				err = ep.EnsureContainer(ctx, parent)
			} else {
				ep.s.knownPaths.Delete(parent) // deleted behind the cache
				err = ep.EnsurePersistent(ctx, parent)
			}
			if err != nil {
				return nil, err
			}
			continue
		case errors.Is(err, errNotBack):
			return nil, err // never sent: the wait through the suspension is spent
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			// The answer may be lost with the connection: adopt our node if it is there.
			if err := ep.WaitConnected(ctx); err != nil {
				return nil, err
			}
		case !errors.Is(err, ErrNodeExists):
			return nil, err
		}
		got, st, err := ep.Get(ctx, p)
		switch {
		case errors.Is(err, ErrNoNode):
			continue
		case err != nil:
			return nil, err
		case st.EphemeralOwner == ep.ID() && bytes.Equal(got, data):
			return st, nil
		default:
			return st, fmt.Errorf("%s: %w", p, ErrNodeExists)
		}
	}
}

// Settle runs op on ep until it succeeds, fails for good, or ep's session is
// gone (then ephemeral nodes are gone too and nothing is left to undo). Through a
// suspension it waits for the session to come back while ctx lives; if ctx ends
// first while the session may still live, it goes on in a goroutine the Session
// owns until the session is connected again or lost, so that an ephemeral node
// meant to go (a claim marker, a participant) never outlives its holder for long.
func (ep *Epoch) Settle(ctx context.Context, op func(ctx context.Context) error) error {
	for {
		err := op(ctx)
		switch {
		case err == nil, errors.Is(err, ErrSessionLost), errors.Is(err, ErrClosed):
			return nil
		case !errors.Is(err, ErrUnavailable):
			return err
		case ctx.Err() == nil:
			if ep.WaitConnected(ctx) != nil && ep.IsLost() {
				return nil
			}
			continue
		}
		ep.s.Go(func() {
			for {
				if ep.WaitConnected(context.Background()) != nil {
					return // lost: the server removed the session's ephemerals
				}
				bg, cancel := context.WithTimeout(context.Background(), ep.s.cfg.OpTimeout)
				err := op(bg)
				cancel()
				if err == nil || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost) {
					return
				}
			}
		})
		return err
	}
}
