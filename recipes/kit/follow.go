package kit

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/tasks"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Source reads one followed thing (an election, a throughput group, ...) for a
// Follower.
type Source[S any] interface {
	// Read reads the current state under ep, arming a watch through w for every
	// part whose watch is not armed yet (w.Need), so that any change of it makes
	// the follower read again. Read may also act on what it read (a throughput
	// group's leader publishes its allocation there).
	Read(ctx context.Context, ep *zookeeper.Epoch, w *Watches) (S, error)
	// Reset forgets whatever the source cached under the previous session: its
	// watches are gone. It is called on the follower's goroutine before the first
	// Read under a new session, once the Watches have started a new generation
	// (no fired callback of an earlier one runs after that).
	Reset()
	// Uncertain is the state to show while the session is not connected, given
	// the last one (loaded false: none yet) and u, what the session's state
	// allows: during the first part of a suspension (u.Keep) the last state
	// stands, marked suspended since u.Since; once the session could have
	// expired, or while there is none (lost, connecting), nobody can be vouched
	// for. It is called on the follower's goroutine whenever the session is not
	// connected (and after a failed first Read).
	Uncertain(last S, loaded bool, u Uncertainty) S
	// Same tells whether b shows nothing new after a (no change to publish).
	Same(a, b S) bool
}

// Uncertainty is why a follower cannot read its state now (Source.Uncertain).
type Uncertainty struct {
	// Keep: the session is suspended and could not have expired yet (see
	// zookeeper.Session.InDoubt): the last state read stands, marked suspended.
	Keep bool
	// Since is when the suspension began (zookeeper.Session.Suspension); zero
	// when the session is not suspended (lost, connecting, closed).
	Since time.Time
}

// uncertaintyOf is the session's Uncertainty now.
func uncertaintyOf(s *zookeeper.Session) Uncertainty {
	since, ok := s.Suspension()
	if !ok {
		return Uncertainty{}
	}
	return Uncertainty{Keep: !s.InDoubt(), Since: since}
}

// Stopper is a Source with something to undo when its follower stops (the last
// Close): Stop is called once, on the follower's goroutine, after its last Read
// or Uncertain.
type Stopper interface {
	Stop()
}

// Followers is the one registry of followed names of one kind on this sidecar.
// However many followers a name has (event streams, long-polls, members), the
// sidecar runs one Follower for it: the first Follow starts it, the last Close
// stops it and waits until it has ended.
type Followers[S any] struct {
	s         *zookeeper.Session
	newSource func(name string) Source[S]
	gauge     prometheus.Gauge

	mu      sync.Mutex
	entries map[string]*follower[S]
}

// NewFollowers makes the registry of one kind; newSource makes the Source of a
// name; gauge (may be nil) counts the names followed.
func NewFollowers[S any](s *zookeeper.Session, gauge prometheus.Gauge, newSource func(name string) Source[S]) *Followers[S] {
	return &Followers[S]{s: s, newSource: newSource, gauge: gauge, entries: map[string]*follower[S]{}}
}

// Follow returns a handle on name's follower, starting it if it has none. The
// first state is available once read (Changed closes then).
func (r *Followers[S]) Follow(name string) *Follower[S] {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.entries[name]
	if f == nil {
		f = r.start(name)
		r.entries[name] = f
		if r.gauge != nil {
			r.gauge.Inc()
		}
	}
	f.refs++
	return &Follower[S]{f: f, r: r, name: name}
}

// FollowName is Follow for a name a client gave: it checks it first
// (CheckName, as a kind's name).
func (r *Followers[S]) FollowName(kind, name string) (*Follower[S], error) {
	if err := CheckName(kind, name); err != nil {
		return nil, err
	}
	return r.Follow(name), nil
}

// Len is the number of names followed.
func (r *Followers[S]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

func (r *Followers[S]) release(name string) {
	r.mu.Lock()
	f := r.entries[name]
	f.refs--
	last := f.refs == 0
	if last {
		delete(r.entries, name)
		if r.gauge != nil {
			r.gauge.Dec()
		}
	}
	r.mu.Unlock()
	if last {
		f.cancel()
		<-f.done
		f.watches.Wait()
	}
}

// Follower is one handle on a followed name. Close it when done.
type Follower[S any] struct {
	f    *follower[S]
	r    *Followers[S]
	name string
	once sync.Once
}

// State returns the latest state and whether one has been read yet. While the
// session is not connected it is the Source's Uncertain state (the last one
// read, marked suspended, until the session could have expired).
func (h *Follower[S]) State() (S, bool) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.f.state, h.f.loaded
}

// Changed returns a channel closed at the next change of State.
func (h *Follower[S]) Changed() <-chan struct{} {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.f.changed
}

