// Package tasks owns goroutines: a Group starts them until it is closed, and
// its Close waits for them. It knows neither ZooKeeper nor HTTP.
//
// A bare sync.WaitGroup is not enough for an owner that others may ask to start
// work at any time (a request opening a stream, a timer arming a watch): an Add
// that races the owner's Wait is a data race, and one made while Wait is waking
// up panics ("WaitGroup is reused before previous Wait has returned"). A Group
// keeps its count and its closed flag under one lock, so once Close has begun
// nothing is added: a start after that is refused, and the caller answers as
// closed.
package tasks

import "sync"

// Group runs goroutines and waits for them. Go starts f unless Close has begun;
// Close refuses every later Go and returns once every goroutine Go started has
// returned. The zero Group is ready to use; a Group must not be copied.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f on a new goroutine that Close waits for, and reports true; once
// Close has begun it starts nothing and reports false.
func (g *Group) Go(f func()) bool {
	if !g.add() {
		return false
	}
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// add counts one goroutine unless the Group is closed.
func (g *Group) add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Close refuses every later Go and waits for the goroutines started before.
// It may be called more than once, also concurrently: every call waits.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
