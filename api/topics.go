package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/api/tokens"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Topics of the broker: "session", and "<topic kind>/<name>" for a followed
// recipe (e.g. "election/db-primary", registered by the recipe:
// Descriptor.Topics). A
// recipe topic is followed in ZooKeeper only while it has subscribers: one
// watch for the topic, however many streams.
const sessionTopicName = "session"

// topicActive is the broker's OnActive: it starts following a recipe topic at its
// first subscriber and stops at its last, forgetting the then stale state. The
// broker makes these calls one at a time, in order, from one goroutine, and once
// more (active=false) for every active topic when it closes: s.following is
// touched by nothing else.
func (s *Server) topicActive(topic string, active bool) {
	if !active {
		if stop := s.following[topic]; stop != nil {
			delete(s.following, topic)
			stop()
		}
		if topic != sessionTopicName {
			s.broker.Forget(topic)
		}
		return
	}
	if topic == allTopic {
		if ev, ok := s.broker.Current(sessionTopicName); ok {
			s.publishAll("session", "session", ev.Data)
		}
		s.following[topic] = picture.Follow(s.stopped, s.opt.Session, s.sections, s.publishAll, s.forgetAll)
		return
	}
	kind, name, _ := strings.Cut(topic, "/")
	if follow := s.topics[kind]; follow != nil {
		if stop := follow(topic, name); stop != nil {
			s.following[topic] = stop
		}
	}
}

// Publish sends an event to a broker topic ("lock/db": what its streams get).
func (s *Server) Publish(topic string, ev sse.Event) { s.broker.Publish(topic, ev) }