// Subscribe calls fn with the current state (if one was read) and then with
// every new state, in order and never two at once, until cancel is called. fn
// runs under the follower's lock (on its goroutine, or on the caller's for the
// first call): it must not block nor call the Follower.
func (h *Follower[S]) Subscribe(fn func(S)) (cancel func()) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextSub
	f.nextSub++
	if f.subs == nil {
		f.subs = map[int]func(S){}
	}
	f.subs[id] = fn
	if f.loaded {
		fn(f.state)
	}
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

// Poke makes the follower read again now (after a change this sidecar made, so
// that its answer does not wait for the watch).
func (h *Follower[S]) Poke() { h.f.watches.Poke() }

// Await waits up to d (and while ctx lives) for a state that cond accepts, and
// returns the last state and whether cond accepted it.
func (h *Follower[S]) Await(ctx context.Context, d time.Duration, cond func(S) bool) (S, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		next := h.Changed()
		st, ok := h.State()
		if ok && cond(st) {
			return st, true
		}
		select {
		case <-next:
		case <-t.C:
			return st, false
		case <-ctx.Done():
			return st, false
		}
	}
}

// Close drops this handle; the last one stops the follower and waits for it.
func (h *Follower[S]) Close() { h.once.Do(func() { h.r.release(h.name) }) }

// follower keeps one Source's state current.
type follower[S any] struct {
	src     Source[S]
	watches *Watches
	refs    int // under the registry's lock

	mu      sync.Mutex
	state   S
	loaded  bool
	changed chan struct{}
	subs    map[int]func(S)
	nextSub int

	// ctx ends when the last handle is closed; run then returns (done).
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// retryEvery is how soon a follower tries again after a failed read while the
// session stays connected.
const retryEvery = 250 * time.Millisecond

func (r *Followers[S]) start(name string) *follower[S] {
	f := &follower[S]{src: r.newSource(name), changed: make(chan struct{}), done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.watches = NewWatches(f.ctx.Done())
	go f.run(r.s)
	return f
}

// run reads under the connected session at once, at every watch firing and at
// every change of the session, each read in one of the session's background
// slots (zookeeper.Session.Background: a burst of followers reads a few at a
// time); after a session other than the last read's, the watches are armed
// again from scratch, and after a reconnect of the same session every part is
// read again (and its watch armed anew: Watches.stale), as nothing seen before
// the gap is trusted. While the session is not connected the state is the
// Source's Uncertain one, published once at the start of a suspension, once
// more if it lasts until the session could have expired (Changed closes then),
// and replaced by the next read: a suspension that changed nothing shows as two
// states. A read that fails while the session stays connected (a call cut off)
// keeps the last state and is tried again within retryEvery.
func (f *follower[S]) run(s *zookeeper.Session) {
	defer close(f.done)
	if st, ok := f.src.(Stopper); ok {
		defer st.Stop()
	}
	ctx := f.ctx
	var last *zookeeper.Epoch
	var connects uint64
	for {
		sessChanged := s.Changed()
		ep, err := s.Current()
		if err == nil {
			switch {
			case ep != last:
				f.watches.reset()
				f.src.Reset()
				last, connects = ep, ep.Connects()
			case ep.Connects() != connects:
				f.watches.stale()
				connects = ep.Connects()
			}
			var st S
			err = s.Background(ctx, func() error {
				var err error
				st, err = f.src.Read(ctx, ep, f.watches)
				return err
			})
			if err == nil {
				f.set(st)
			}
		}
		var retry <-chan time.Time
		if err != nil {
			if _, cerr := s.Current(); cerr != nil || !f.isLoaded() {
				f.uncertain(uncertaintyOf(s))
			}
			if ctx.Err() == nil {
				retry = time.After(retryEvery)
			}
		}
		select {
		case <-f.watches.wake:
		case <-retry:
		case <-sessChanged:
		case <-ctx.Done():
			return
		}
	}
}

// set publishes st if it shows something new.
func (f *follower[S]) set(st S) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded && f.src.Same(f.state, st) {
		return
	}
	f.publishLocked(st)
}

// isLoaded tells whether a state was published.
func (f *follower[S]) isLoaded() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loaded
}

// uncertain publishes the Source's Uncertain state for u, if it shows
// something new.
func (f *follower[S]) uncertain(u Uncertainty) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.src.Uncertain(f.state, f.loaded, u)
	if f.loaded && f.src.Same(f.state, st) {
		return
	}
	f.publishLocked(st)
}

func (f *follower[S]) publishLocked(st S) {
	f.state, f.loaded = st, true
	close(f.changed)
	f.changed = make(chan struct{})
	for _, fn := range f.subs {
		fn(st)
	}
}

