package recipes

import (
	"context"
	"sync"

	"github.com/go-zookeeper/zk"
)

// ElectionFollower follows one election. However many followers an election has
// on this sidecar, the sidecar holds one set of ZooKeeper watches for it (one on
// the children, one on each candidate's data) and one cached state, read again
// after every change and every reconnect.
type ElectionFollower struct {
	w    *electionWatch
	once sync.Once
}

// electionWatch is the one watcher of an election, shared by its followers.
type electionWatch struct {
	e    *Elections
	name string

	mu           sync.Mutex
	state        *ElectionState
	loaded       bool
	changed      chan struct{}
	childWatched bool
	dataWatched  map[string]bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Follow starts following election name; Close stops. The first state is
// available once read (Changed closes then).
func (e *Elections) Follow(name string) (*ElectionFollower, error) {
	if err := CheckName("election", name); err != nil {
		return nil, err
	}
	w := e.watches.acquire(name, func() (*electionWatch, func()) {
		w := &electionWatch{
			e: e, name: name, changed: make(chan struct{}), dataWatched: map[string]bool{},
			wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		}
		go w.run()
		return w, func() { close(w.stop); <-w.done }
	})
	return &ElectionFollower{w: w}, nil
}

// State returns the latest state and whether one has been read yet. While the
// session is suspended the state has no leader and Suspended set: this sidecar
// cannot tell who leads.
func (f *ElectionFollower) State() (*ElectionState, bool) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return f.w.state, f.w.loaded
}

// Changed returns a channel closed at the next change of State.
func (f *ElectionFollower) Changed() <-chan struct{} {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return f.w.changed
}

// Close stops following; the last follower's Close drops the watcher.
func (f *ElectionFollower) Close() {
	f.once.Do(func() { f.w.e.watches.release(f.w.name) })
}

func (w *electionWatch) run() {
	defer close(w.done)
	watchLoop(w.e.s, w.stop, w.wake, func(ctx context.Context, ep *epoch, fresh bool) error {
		if fresh {
			w.mu.Lock()
			w.childWatched, w.dataWatched = false, map[string]bool{}
			w.mu.Unlock()
		}
		st, err := w.e.read(ctx, ep, w.name, w)
		if err == nil {
			w.set(st)
		}
		return err
	}, w.suspend)
}

// set publishes a new state if it differs from the current one.
func (w *electionWatch) set(st *ElectionState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loaded && sameElection(w.state, st) {
		return
	}
	w.state, w.loaded = st, true
	close(w.changed)
	w.changed = make(chan struct{})
}

// suspend marks the state uncertain: no leader can be vouched for.
func (w *electionWatch) suspend() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != nil && w.state.Suspended {
		return
	}
	st := &ElectionState{Name: w.name, Candidates: []Candidate{}, Suspended: true}
	if w.state != nil {
		st.Zxid = w.state.Zxid
	}
	w.state, w.loaded = st, true
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *electionWatch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *electionWatch) needsChildWatch() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.childWatched
}

func (w *electionWatch) needsDataWatch(node string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.dataWatched[node]
}

// watchChildren records the outstanding children (or existence) watch and wakes
// the watcher when it fires.
func (w *electionWatch) watchChildren(ch <-chan zk.Event) {
	w.mu.Lock()
	w.childWatched = true
	w.mu.Unlock()
	w.forward(ch, func() { w.childWatched = false })
}

// watchData records the outstanding data watch of a candidate node.
func (w *electionWatch) watchData(node string, ch <-chan zk.Event) {
	w.mu.Lock()
	w.dataWatched[node] = true
	w.mu.Unlock()
	w.forward(ch, func() { delete(w.dataWatched, node) })
}

// forward runs fired (under w.mu) and wakes the watcher when ch delivers; it gives
// up when the watcher stops (the channel is buffered: nothing blocks).
func (w *electionWatch) forward(ch <-chan zk.Event, fired func()) {
	go func() {
		select {
		case <-ch:
			w.mu.Lock()
			fired()
			w.mu.Unlock()
			w.poke()
		case <-w.stop:
		}
	}()
}

func sameElection(a, b *ElectionState) bool {
	if a == nil || b == nil || a.Suspended != b.Suspended || a.Term() != b.Term() || len(a.Candidates) != len(b.Candidates) {
		return false
	}
	if a.Leader != nil && a.Leader.Value != b.Leader.Value {
		return false
	}
	for i := range a.Candidates {
		if a.Candidates[i] != b.Candidates[i] {
			return false
		}
	}
	return true
}
