package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Topics of the broker: "session", and "<kind>/<name>" for a followed recipe
// (e.g. "election/db-primary"). A recipe topic is followed in ZooKeeper only while
// it has subscribers: one watch for the topic, however many streams.
const sessionTopicName = "session"

func electionTopic(name string) string { return "election/" + name }

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
		s.following[topic] = s.followPicture()
		return
	}
	kind, name, _ := strings.Cut(topic, "/")
	var stop func()
	switch kind {
	case "election":
		stop = s.followElection(topic, name)
	case "throughput":
		stop = s.followThroughput(topic, name)
	case "kv":
		stop = s.followKey(topic, name)
	case "lock":
		stop = s.followLock(topic, name)
	case "group":
		stop = s.followGroup(topic, name)
	case "partitions":
		stop = s.followPartitions(topic, name)
	}
	if stop != nil {
		s.following[topic] = stop
	}
}

// followElection publishes every state of an election to its topic, straight
// from the election's follower; the returned stop ends that.
//
// Event ids (as openapi.yaml documents them): the zxid of the newest change the
// state reflects (st.Zxid, at least the leader's term), raised to the previous
// id + 1 when it is not newer (a suspended state, the same state read again
// after a reconnect, an election gone), so they strictly increase along a stream.
func (s *Server) followElection(topic, name string) (stop func()) {
	f, err := s.opt.Elections.Follow(name)
	if err != nil {
		return nil
	}
	var lastID int64 // the follower calls publish one state at a time
	cancel := f.Subscribe(func(st *election.ElectionState) {
		if data, err := sse.Data(electionBody(st)); err == nil {
			lastID = max(st.Zxid, lastID+1)
			s.broker.Publish(topic, sse.Event{ID: strconv.FormatInt(lastID, 10), Name: "leader", Data: data})
		}
	})
	return func() { cancel(); f.Close() }
}

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

// topicStream serves one or more broker topics as an SSE response.
type topicStream struct {
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
}

// serve hijacks the connection when it can: the handler then returns and one
// small goroutine serves the stream until the client goes (seen by the reaper or
// a failed write) or the server closes, so an idle stream costs little memory.
// Server.Close waits for these goroutines; once it has begun, none is started:
// the stream, whose end has come already, ends on the request's goroutine, as
// the others did at the close.
func (t topicStream) serve(w http.ResponseWriter) error {
	subscribe := func() *sse.Subscription {
		sub := t.s.broker.SubscribeFiltered(t.keep, t.topics...)
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
			_ = sse.Serve(t.s.draining, sw, sub, t.s.opt.Heartbeat)
			t.s.retryHint(sw)
		}
		if !t.s.hijacked.Go(stream) {
			stream() // the server has closed: t.s.draining has ended, Serve returns at once
		}
		return nil
	}
	sw, err := sse.NewWriter(w, 10*time.Second)
	if err != nil {
		return err
	}
	_ = sse.Serve(t.ctx, sw, subscribe(), t.s.opt.Heartbeat)
	t.s.retryHint(sw)
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
