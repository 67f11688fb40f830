package sse

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultBuffer is the per-subscriber buffer used when [Options.Buffer] <= 0.
const DefaultBuffer = 64

// Errors that end a [Subscription], as returned by [Subscription.Err].
var (
	// ErrSlowSubscriber ends a subscription whose buffer (Options.Buffer)
	// was full when another event was published to it.
	ErrSlowSubscriber = errors.New("sse: subscriber too slow, disconnected")
	// ErrClosed ends every subscription when the broker closes, and every
	// subscription made after.
	ErrClosed = errors.New("sse: broker closed")
	// ErrUnsubscribed ends a subscription closed by Subscription.Close.
	ErrUnsubscribed = errors.New("sse: unsubscribed")
)

// Options configures a [Broker]. The zero value is usable.
type Options struct {
	// Buffer is how many events may wait for one subscriber before it is
	// disconnected with ErrSlowSubscriber; <= 0 means DefaultBuffer. Events of
	// keyed topics (PublishKeyed) do not wait in it for a subscriber read by
	// Serve: that one takes them by cursor, coalesced. A
	// subscription gets one more slot per current state it receives on
	// subscribing, so that SubscribeMany over many topics never starts out
	// full. Until Subscription.Events is called the buffer grows as events
	// wait rather than being preallocated.
	Buffer int
	// Registerer, when set, gets coord_sse_subscribers (a gauge of live
	// subscriptions) and coord_sse_dropped_total (a counter of
	// subscriptions dropped as slow). If they are already registered there
	// (by another Broker), the registered ones are shared; any other
	// registration error panics, as with MustRegister.
	Registerer prometheus.Registerer
	// OnActive, when set, is called with active=true when a topic gets its
	// first subscriber and active=false when its last one leaves (by Close,
	// by being dropped, or because the broker closed): exactly once per
	// transition, in the order of the transitions, from one goroutine the
	// broker owns, never while the broker's lock is held (so it may call
	// Publish, Current, Subscribe). It must not call Broker.Close. Recipes
	// use it to hold one ZooKeeper watch per topic however many subscribers
	// there are: on true, set the watch and Publish the state read; on
	// false, drop the watch and Forget the topic, so that a later
	// subscriber is never first served a state that nothing kept current.
	OnActive func(topic string, active bool)
}

// Broker fans events out to subscribers by topic and keeps each topic's
// current state (its last published event). All methods are safe for
// concurrent use; Publish and Subscribe are serialized by one mutex, which
// is what makes a subscription's snapshot and live feed seamless.
type Broker struct {
	mu     sync.Mutex
	topics map[string]*topic
	closed bool
	buffer int
	// seq numbers every publication, so that a new subscriber gets the current
	// states in the order they were published (see SubscribeMany).
	seq uint64

	subscribers prometheus.Gauge
	dropped     prometheus.Counter

	// flush writes the events of streams attached by Serve (direct.go); dirty
	// is the subscriptions Publish is handing it. Guarded by mu.
	flush *flusher
	dirty []*Subscription
	// directWritten and directLeft count what the flushers wrote and how
	// often a full socket left the rest to Serve.
	directWritten, directLeft atomic.Int64

	onActive func(topic string, active bool)
	pending  []activation // guarded by mu
	wake     chan struct{}
	idle     chan struct{} // closed when the OnActive goroutine exits
}

type topic struct {
	name    string
	current Event
	has     bool
	seq     uint64 // when current was published (Broker.seq)
	// keyed holds one current state per key (PublishKeyed), for a topic that
	// carries many entities, such as a combined stream of everything: see
	// keyed.go. Subscribers are not queued its events but follow it by cursor.
	keyed   map[string]*keyedNode
	log     keyedLog
	members []member
}

// keyedEvent is an event and when it was published (Broker.seq).
type keyedEvent struct {
	e   Event
	seq uint64
}

// member is a subscription's entry in a topic; slot indexes sub.memberships.
type member struct {
	sub  *Subscription
	slot int
}

// membership is a topic a subscription belongs to; pos indexes t.members.
// For a keyed topic, cursor is the publication (Broker.seq) up to which the
// subscription has taken the topic's keys, and start when it subscribed (the
// farewells of keys forgotten before are not its business).
type membership struct {
	t             *topic
	pos           int
	cursor, start uint64
}

type activation struct {
	topic  string
	active bool
}

