package sse

import (
	"cmp"
	"slices"
)

// A keyed topic keeps the current state of every key in a log ordered by
// publication: publishing a key moves its node to the end. A subscriber keeps a
// cursor per keyed topic (the last publication it has taken) and, when it takes,
// gets the nodes after its cursor: the keys changed since, each once, in its
// latest state. A forgotten key leaves a farewell node (gone) until every
// subscriber's cursor has passed it. So a keyed topic costs memory per key, and a
// subscriber a cursor, however many changes it has not taken yet.

// keyedNode is one key's current state, or farewell, in its topic's log.
type keyedNode struct {
	key        string
	e          Event
	seq        uint64 // its publication (Broker.seq)
	gone       bool   // e is the key's farewell
	prev, next *keyedNode
}

// keyedLog is a topic's keyed nodes, oldest publication first.
type keyedLog struct {
	head, tail *keyedNode
	gone       int    // farewell nodes in the log
	oldestGone uint64 // at most the oldest farewell's publication
}

func (l *keyedLog) unlink(n *keyedNode) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.prev, n.next = nil, nil
}

func (l *keyedLog) append(n *keyedNode) {
	n.prev = l.tail
	if l.tail != nil {
		l.tail.next = n
	} else {
		l.head = n
	}
	l.tail = n
}

// setKeyed records key's new state (or, gone, its farewell) as publication seq.
// b.mu is held.
func (t *topic) setKeyed(key string, e Event, seq uint64, gone bool) {
	n := t.keyed[key]
	if n == nil {
		if gone && len(t.members) == 0 {
			return // nobody to say farewell to
		}
		if t.keyed == nil {
			t.keyed = map[string]*keyedNode{}
		}
		n = &keyedNode{key: key}
		t.keyed[key] = n
	} else {
		t.log.unlink(n)
		if n.gone {
			t.log.gone--
		}
	}
	n.e, n.seq, n.gone = e, seq, gone
	if gone && len(t.members) == 0 {
		delete(t.keyed, key)
		return
	}
	if gone {
		if t.log.gone == 0 {
			t.log.oldestGone = seq
		}
		t.log.gone++
	}
	t.log.append(n)
}

// live is the number of keys with a current state.
func (t *topic) live() int { return len(t.keyed) - t.log.gone }

// sweep drops the farewells every member has taken (all of them when the topic
// has no member), once they are many and the oldest one has been taken: it walks
// the whole log. b.mu is held.
func (t *topic) sweep() {
	if t.log.gone == 0 || (len(t.members) > 0 && t.log.gone < max(64, t.live()/4)) {
		return
	}
	floor := ^uint64(0) // the oldest cursor of a member
	for _, m := range t.members {
		ms := m.sub.memberships[m.slot]
		floor = min(floor, max(ms.cursor, ms.start))
	}
	if floor < t.log.oldestGone {
		return // none taken by everyone yet
	}
	oldest := ^uint64(0)
	for n := t.log.head; n != nil; {
		next := n.next
		switch {
		case n.gone && n.seq <= floor:
			t.log.unlink(n)
			t.log.gone--
			delete(t.keyed, n.key)
		case n.gone:
			oldest = min(oldest, n.seq)
		}
		n = next
	}
	t.log.oldestGone = oldest
}

// collect takes up to limit (< 0: all) waiting events in publication order: the
// queued unkeyed ones and the keyed states after each keyed topic's cursor, which
// it advances. It signals ready when more are left. b.mu and s.mu are held.
func (s *Subscription) collect(out []Event, limit int) []Event {
	var found []keyedEvent
	scanned := make([]uint64, len(s.memberships)) // how far each topic was looked at
	more := false
	for i := range s.memberships {
		var cut bool
		found, scanned[i], cut = s.pending(&s.memberships[i], found, limit)
		more = more || cut
	}
	nq := len(s.q)
	if len(found) > 0 {
		found = append(found, s.q...)
		slices.SortFunc(found, func(a, b keyedEvent) int { return cmp.Compare(a.seq, b.seq) })
	} else {
		found = s.q
	}
	cut := ^uint64(0) // the last publication taken, when not all are
	if limit >= 0 && len(found) > limit {
		cut, more = found[limit-1].seq, true
		found = found[:limit]
	}
	for _, ke := range found {
		out = append(out, ke.e)
	}
	for i := range s.memberships {
		if m := &s.memberships[i]; m.t.log.tail != nil {
			m.cursor = max(m.cursor, min(scanned[i], cut, m.t.log.tail.seq))
			m.t.sweep()
		}
	}
	s.dropTaken(nq, cut)
	if more {
		s.signal()
	}
	return out
}

// pending appends to found up to limit (< 0: all) states of m's keyed topic
// after its cursor that s may see, and answers up to which publication it
// looked, and whether it stopped short of the end.
func (s *Subscription) pending(m *membership, found []keyedEvent, limit int) ([]keyedEvent, uint64, bool) {
	var first *keyedNode // the oldest node after the cursor
	for n := m.t.log.tail; n != nil && n.seq > m.cursor; n = n.prev {
		first = n
	}
	taken := 0
	for n := first; n != nil; n = n.next {
		if limit >= 0 && taken == limit {
			return found, n.prev.seq, true
		}
		if (n.gone && n.seq <= m.start) || (s.keep != nil && !s.keep(n.key)) {
			continue
		}
		found = append(found, keyedEvent{e: n.e, seq: n.seq})
		taken++
	}
	return found, ^uint64(0), false
}

// dropTaken removes from the queue (of nq events before collect) the events
// taken: those published up to cut, a prefix.
func (s *Subscription) dropTaken(nq int, cut uint64) {
	left := 0
	for left < nq && s.q[left].seq <= cut {
		left++
	}
	if left == nq {
		s.q = s.q[:0]
	} else {
		s.q = append(s.q[:0], s.q[left:]...)
	}
}
