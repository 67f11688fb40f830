package statedir

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrSaverClosed is Flush's error once its Saver is closed.
var ErrSaverClosed = errors.New("state saver closed")

// Saver keeps the directory's state current for the request path without
// costing it anything: a change calls MarkDirty (an atomic flag, no I/O, no
// lock, no allocation), and the Saver's one goroutine writes a snapshot at
// most once per interval: at once when the last write is older than the
// interval, else when it has passed. Flush writes one now.
//
// What a crash of the process between two writes can lose is what changed
// after the last write's snapshot, at most one interval plus a write (with
// DurableEvery, a crash of the machine can lose what was written since the
// last sync, at most that long; a successor then usually starts after the
// session's timeout anyway, too late to resume): a lease granted or
// revoked, a keepalive's later expiry, a hold granted or released, a request
// that began or ended waiting. The successor therefore never takes the file
// for the truth about ZooKeeper: it checks every recorded node (it exists and
// its ephemeralOwner is the session), finds the nodes of recorded requests in
// flight by their protected-create GUIDs, and reports lost whatever does not
// check out. What ZooKeeper cannot tell it (a node created after the last
// write, a lease's expiry up to one interval later than recorded) is why the
// interval is kept short and the interval's bound is part of the contract.
type Saver struct {
	d        *Dir
	snapshot func() State
	every    time.Duration
	onWrite  func(State, error)
	// durableEvery, when positive, is how long a written state may stay
	// unsynced (see DurableEvery); onSync is called after each sync (tests).
	durableEvery time.Duration
	onSync       func()

	dirty   atomic.Bool
	wake    chan struct{} // a token while dirty and the goroutine may not know
	flushes chan chan error
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	mu      sync.Mutex
	lastErr error
}

// SaverOption changes a Saver.
type SaverOption func(*Saver)

// OnWrite has the Saver call f after each write, on its goroutine, with the
// state it wrote (as Save set it) and the write's error. f must not block.
func OnWrite(f func(State, error)) SaverOption { return func(s *Saver) { s.onWrite = f } }

// DurableEvery lets the Saver sync what it writes at most once per d: each
// write still replaces the file atomically (a successor started after this
// process was killed reads the latest write whole: the page cache outlives
// the process), and is made durable against a crash of the machine (the
// file and the directory synced) within d of it, and at once by Flush.
// Without it every write is synced. The syncs are what a write costs most
// (the disk's, and ZooKeeper's own fsyncs wait behind them).
func DurableEvery(d time.Duration) SaverOption { return func(s *Saver) { s.durableEvery = d } }

// Saver starts a Saver that writes snapshot() (called on the Saver's
// goroutine: it must be safe to call alongside the request path) at most once
// per every. The Saver is the Dir's: Dir.Close closes it. Before a planned
// hand-over, Flush it and then Close it, so that nothing written after the
// successor took over can replace the successor's state.
func (d *Dir) Saver(snapshot func() State, every time.Duration, opts ...SaverOption) (*Saver, error) {
	s := &Saver{
		d:        d,
		snapshot: snapshot,
		every:    every,
		onWrite:  func(State, error) {},
		onSync:   func() {},
		wake:     make(chan struct{}, 1),
		flushes:  make(chan chan error),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for _, opt := range opts {
		opt(s)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return nil, d.closedErr()
	}
	d.savers = append(d.savers, s)
	go s.run()
	return s, nil
}

// MarkDirty records that the state changed; a write follows within the
// interval. It is safe for concurrent use, never blocks and does no I/O.
func (s *Saver) MarkDirty() {
	if s.dirty.Load() || s.dirty.Swap(true) {
		return // a write is already due
	}
	select {
	case s.wake <- struct{}{}:
	default: // a token is already waiting
	}
}

// Flush writes the latest snapshot now (whether or not anything is marked)
// and returns the write's error, or ctx's if it ends first (the write may
// then still happen), or ErrSaverClosed.
func (s *Saver) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case s.flushes <- reply:
	case <-s.done:
		return ErrSaverClosed
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Err is the last write's error, nil after a write that succeeded. A failed
// write is retried one interval later.
func (s *Saver) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Close stops the Saver and waits for its goroutine; it writes nothing more
// (what is marked and not written stays unwritten: Flush first to keep it).
// Close is idempotent.
func (s *Saver) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (s *Saver) run() {
	defer close(s.done)
	var last time.Time     // of the last write; zero: the first is written at once
	var syncedAt time.Time // of the last sync; zero: the first write is synced
	owed := false          // a write since the last sync was not synced
	t := time.NewTimer(time.Hour)
	t.Stop()
	syncT := time.NewTimer(time.Hour) // fires when an unsynced write is due its sync
	syncT.Stop()
	write := func(flush bool) error {
		durable := flush || s.durableEvery <= 0 || time.Since(syncedAt) >= s.durableEvery
		err := s.write(durable)
		last = time.Now()
		switch {
		case err != nil:
		case durable:
			syncedAt, owed = last, false
			syncT.Stop()
			s.onSync()
		case !owed:
			owed = true
			syncT.Reset(time.Until(syncedAt.Add(s.durableEvery)))
		}
		return err
	}
	for {
		select {
		case <-s.stop:
			return
		case reply := <-s.flushes:
			reply <- write(true)
			continue
		case <-syncT.C:
			if err := s.d.syncState(); err != nil {
				s.MarkDirty() // written again, synced, after the interval
			} else {
				syncedAt, owed = time.Now(), false
				s.onSync()
			}
			continue
		case <-s.wake:
		}
		if wait := time.Until(last.Add(s.every)); wait > 0 {
			t.Reset(wait)
			select {
			case <-s.stop:
				t.Stop()
				return
			case reply := <-s.flushes:
				t.Stop()
				reply <- write(true)
				continue // the flush wrote what was marked
			case <-t.C:
			}
		}
		if s.dirty.Load() {
			write(false)
		}
	}
}

// write saves one snapshot, synced when durable. The flag is cleared before
// the snapshot is taken, so a change made during the write marks the state
// again.
func (s *Saver) write(durable bool) error {
	s.dirty.Store(false)
	st, err := s.d.save(s.snapshot(), durable)
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
	if err != nil {
		s.MarkDirty() // retried after the interval
	}
	s.onWrite(st, err)
	return err
}