// NewBroker returns a Broker configured by o. When o.OnActive is set it
// starts one goroutine, which Close stops.
func NewBroker(o Options) *Broker {
	b := &Broker{
		topics:   make(map[string]*topic),
		buffer:   o.Buffer,
		onActive: o.OnActive,
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_sse_subscribers",
			Help: "Live server-sent event subscriptions.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_sse_dropped_total",
			Help: "Server-sent event subscriptions disconnected for falling behind.",
		}),
	}
	if b.buffer <= 0 {
		b.buffer = DefaultBuffer
	}
	if o.Registerer != nil {
		b.subscribers = register(o.Registerer, b.subscribers)
		b.dropped = register(o.Registerer, b.dropped)
	}
	if b.onActive != nil {
		b.wake = make(chan struct{}, 1)
		b.idle = make(chan struct{})
		go b.runActive()
	}
	return b
}

func register[C prometheus.Collector](r prometheus.Registerer, c C) C {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// Publish records e as the topic's current state and delivers it to every
// subscriber of the topic without ever blocking: a subscriber that already
// has Options.Buffer events waiting is disconnected instead (its Done
// closes, Err returns ErrSlowSubscriber) and counted in
// coord_sse_dropped_total. It is safe from any goroutine, including a
// ZooKeeper callback. e.Data must not be modified afterwards: it is shared,
// not copied. After Close, Publish only records the state.
func (b *Broker) Publish(name string, e Event) {
	e = framed(e)
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[name]
	if t == nil {
		t = &topic{name: name}
		b.topics[name] = t
	}
	b.seq++
	t.current, t.has, t.seq = e, true, b.seq
	// Backwards, so that removing a dropped member (which moves the last
	// member into its place) never skips one not yet served.
	for i := len(t.members) - 1; i >= 0; i-- {
		if s := t.members[i].sub; !s.push(e, b.seq) {
			b.end(s, ErrSlowSubscriber)
		}
	}
	b.handOff()
}

// PublishKeyed is Publish for a topic that carries many entities: e becomes the
// current state of key within the topic, and a new subscriber gets the current
// state of every key, in the order they were published (so event ids assigned in
// publish order keep increasing through the snapshot), before the live feed. It
// never blocks, as Publish, and it never drops a subscriber: a subscriber that
// reads through Serve (or Pull) is not queued keyed events but takes, whenever it
// is ready, the current state of every key changed since it last took, in
// publish order, at most a batch at a time; a key changed twice meanwhile comes
// once, in its latest state. So a slow subscriber coalesces instead of falling
// behind, and its memory does not grow with the number of keys or of changes.
// (A subscriber read through Events gets keyed events queued as Publish's.)
func (b *Broker) PublishKeyed(name, key string, e Event) {
	b.publishKeyed(name, key, e, true)
}

// ForgetKeyed delivers e (the entity's farewell, e.g. a deletion) to the
// topic's subscribers and forgets key's state, so later subscribers do not get it.
// A subscriber that takes by cursor gets e in place of the key's state if it has
// not taken e yet.
func (b *Broker) ForgetKeyed(name, key string, e Event) {
	b.publishKeyed(name, key, e, false)
}

func (b *Broker) publishKeyed(name, key string, e Event, keep bool) {
	e = framed(e)
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[name]
	if t == nil {
		t = &topic{name: name}
		b.topics[name] = t
	}
	b.seq++
	t.setKeyed(key, e, b.seq, !keep)
	for i := len(t.members) - 1; i >= 0; i-- {
		s := t.members[i].sub
		if s.keep != nil && !s.keep(key) {
			continue
		}
		if !s.pushKeyed(e) {
			b.end(s, ErrSlowSubscriber)
		}
	}
	b.handOff()
	t.sweep()
}

// Current returns the topic's last published event (its Data shared, not
// copied), and false if nothing was published to it or it was forgotten
// since.
func (b *Broker) Current(name string) (Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[name]; t != nil && t.has {
		return t.current, true
	}
	return Event{}, false
}

// Forget drops a topic's stored state, for a topic nobody will publish to
// again or whose state nobody keeps current any more (see
// Options.OnActive): later subscribers get no snapshot until the next
// Publish. Its subscribers, if any, stay subscribed.
func (b *Broker) Forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[name]; t != nil {
		t.current, t.has = Event{}, false
		t.keyed, t.log = nil, keyedLog{}
		if len(t.members) == 0 {
			delete(b.topics, name)
		}
	}
}