// Watches tracks the one-shot watches a reader has armed under the current
// session generation: a part whose watch is armed is not watched again until it
// fires, and a watch armed under an earlier generation (before a new session)
// or replaced by a newer one of its part changes nothing when it fires. After
// a reconnect of the same session every armed part is stale: needed again, so
// that it is read again, while its old watch still wakes the reader until the
// new one replaces it.
type Watches struct {
	mu    sync.Mutex
	armed map[string]*armedWatch
	wake  chan struct{}
	stop  <-chan struct{}
	// forwarders are the goroutines forwarding the watches (Armed, Wait).
	forwarders tasks.Group
}

// NewWatches makes a set of watches whose forwarding goroutines end when stop
// closes (or their watch fires: every watch fires, with EventNotWatching, when
// its session ends). Wait waits for them; once it has begun, Armed starts none.
func NewWatches(stop <-chan struct{}) *Watches {
	return &Watches{armed: map[string]*armedWatch{}, wake: make(chan struct{}, 1), stop: stop}
}

// armedWatch is one part's watch: quit ends its forwarder (a newer watch of
// the part replaced it); stale marks it armed before the session's last
// reconnect, so that the part is read (and watched) again.
type armedWatch struct {
	quit  chan struct{}
	stale bool
}

// Need reports whether part has no watch armed under the current generation,
// or only one armed before the session's last reconnect (its part is read
// again then: nothing seen before the gap is trusted).
func (w *Watches) Need(part string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.needLocked(part)
}

// needLocked is Need with the lock held.
func (w *Watches) needLocked(part string) bool {
	a := w.armed[part]
	return a == nil || a.stale
}

// Armed records ch as part's watch, replacing the one before (whose firing
// then changes nothing). When it fires while it is part's watch, part is needed
// again, fired (if not nil) runs under the Watches' lock, and the reader is
// woken (Wake). Once Wait has begun (the reader is stopping), the watch is not
// forwarded.
func (w *Watches) Armed(part string, ch <-chan zookeeper.Event, fired func()) {
	a := &armedWatch{quit: make(chan struct{})}
	w.mu.Lock()
	if old := w.armed[part]; old != nil {
		close(old.quit)
	}
	w.armed[part] = a
	w.mu.Unlock()
	w.forwarders.Go(func() {
		select {
		case <-ch:
			w.mu.Lock()
			mine := w.armed[part] == a
			if mine {
				delete(w.armed, part)
				if fired != nil {
					fired()
				}
			}
			w.mu.Unlock()
			if mine {
				w.Poke()
			}
		case <-a.quit:
		case <-w.stop:
		}
	})
}

// Do runs f under the Watches' lock: the lock fired callbacks run under, for the
// reader's cache of what its watches cover.
func (w *Watches) Do(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

// Poke wakes the reader: something changed (or may have).
func (w *Watches) Poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Wake is signalled by Poke.
func (w *Watches) Wake() <-chan struct{} { return w.wake }

// Wait waits for the goroutines forwarding the watches, and makes later Armed
// calls forward nothing: call it once stop is closed, when the reader stops.
func (w *Watches) Wait() { w.forwarders.Close() }

// reset starts a new generation: every part is needed again, and no watch
// armed before changes anything when it fires.
func (w *Watches) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.armed {
		close(a.quit)
	}
	w.armed = map[string]*armedWatch{}
}

// stale marks every armed part to be read again (after a reconnect of the same
// session): each stays watched until its part is read and watched anew, so a
// change meanwhile still wakes the reader.
func (w *Watches) stale() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.armed {
		a.stale = true
	}
}

// Reset is reset for readers that run their own loop (a queue's cursor).
func (w *Watches) Reset() { w.reset() }

// WatchAbsent leaves an existence watch on part's node p, which a reader found
// missing, and records it as absent (absent, unless nil, runs under the
// Watches' lock). If the node appeared in between, nothing is recorded: the
// reader is woken to read again now, and again when the node changes.
func WatchAbsent(ctx context.Context, ep *zookeeper.Epoch, w *Watches, part, p string, absent func()) error {
	ok, _, ch, err := ep.ExistsW(ctx, p)
	if err != nil {
		return err
	}
	if ok {
		w.Armed("appeared/"+part, ch, nil)
		w.Poke()
		return nil
	}
	if absent != nil {
		w.Do(absent)
	}
	w.Armed(part, ch, nil)
	return nil
}

// OnWake calls apply on a goroutine of its own each time wake has a token, one
// call at a time, until ctx ends or the returned stop is called; stop returns
// once the goroutine has ended (no apply runs after it). It is the loop of a
// follower of many things whose callbacks only note what changed and wake it.
func OnWake(ctx context.Context, wake <-chan struct{}, apply func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-wake:
				apply()
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
