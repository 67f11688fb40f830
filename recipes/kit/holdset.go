package kit

import "iter"

// holdSet is a lease's holds by Hold. Most leases hold one thing (every
// implicit lease: the lock it was made for), so the first hold is kept in the
// set itself and only a second one makes a map: a lock cycle's lease then
// allocates no map and none of a map's groups.
type holdSet struct {
	one   Hold
	oneV  *held
	more  map[Hold]*held
	oneOK bool
}

// get returns the entry of h.
func (s *holdSet) get(h Hold) (*held, bool) {
	if s.oneOK && s.one == h {
		return s.oneV, true
	}
	e, ok := s.more[h]
	return e, ok
}

// set makes e the entry of h.
func (s *holdSet) set(h Hold, e *held) {
	switch {
	case s.oneOK && s.one == h:
		s.oneV = e
	case !s.oneOK && s.more[h] == nil:
		s.one, s.oneV, s.oneOK = h, e, true
	default:
		if s.more == nil {
			s.more = map[Hold]*held{}
		}
		s.more[h] = e
	}
}

// del removes h's entry, if any.
func (s *holdSet) del(h Hold) {
	if s.oneOK && s.one == h {
		s.one, s.oneV, s.oneOK = Hold{}, nil, false
		return
	}
	delete(s.more, h)
}

// len is the number of entries.
func (s *holdSet) len() int {
	n := len(s.more)
	if s.oneOK {
		n++
	}
	return n
}

// all yields every entry, in no order; deleting the yielded entry while
// iterating is allowed.
func (s *holdSet) all() iter.Seq2[Hold, *held] {
	return func(yield func(Hold, *held) bool) {
		if s.oneOK && !yield(s.one, s.oneV) {
			return
		}
		for h, e := range s.more {
			if !yield(h, e) {
				return
			}
		}
	}
}