// Subscribe registers a subscriber to one topic. Its first event is the
// topic's current state, if any, followed by every event published after
// it, in order: Subscribe is atomic with Publish, so no event is missed or
// duplicated between the snapshot and the live feed. After Close it returns
// an already-ended subscription (Err returns ErrClosed).
func (b *Broker) Subscribe(topic string) *Subscription {
	return b.SubscribeMany(topic)
}

// SubscribeMany is Subscribe over several topics into one ordered feed, for
// a combined stream: first the current state of each topic that has one (and
// of each key of a keyed topic), in the order they were published, then every
// event published to any of them, in publish order; so a subscriber sees the
// events of its topics in one publish order from first to last, and ids that a
// publisher assigns in increasing order increase along its feed. Repeated
// topics count once. The set of topics is fixed.
func (b *Broker) SubscribeMany(topics ...string) *Subscription {
	return b.SubscribeFiltered(nil, topics...)
}

// SubscribeFiltered is SubscribeMany for a subscriber that may see only some
// keys of a keyed topic (PublishKeyed): it gets the current state and the events
// of the keys keep accepts, and none of the others. Events published without a
// key (Publish) all pass. keep (nil: every key) is called with the broker's lock
// held: it must be quick and must not call the Broker.
func (b *Broker) SubscribeFiltered(keep func(key string) bool, topics ...string) *Subscription {
	s := &Subscription{b: b, done: make(chan struct{}), ready: make(chan struct{}, 1), keep: keep}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.ended, s.err = true, ErrClosed
		close(s.done)
		return s
	}
	var seen map[string]struct{}
	pending := false // a keyed topic has states to take
	if len(topics) > 1 {
		seen = make(map[string]struct{}, len(topics))
	}
	s.memberships = make([]membership, 0, len(topics))
	var snapshot []keyedEvent // the unkeyed states; keyed ones are taken by cursor
	for _, name := range topics {
		if seen != nil {
			if _, dup := seen[name]; dup {
				continue
			}
			seen[name] = struct{}{}
		}
		t := b.topics[name]
		if t == nil {
			t = &topic{name: name}
			b.topics[name] = t
		}
		if t.has {
			snapshot = append(snapshot, keyedEvent{e: t.current, seq: t.seq})
		}
		if len(t.members) == 0 {
			b.activate(name, true)
		}
		s.memberships = append(s.memberships, membership{t: t, pos: len(t.members), start: b.seq})
		t.members = append(t.members, member{sub: s, slot: len(s.memberships) - 1})
		if len(t.keyed) > 0 {
			pending = true
		}
	}
	slices.SortFunc(snapshot, func(a, b keyedEvent) int { return cmp.Compare(a.seq, b.seq) })
	s.q = snapshot
	s.limit = b.buffer + len(s.q)
	if len(s.q) > 0 || pending {
		s.ready <- struct{}{}
	}
	b.subscribers.Inc()
	return s
}

// Close ends every subscription (Done closes, Err returns ErrClosed; events
// already buffered can still be received) and makes later Subscribe calls
// return an already-ended subscription. It reports active=false for every
// active topic and returns once every OnActive call has returned and the
// flushers (see Serve) have stopped. It is idempotent.
func (b *Broker) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		for _, t := range b.topics {
			for len(t.members) > 0 {
				b.end(t.members[len(t.members)-1].sub, ErrClosed)
			}
		}
	}
	flush := b.flush
	b.flush = nil
	b.mu.Unlock()
	if flush != nil {
		flush.close()
	}
	if b.onActive != nil {
		b.signal()
		<-b.idle
	}
}

// end removes s from all its topics and ends it with err. b.mu is held and
// s has not ended.
func (b *Broker) end(s *Subscription, err error) {
	s.mu.Lock()
	if err == ErrClosed && s.ch == nil {
		// What was published before Close is still delivered: take the keyed
		// states now, while the memberships say what is left.
		for _, e := range s.collect(nil, -1) {
			s.q = append(s.q, keyedEvent{e: e})
		}
	}
	s.mu.Unlock()
	for _, m := range s.memberships {
		b.removeMember(m.t, m.pos)
	}
	s.memberships = nil
	s.mu.Lock()
	s.ended, s.err = true, err
	if err != ErrClosed {
		s.q = nil // nobody will read what is left
	}
	if s.ch != nil {
		close(s.ch)
	}
	s.mu.Unlock()
	close(s.done)
	b.subscribers.Dec()
	if err == ErrSlowSubscriber {
		b.dropped.Inc()
	}
}

