package counter

import (
	"context"
	"sync"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Writing without reading first. A compare-and-set needs the node's value and
// data version, and reading them costs a round trip before every write. After
// its own write the sidecar knows both (its value, and the version in the
// write's answer), so its next compare-and-set on that counter is sent on what
// it knows, with no read. It is still a compare-and-set: a write by anyone else
// in between changed the version, the write is refused, and the read path is
// taken as before.
//
// What a version cannot tell is a counter deleted and made again, then written
// back to the same version (ABA). One child watch on the counters' parent covers
// that for every counter at once: it fires when any counter is deleted or made,
// and what was known before it fired is no longer trusted. (The counters' own
// data changes do not fire it, so adds do not re-arm it.) A value is trusted
// only when the watch was armed before the write that made it known was sent,
// on the epoch that is current, has not fired since, and the session has not
// reconnected since it was armed (after a reconnect a watch reports what
// changed while disconnected only a round trip later: everything known is
// dropped then, and the watch armed again). What remains is the
// ABA any compare-and-set on a data version has (Curator's and kazoo's too,
// between their read and their write): a delete, a new node and writes back to
// the same version while the watch's event is on its way.

// known is what this sidecar last wrote to one counter.
type known struct {
	ep      *zookeeper.Epoch
	value   int64
	version int32
	// arming is the child watch's arming in force when the write was sent
	// (0: none was).
	arming uint64
}

// knownValues are the counters whose value this sidecar knows (see above).
type knownValues struct {
	s   *zookeeper.Session
	dir string

	mu sync.Mutex
	m  map[string]known
	// The child watch on dir: armed on ep as arming number armed (0: not
	// armed) while ep had connected connects times, firing on fired.
	ep       *zookeeper.Epoch
	armed    uint64
	arms     uint64
	connects uint64
	fired    <-chan zookeeper.Event
	arming   bool // an arming is under way
}

// maxKnown bounds the counters remembered; past it, writes are not remembered.
const maxKnown = 16384

// watching returns the child watch's arming in force on ep (0 when none is), and
// starts arming one, in the background, when none is.
func (kv *knownValues) watching(ep *zookeeper.Epoch) uint64 {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.ep == ep && kv.armed != 0 {
		select {
		case <-kv.fired: // a counter was made or deleted: forget everything
			kv.armed, kv.fired, kv.m = 0, nil, nil
		default:
			if ep.Connects() == kv.connects {
				return kv.armed
			}
			kv.armed, kv.fired, kv.m = 0, nil, nil // reconnected since
		}
	}
	if !kv.arming && !ep.IsLost() {
		kv.arming = kv.s.Go(func() { kv.arm(ep) }) // false: the Session is closing
	}
	return 0
}

// arm sets the child watch on ep.
func (kv *knownValues) arm(ep *zookeeper.Epoch) {
	connects := ep.Connects()
	_, _, fired, err := ep.ChildrenW(context.Background(), kv.dir) // bounded by OpTimeout
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.arming = false
	if err != nil || ep.Connects() != connects {
		return // (no counter yet, trouble, or a reconnect: the next write tries again)
	}
	kv.arms++
	kv.ep, kv.armed, kv.connects, kv.fired, kv.m = ep, kv.arms, connects, fired, nil
}

// take returns what is known of name on ep, and forgets it (a value is used
// once: the write made on it is remembered in its place).
func (kv *knownValues) take(name string, ep *zookeeper.Epoch) (known, bool) {
	arming := kv.watching(ep)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	k, ok := kv.m[name]
	delete(kv.m, name)
	return k, ok && arming != 0 && k.arming == arming && k.ep == ep && !ep.IsLost()
}

// forget drops what is known of name.
func (kv *knownValues) forget(name string) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	delete(kv.m, name)
}

// remember records that the write of value that st answered, sent while
// arming was in force on ep, made name's value known.
func (kv *knownValues) remember(name string, ep *zookeeper.Epoch, arming uint64, value int64, st *zookeeper.Stat) {
	if arming == 0 || st == nil {
		return
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.ep != ep || kv.armed != arming {
		return // fired meanwhile
	}
	if kv.m == nil {
		kv.m = map[string]known{}
	}
	if _, ok := kv.m[name]; ok || len(kv.m) < maxKnown {
		kv.m[name] = known{ep: ep, value: value, version: st.Version, arming: arming}
	}
}
