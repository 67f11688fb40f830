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

// Farewells is the number of farewell nodes a keyed topic keeps.
func Farewells(b *Broker, topic string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[topic]; t != nil {
		return t.log.gone
	}
	return 0
}

// DirectStats returns how many events the broker's flushers wrote straight to
// hijacked sockets, and how many times a full socket left the rest to Serve.
func DirectStats(b *Broker) (written, left int64) {
	return b.directWritten.Load(), b.directLeft.Load()
}