// removeMember swap-removes t.members[pos]. b.mu is held.
func (b *Broker) removeMember(t *topic, pos int) {
	last := len(t.members) - 1
	if pos != last {
		moved := t.members[last]
		t.members[pos] = moved
		moved.sub.memberships[moved.slot].pos = pos
	}
	t.members[last] = member{}
	t.members = t.members[:last]
	if last == 0 {
		t.members = nil // let a topic that had many subscribers shrink
		t.sweep()       // farewells nobody is left to take
		b.activate(t.name, false)
		if !t.has && len(t.keyed) == 0 {
			delete(b.topics, t.name)
		}
	}
}

// activate queues an OnActive call. b.mu is held.
func (b *Broker) activate(name string, active bool) {
	if b.onActive == nil {
		return
	}
	b.pending = append(b.pending, activation{topic: name, active: active})
	b.signal()
}

func (b *Broker) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// runActive makes the OnActive calls, in queue order, outside b.mu.
func (b *Broker) runActive() {
	defer close(b.idle)
	var batch []activation
	for range b.wake {
		for {
			b.mu.Lock()
			batch, b.pending = b.pending, batch[:0]
			closed := b.closed
			b.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			for i, a := range batch {
				b.onActive(a.topic, a.active)
				batch[i] = activation{}
			}
		}
	}
}

// Subscription is one subscriber's feed of events from a [Broker]. Read it
// with [Serve], or with Events; not both.
type Subscription struct {
	b     *Broker
	done  chan struct{}
	ready chan struct{}         // holds a token when q may be non-empty
	err   error                 // set before done closes
	limit int                   // most events that may wait
	keep  func(key string) bool // the keys of keyed topics it may see; nil: all

	memberships []membership // guarded by b.mu

	// sink is the Writer the broker's flushers write to, set while Serve
	// serves a hijacked socket (attach); queued is true while s waits in the
	// flushers' list.
	sink   atomic.Pointer[Writer]
	queued atomic.Bool

	mu    sync.Mutex
	ended bool         // written with b.mu and mu held
	q     []keyedEvent // waiting unkeyed events, by publication; nil once ch is used
	ch    chan Event   // non-nil once Events was called
	// numbered is set by NumberFrom: the subscription gives its events ids
	// of its own, lastID being the last it gave.
	numbered bool
	lastID   uint64
	// skipping is set by SkipThrough: events whose decimal id is at most
	// skipThrough are not given out.
	skipping    bool
	skipThrough uint64
}

// SkipThrough makes the subscription leave out the events whose id is a
// decimal number at most last, for a stream resumed after an id whose
// publisher numbers its events in increasing decimal ids in publish order (a
// client that had them gets only what came after). Once an event passes, all
// later ones do. Call it before reading the subscription.
func (s *Subscription) SkipThrough(last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipping, s.skipThrough = true, last
}

// skip drops from events those SkipThrough leaves out. s.mu is held.
func (s *Subscription) skip(events []Event) []Event {
	if !s.skipping {
		return events
	}
	n := 0
	for n < len(events) {
		id, err := strconv.ParseUint(events[n].ID, 10, 64)
		if err == nil && id > s.skipThrough {
			s.skipping = false
			break
		}
		n++
	}
	if n == 0 {
		return events
	}
	kept := copy(events, events[n:])
	clear(events[kept:])
	return events[:kept]
}

// NumberFrom makes the subscription number its events itself, whatever ids
// their publishers gave them: the events it gives out (through Serve or
// Events) carry last+1, last+2, ... in the order it gives them out. A stream
// whose subscriber may see only some of its topic's events (SubscribeFiltered)
// then shows nothing, by gaps in its ids, of the events it does not carry; a
// client that reconnects with Last-Event-ID N and gets a subscription numbered
// from N sees its ids go on increasing. Call it before reading the
// subscription. An event so numbered is framed for this subscriber alone.
func (s *Subscription) NumberFrom(last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.numbered, s.lastID = true, last
}

// number gives events the subscription's own ids, if it numbers them. s.mu is
// held.
func (s *Subscription) number(events []Event) {
	if !s.numbered {
		return
	}
	for i := range events {
		s.lastID++
		events[i] = renumbered(events[i], s.lastID)
	}
}

