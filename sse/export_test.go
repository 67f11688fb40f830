package sse

// Pull waits for the next events the way Serve reads a subscription (without
// Events): it returns the waiting events, reusing buf, and whether the
// subscription has ended (then the events are the last ones).
func Pull(s *Subscription, buf []Event) (events []Event, ended bool) {
	select {
	case <-s.ready:
		return s.take(buf), false
	case <-s.done:
		return s.take(buf), true
	}
}