// sessionTopic publishes the session's state changes.
type sessionTopic struct {
	mu sync.Mutex
	n  int64
	// cancel stops the Session's calls (Server.Close).
	cancel func()
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
	s.session.cancel = s.opt.Session.Subscribe(func(ch zookeeper.StateChange) {
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

// Stream serves one or more broker topics as an SSE response: a recipe's
// stream operation answers with it (wrapped in a type with its Visit method,
// which calls Serve).
type Stream struct {
	s      *Server
	ctx    context.Context
	topics []string
	// keep filters the keys of keyed topics (the "all" topic) by what the
	// request's token may read; nil keeps all.
	keep func(key string) bool
	// numberFrom, when set, makes the stream number its events itself from
	// *numberFrom + 1 on (sse.Subscription.NumberFrom) instead of showing the
	// publishers' ids.
	numberFrom *uint64
	// sub, when set (Resumed), is the subscription made already, served
	// after preface.
	sub     *sse.Subscription
	preface []sse.Event
}

// Keeps tells whether the stream carries key of its keyed topic (what its
// request's token may read).
func (t Stream) Keeps(key string) bool { return t.keep == nil || t.keep(key) }

// Resumed subscribes the stream now, for a client that reconnects having had
// the topic's events up to some id: the stream sends preface (what changed
// since that id, as the publisher knows it), then the topic's events whose
// decimal ids are above through (sse.Subscription.SkipThrough). The publisher
// calls it while it publishes nothing to the topic, with preface holding every
// change from the client's id up to through, so that the client misses none.
func (t Stream) Resumed(preface []sse.Event, through uint64) Stream {
	t.sub = t.s.broker.SubscribeFiltered(t.keep, t.topics...)
	t.sub.SkipThrough(through)
	t.preface = preface
	return t
}

// Closing is a context that ends when the server begins to close, for what a
// recipe keeps beyond its topics' subscribers (context.AfterFunc).
func (s *Server) Closing() context.Context { return s.stopped }

// Serve hijacks the connection when it can: the handler then returns and one
// small goroutine serves the stream until the client goes (seen by the reaper or
// a failed write) or the server closes, so an idle stream costs little memory.
// Server.Close waits for these goroutines; once it has begun, none is started:
// the stream, whose end has come already, ends on the request's goroutine, as
// the others did at the close.
func (t Stream) Serve(w http.ResponseWriter) error {
	subscribe := func() *sse.Subscription {
		sub := t.sub
		if sub == nil {
			sub = t.s.broker.SubscribeFiltered(t.keep, t.topics...)
		}
		if t.numberFrom != nil {
			sub.NumberFrom(*t.numberFrom)
		}
		return sub
	}
	if sw, err := sse.Hijack(w, 10*time.Second); err == nil {
		release := detachSlot(t.ctx)
		sub := subscribe()
		forget := t.s.reaper.Watch(sw, sub.Close)
		stream := func() {
			defer release()
			defer sw.Close()
			defer forget()
			if !t.sendPreface(sw, sub) {
				return
			}
			_ = sse.Serve(t.s.draining, sw, sub, t.s.opt.Heartbeat)
			t.s.RetryHint(sw)
		}
		if !t.s.hijacked.Go(stream) {
			stream() // the server has closed: t.s.draining has ended, Serve returns at once
		}
		return nil
	}
	sw, err := sse.NewWriter(w, 10*time.Second)
	if err != nil {
		if t.sub != nil {
			t.sub.Close()
		}
		return err
	}
	sub := subscribe()
	if !t.sendPreface(sw, sub) {
		return nil
	}
	_ = sse.Serve(t.ctx, sw, sub, t.s.opt.Heartbeat)
	t.s.RetryHint(sw)
	return nil
}

// sendPreface writes the preface of a resumed stream; false (sub closed)
// when a write fails.
func (t Stream) sendPreface(sw *sse.Writer, sub *sse.Subscription) bool {
	for _, e := range t.preface {
		if err := sw.Send(e); err != nil {
			sub.Close()
			return false
		}
	}
	return true
}

// VisitStreamSessionResponse serves GET /v1/session/events.
func (t Stream) VisitStreamSessionResponse(w http.ResponseWriter) error { return t.Serve(w) }

// StreamSession streams the session's state changes.
func (s *Server) StreamSession(ctx context.Context, _ oapi.StreamSessionRequestObject) (oapi.StreamSessionResponseObject, error) {
	return Stream{s: s, ctx: ctx, topics: []string{sessionTopicName}}, nil
}

// NewStream is a stream of the given topics for the request whose context is
// ctx (its end, or the server's, ends the stream).
func (s *Server) NewStream(ctx context.Context, topics ...string) Stream {
	return Stream{s: s, ctx: ctx, topics: topics}
}

// PublishKeyed sends the state of one entity, key, to a keyed broker topic:
// a new subscriber of the topic gets the current state of every key first
// (sse.Broker.PublishKeyed). A recipe's stream of many things (the keys under
// a prefix) publishes with it.
func (s *Server) PublishKeyed(topic, key string, ev sse.Event) { s.broker.PublishKeyed(topic, key, ev) }

// ForgetKeyed sends an entity's farewell (a deletion) to a keyed topic and
// forgets its state.
func (s *Server) ForgetKeyed(topic, key string, ev sse.Event) { s.broker.ForgetKeyed(topic, key, ev) }

// NewKeyedStream is a stream of a keyed topic whose keys are names of token
// kind kind: it carries only the keys the request's token may read.
func (s *Server) NewKeyedStream(ctx context.Context, topic, kind string) Stream {
	t := Stream{s: s, ctx: ctx, topics: []string{topic}}
	if p := tokens.FromContext(ctx); !p.All() {
		t.keep = func(key string) bool { return p.Reaches(kind, key) }
	}
	return t
}

// FollowStates publishes every state of the recipe's follower of name
// (follow's) to topic as event, its data body(state), until the returned stop
// (which also closes the follower); nil, and nothing published, when follow
// refuses name.
// Event ids (as openapi.yaml documents them) strictly increase along a stream:
// the zxid of the newest change the state reflects (zxid(state)), raised to
// the previous id + 1 when it is not newer (a suspended state, the same state
// read again after a reconnect, a name gone). A state whose body is nil is
// not published (the last one stands).
func FollowStates[S any](s *Server, topic, event string, follow func(name string) (*kit.Follower[S], error), name string,
	zxid func(S) int64, body func(S) any) (stop func()) {
	f, err := follow(name)
	if err != nil {
		return nil
	}
	var lastID int64 // the follower calls back one state at a time
	cancel := f.Subscribe(func(st S) {
		b := body(st)
		if b == nil {
			return
		}
		if data, err := sse.Data(b); err == nil {
			lastID = max(zxid(st), lastID+1)
			s.Publish(topic, sse.Event{ID: strconv.FormatInt(lastID, 10), Name: event, Data: data})
		}
	})
	return func() { cancel(); f.Close() }
}

// publishAll sends one entity's state to the "all" topic. Its events carry no
// id: each /v1/events stream numbers the events it carries itself
// (StreamEverything), so that no id counts what its token may not read.
func (s *Server) publishAll(key, event string, data []byte) {
	s.broker.PublishKeyed(allTopic, key, sse.Event{Name: event, Data: data})
}

// forgetAll sends an entity's farewell to the "all" topic and forgets it.
func (s *Server) forgetAll(key, event string, data []byte) {
	s.broker.ForgetKeyed(allTopic, key, sse.Event{Name: event, Data: data})
}

// Inspected is picture.Inspected on the server's session: the Follow of a
// picture section that has no follower of its own.
func (s *Server) Inspected(dir string, read func(context.Context, string) ([]byte, error), deeper func(rel string) bool) func(string, func([]byte)) (func(), error) {
	return picture.Inspected(s.opt.Session, dir, read, deeper)
}