// renumbered is e with id as its id, framed. An event published without an id
// keeps its shared frame after the id line.
func renumbered(e Event, id uint64) Event {
	shared := e.frame
	had := e.ID != ""
	e.ID = strconv.FormatUint(id, 10)
	if had || shared == nil {
		return framed(e)
	}
	b := make([]byte, 0, len("id: \n")+len(e.ID)+len(shared))
	b = append(append(append(b, "id: "...), e.ID...), '\n')
	e.frame = append(b, shared...)
	return e
}

// push delivers e, published as seq, without blocking; false means the
// subscriber is full. b.mu is held.
func (s *Subscription) push(e Event, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		return s.send(e)
	}
	if len(s.q) >= s.limit {
		return false
	}
	s.q = append(s.q, keyedEvent{e: e, seq: seq})
	if len(s.q) == 1 {
		s.notify()
	}
	return true
}

// pushKeyed tells s of a keyed event: a subscriber read by Serve takes it by
// cursor (never full); one read through Events gets it queued. b.mu is held.
func (s *Subscription) pushKeyed(e Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		return s.send(e)
	}
	s.notify()
	return true
}

// send puts e on the channel made by Events, numbered if s numbers its
// events, without blocking; false means it is full. b.mu and s.mu are held,
// so nobody else sends meanwhile.
func (s *Subscription) send(e Event) bool {
	if len(s.ch) == cap(s.ch) {
		return false
	}
	if s.skipping && len(s.skip([]Event{e})) == 0 {
		return true
	}
	if s.numbered {
		s.lastID++
		e = renumbered(e, s.lastID)
	}
	s.ch <- e
	return true
}

// signal makes Serve take.
func (s *Subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// takeBatch bounds the events one take returns, so that a first state of many
// keys is written in steps (between which Serve sees heartbeats and the end).
const takeBatch = 256

// take returns the waiting events, at most takeBatch, in publish order, and
// keeps buf (cleared) for the next ones, so that a steady consumer and its
// publisher allocate nothing. When more wait, ready is signalled again.
func (s *Subscription) take(buf []Event) []Event {
	clear(buf)
	if cap(buf) > 2*takeBatch {
		buf = nil // give back what a burst made grow
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		return buf[:0]
	}
	var out []Event
	if s.ended {
		out = buf[:0]
		for _, ke := range s.q {
			out = append(out, ke.e)
		}
		s.q = nil
	} else {
		out = s.collect(buf[:0], takeBatch)
	}
	out = s.skip(out)
	s.number(out)
	return out
}

// channel returns the channel made by Events, or nil.
func (s *Subscription) channel() chan Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// Events returns the subscription's events as a channel with room for
// every event that may wait. The first call makes it (moving any waiting
// events into it) and later calls return the same channel. It is closed
// once the subscription has ended; events buffered before the end can still
// be received, and after ErrClosed they are exactly the events published
// before Close. A subscription is read either through Events or by Serve.
func (s *Subscription) Events() <-chan Event {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		var waiting []Event
		if s.ended {
			for _, ke := range s.q {
				waiting = append(waiting, ke.e)
			}
		} else {
			waiting = s.collect(nil, -1)
		}
		waiting = s.skip(waiting)
		s.number(waiting)
		s.ch = make(chan Event, max(s.limit, len(waiting)+s.b.buffer))
		for _, e := range waiting {
			s.ch <- e
		}
		s.q = nil
		if s.ended {
			close(s.ch)
		}
		select { // a Serve waiting on ready switches to the channel
		case s.ready <- struct{}{}:
		default:
		}
	}
	return s.ch
}

// Done returns a channel that is closed when the subscription ends.
func (s *Subscription) Done() <-chan struct{} {
	return s.done
}

// Err returns nil while the subscription is live, and once Done is closed
// the reason it ended: ErrSlowSubscriber, ErrClosed or ErrUnsubscribed.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// fatal returns the reason the subscription ended unless it is live or the
// broker closed (events are then still worth delivering).
func (s *Subscription) fatal() error {
	if err := s.Err(); err != nil && err != ErrClosed {
		return err
	}
	return nil
}

// Close unsubscribes: Done closes and Err returns ErrUnsubscribed, unless
// the subscription had already ended, in which case Close does nothing.
// It is idempotent.
func (s *Subscription) Close() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.ended {
		b.end(s, ErrUnsubscribed)
	}
}
