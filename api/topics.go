package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Topics of the broker: "session", and "<kind>/<name>" for a followed recipe
// (e.g. "election/db-primary"). A recipe topic is followed in ZooKeeper only while
// it has subscribers: one watch for the topic, however many streams.
const sessionTopicName = "session"

func electionTopic(name string) string { return "election/" + name }

// topicFollowers are the running followers, by topic.
type topicFollowers struct {
	mu      sync.Mutex
	running map[string]func() // stops the follower and waits for it
}

func (t *topicFollowers) add(topic string, stop func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running == nil {
		t.running = map[string]func(){}
	}
	t.running[topic] = stop
}

func (t *topicFollowers) remove(topic string) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	stop := t.running[topic]
	delete(t.running, topic)
	return stop
}

func (t *topicFollowers) stopAll() {
	t.mu.Lock()
	all := t.running
	t.running = nil
	t.mu.Unlock()
	for _, stop := range all {
		stop()
	}
}

// topicActive is the broker's OnActive: it starts following a recipe topic at its
// first subscriber and stops at its last, forgetting the then stale state.
func (s *Server) topicActive(topic string, active bool) {
	if !active {
		if stop := s.topics.remove(topic); stop != nil {
			stop()
		}
		if topic != sessionTopicName {
			s.broker.Forget(topic)
		}
		if topic == allTopic {
			s.overview.reset()
		}
		return
	}
	if topic == allTopic {
		if ev, ok := s.broker.Current(sessionTopicName); ok {
			s.publishAll("session", "session", ev.Data)
		}
		s.followOverview()
		return
	}
	kind, name, _ := strings.Cut(topic, "/")
	switch kind {
	case "election":
		s.followElection(topic, name)
	case "throughput":
		s.followThroughput(topic, name)
	}
}

// follow keeps a topic current while it has subscribers: publish runs at once and
// after every change that changed reports, until the topic's last subscriber
// leaves or the server closes; then closeFollower releases the recipe's watcher.
func (s *Server) follow(topic string, changed func() <-chan struct{}, publish func(), closeFollower func()) {
	ctx, cancel := context.WithCancel(s.stopped)
	done := make(chan struct{})
	s.topics.add(topic, func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer closeFollower()
		for {
			next := changed()
			publish()
			select {
			case <-next:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// followElection publishes every state of an election to its topic.
func (s *Server) followElection(topic, name string) {
	f, err := s.opt.Elections.Follow(name)
	if err != nil {
		return
	}
	s.follow(topic, f.Changed, func() {
		if st, ok := f.State(); ok {
			if data, err := sse.Data(electionBody(st)); err == nil {
				s.broker.Publish(topic, sse.Event{ID: strconv.FormatInt(st.Zxid, 10), Name: "leader", Data: data})
			}
		}
	}, f.Close)
}

// sessionTopic publishes the session's state changes.
type sessionTopic struct {
	mu sync.Mutex
	n  int64
}

// followSession publishes the current session state, then every change, to the
// "session" topic (kept whether or not anyone subscribes: it is one small event).
func (s *Server) followSession() {
	publish := func(state string) {
		s.session.n++
		data, _ := sse.Data(map[string]string{"state": state})
		s.broker.Publish(sessionTopicName, sse.Event{ID: strconv.FormatInt(s.session.n, 10), Name: "session", Data: data})
		s.publishAll("session", "session", data)
	}
	// The callback runs under the Session's lock: never call the Session while
	// holding s.session.mu.
	s.opt.Session.Subscribe(func(ch recipes.StateChange) {
		s.session.mu.Lock()
		defer s.session.mu.Unlock()
		publish(ch.Event)
	})
	state := s.opt.Session.State().String()
	s.session.mu.Lock()
	defer s.session.mu.Unlock()
	if s.session.n == 0 { // no change was published meanwhile
		publish(state)
	}
}

// topicStream serves one or more broker topics as an SSE response.
type topicStream struct {
	s      *Server
	ctx    context.Context
	topics []string
	// keep filters the keys of keyed topics (the "all" topic) by what the
	// request's token may read; nil keeps all.
	keep func(key string) bool
}

// serve hijacks the connection when it can: the handler then returns and one
// small goroutine serves the stream until the client goes (seen by the reaper or
// a failed write) or the server closes, so an idle stream costs little memory.
func (t topicStream) serve(w http.ResponseWriter) error {
	subscribe := func() *sse.Subscription {
		return t.s.broker.SubscribeFiltered(t.keep, t.topics...)
	}
	if sw, err := sse.Hijack(w, 10*time.Second); err == nil {
		release := detachSlot(t.ctx)
		sub := subscribe()
		forget := t.s.reaper.Watch(sw, sub.Close)
		go func() {
			defer release()
			defer sw.Close()
			defer forget()
			_ = sse.Serve(t.s.stopped, sw, sub, t.s.opt.Heartbeat)
		}()
		return nil
	}
	sw, err := sse.NewWriter(w, 10*time.Second)
	if err != nil {
		return err
	}
	_ = sse.Serve(t.ctx, sw, subscribe(), t.s.opt.Heartbeat)
	return nil
}

// VisitStreamElectionResponse serves GET /v1/elections/{name}/events.
func (t topicStream) VisitStreamElectionResponse(w http.ResponseWriter) error { return t.serve(w) }

// VisitStreamSessionResponse serves GET /v1/session/events.
func (t topicStream) VisitStreamSessionResponse(w http.ResponseWriter) error { return t.serve(w) }

// StreamSession streams the session's state changes.
func (s *Server) StreamSession(ctx context.Context, _ StreamSessionRequestObject) (StreamSessionResponseObject, error) {
	return topicStream{s: s, ctx: ctx, topics: []string{sessionTopicName}}, nil
}
