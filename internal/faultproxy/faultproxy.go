// Package faultproxy is a TCP proxy on 127.0.0.1 that injects network
// faults between a client and a server (typically a ZooKeeper client and
// server) for tests: cut connections, a silent partition, latency and
// replies lost together with their connection.
//
// Faults act on chunks: whatever one read from a socket returned. A chunk
// may hold several protocol messages or part of one; with ZooKeeper's
// request/reply traffic on loopback a reply is normally one chunk.
package faultproxy

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

type mode int

const (
	normal mode = iota
	cut
	blackhole
	// mute forwards what clients send and discards what servers answer
	// (MuteAfter).
	mute
)

// Proxy forwards every connection accepted on its address to its target.
// Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	mu    sync.Mutex
	mode  mode
	delay time.Duration
	drop  int // server-to-client chunks still to discard
	// pass is how many server-to-client chunks the next connection accepted
	// forwards before the proxy turns mute (MuteAfter); 0: none pending. The connection takes it over as link.pass.
	pass     int
	accepted int // connections accepted since New
	// lose arms LoseAnswer/LoseRequest: the opcodes of the request to catch,
	// and whether it reaches its server; nil: none armed.
	lose   *loseReq
	links  map[*link]bool
	closed bool
}

// link is one proxied connection.
type link struct {
	client, server net.Conn // server is nil when nothing was dialed
	lost           bool     // bytes were discarded: the streams are out of step
	pass           int      // p.pass once taken over by this link (p.mu)
	// greeted counts, per direction (0: to the server, 1: to the client),
	// whether the ZooKeeper handshake's frame has gone by (p.mu).
	greeted [2]bool
	// awaitXid is the xid of a request whose answer is to be lost (LoseAnswer);
	// 0: none (p.mu). cutAfter: Cut once it is (LoseAnswerThenCut).
	awaitXid int32
	cutAfter bool
	done     chan struct{}
	once     sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		if l.server != nil {
			l.server.Close()
		}
	})
}

type chunk struct {
	data []byte
	due  time.Time
}

// New listens on 127.0.0.1:0 and forwards every accepted connection to
// target, with no fault, until Close.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, target: target, ctx: ctx, cancel: cancel, links: map[*link]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start returns a proxy to target, closed when tb ends (failing tb when it
// cannot listen).
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr returns the "127.0.0.1:port" address clients should dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection at once and, until Restore, closes each
// new connection as soon as it is accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = cut
	for l := range p.links {
		l.close()
		delete(p.links, l)
	}
}

// Blackhole keeps connections open but silently discards every byte in
// both directions until Restore, like a partition that sends no reset.
// New connections are accepted and discarded the same way, without the
// target ever being dialed.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.mode = blackhole
	p.mu.Unlock()
}

// SetDelay delays every chunk forwarded afterwards, in both directions, by
// d (0: no delay). Order is kept; throughput is not limited.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// DropReplies discards the next n chunks going from a server to its client,
// then closes the connection that carried the n-th: a reply lost together
// with its connection. The server has still received and applied the
// request.
func (p *Proxy) DropReplies(n int) {
	p.mu.Lock()
	p.drop = n
	p.mu.Unlock()
}

// MuteAfter arms the next connection the proxy accepts: it forwards the
// first n chunks going from the server to its client, and everything else, as
// usual; once the n-th has been forwarded the proxy turns mute until Restore:
// what clients send still reaches their servers, on every connection, but
// nothing servers send reaches a client (a server that applies requests and
// whose answers are lost). Connections accepted before go on as usual and spend
// none of the n: a chunk still in flight to a client that has just died cannot
// take the one meant for its successor. With n = 1, the server's answer to the
// new connection's ZooKeeper handshake gets through and nothing after it: the
// client holds a session it cannot use, and which its pings keep alive at the
// server however long the test takes to act.
func (p *Proxy) MuteAfter(n int) {
	p.mu.Lock()
	p.mode, p.pass = normal, n
	p.mu.Unlock()
}

// loseReq is an armed LoseAnswer or LoseRequest.
type loseReq struct {
	ops     map[int32]bool
	reaches bool // LoseAnswer: the request reaches its server
	cut     bool // LoseAnswerThenCut: Cut once the answer is lost
}

// LoseAnswer arms the proxy for the next ZooKeeper request whose opcode is one
// of ops (on any connection; e.g. 5 setData, 2 delete, 1 create, 14 multi):
// it reaches its server, and the connection is closed as soon as its answer
// comes, which is discarded: a write applied whose answer was lost with its
// connection, deterministically. Restore disarms it.
func (p *Proxy) LoseAnswer(ops ...int32) { p.arm(ops, true, false) }

// LoseAnswerThenCut is LoseAnswer followed, once the answer is lost, by Cut:
// the client cannot connect again until Restore, and the test can change
// things meanwhile.
func (p *Proxy) LoseAnswerThenCut(ops ...int32) { p.arm(ops, true, true) }

// LoseRequest arms the proxy for the next ZooKeeper request whose opcode is
// one of ops: it is discarded and its connection closed, so the client cannot
// tell it from a lost answer, but the server never applied it. Restore
// disarms it.
func (p *Proxy) LoseRequest(ops ...int32) { p.arm(ops, false, false) }

func (p *Proxy) arm(ops []int32, reaches, cut bool) {
	l := &loseReq{ops: map[int32]bool{}, reaches: reaches, cut: cut}
	for _, o := range ops {
		l.ops[o] = true
	}
	p.mu.Lock()
	p.lose = l
	p.mu.Unlock()
}

// loseFrames applies LoseAnswer and LoseRequest to a chunk (p.mu held): ok
// says whether it decided the chunk's fate, lost whether the chunk is
// discarded. It reads the ZooKeeper frames (4-byte length, then the header:
// xid and opcode for a request, xid, zxid and error for an answer) a chunk
// holds whole, after each direction's first frame (the handshake's).
func (p *Proxy) loseFrames(l *link, toClient bool, b []byte) (lost, ok bool) {
	dir := 0
	if toClient {
		dir = 1
	}
	if p.lose == nil && l.awaitXid == 0 {
		l.greeted[dir] = true // nothing armed: only the handshake is to skip
		return false, false
	}
	for {
		frame, rest, whole := nextFrame(b)
		if !whole {
			break
		}
		b = rest
		if !l.greeted[dir] {
			l.greeted[dir] = true
			continue
		}
		if p.loseFrame(l, toClient, frame) {
			return true, true
		}
	}
	if toClient && l.awaitXid != 0 {
		return true, true // answers after the request's are lost too, in order
	}
	return false, false
}

// nextFrame splits the first ZooKeeper frame (4-byte length, then as many
// bytes) off b; whole is false when b does not hold a whole frame.
func nextFrame(b []byte) (frame, rest []byte, whole bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 0 || len(b) < 4+n {
		return nil, b, false
	}
	return b[4 : 4+n], b[4+n:], true
}

// loseFrame applies LoseAnswer and LoseRequest to one whole frame after the
// handshake (p.mu held) and says whether its chunk is lost: the awaited
// answer, or an armed request that does not reach the server.
func (p *Proxy) loseFrame(l *link, toClient bool, frame []byte) bool {
	if len(frame) < 8 {
		return false
	}
	xid := int32(binary.BigEndian.Uint32(frame))
	switch {
	case toClient && l.awaitXid != 0 && xid == l.awaitXid:
		p.loseAwaitedAnswer(l)
		return true
	case !toClient && p.lose != nil && p.lose.ops[int32(binary.BigEndian.Uint32(frame[4:]))]:
		return p.loseArmedRequest(l, xid)
	}
	return false
}

// loseAwaitedAnswer loses the answer LoseAnswer waited for (p.mu held): it
// goes with its connection, and with every other one when the fault was
// armed to cut after it.
func (p *Proxy) loseAwaitedAnswer(l *link) {
	l.awaitXid = 0
	l.close()
	delete(p.links, l)
	if !l.cutAfter {
		return
	}
	p.mode = cut
	for o := range p.links {
		o.close()
		delete(p.links, o)
	}
}

// loseArmedRequest disarms the fault a request matched (p.mu held) and says
// whether the request itself is lost (LoseRequest: its connection closed);
// otherwise it reaches the server and its answer, xid, is awaited to be lost.
func (p *Proxy) loseArmedRequest(l *link, xid int32) bool {
	reaches, cutAfter := p.lose.reaches, p.lose.cut
	p.lose = nil
	if !reaches {
		l.close()
		delete(p.links, l)
		return true
	}
	l.awaitXid, l.cutAfter = xid, cutAfter
	return false
}

// Accepted is how many connections the proxy has accepted so far, whatever
// became of them (a connection accepted during Cut, or whose target refused
// it, counts).
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Restore ends every fault: new connections are forwarded normally, there
// is no delay and no pending DropReplies or MuteAfter. Connections that lost bytes
// during a Blackhole are closed, since their streams can no longer be
// parsed; the others go on forwarding.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay, p.drop, p.pass, p.lose = normal, 0, 0, 0, nil
	for l := range p.links {
		l.pass, l.awaitXid = 0, 0
		if l.lost {
			l.close()
			delete(p.links, l)
		}
	}
}

// Close stops listening, closes every connection and returns once every
// goroutine of the proxy has ended. Later calls do nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	p.cancel()
	for l := range p.links {
		l.close()
		delete(p.links, l)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for one accepted client connection and starts
// forwarding.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	l := &link{client: c, done: make(chan struct{})}
	p.mu.Lock()
	p.accepted++
	m, closed := p.mode, p.closed
	if closed || m == cut {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.links[l] = true
	defer func() { // forget l once it has ended
		<-l.done
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	if m == blackhole {
		l.lost = true
		p.mu.Unlock()
		p.pipe(l, c, nil, false)
		return
	}
	l.pass, p.pass = p.pass, 0
	p.mu.Unlock()

	var d net.Dialer
	s, err := d.DialContext(p.ctx, "tcp", p.target)
	p.mu.Lock()
	if err != nil || !p.links[l] { // failed, or cut or closed meanwhile
		p.mu.Unlock()
		l.close()
		if s != nil {
			s.Close()
		}
		return
	}
	l.server = s
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pipe(l, s, c, true)
	}()
	p.pipe(l, c, s, false)
}

// pipe reads chunks from src and hands them to a writer goroutine that
// writes them to dst when due (discarding them if dst is nil). The link
// is closed when src fails or once the writer has written everything
// read before src's end.
func (p *Proxy) pipe(l *link, src, dst net.Conn, toClient bool) {
	out := make(chan chunk, 64)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer l.close()
		for ch := range out {
			if wait := time.Until(ch.due); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-l.done:
					t.Stop()
					return
				}
			}
			if _, err := dst.Write(ch.data); err != nil {
				return
			}
		}
	}()
	defer close(out)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if ch, ok := p.admit(l, dst, toClient, buf[:n]); ok {
				select {
				case out <- ch:
				case <-l.done:
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// admit decides the fate of a chunk just read: it returns the chunk to
// forward, or false to discard it (closing l when a DropReplies count runs
// out).
func (p *Proxy) admit(l *link, dst net.Conn, toClient bool, b []byte) (chunk, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if lost, ok := p.loseFrames(l, toClient, b); ok {
		return chunk{}, !lost
	}
	switch {
	case dst == nil || p.mode == cut || p.mode == blackhole || p.mode == mute && toClient:
		l.lost = true
		return chunk{}, false
	case toClient && p.drop > 0:
		if p.drop--; p.drop == 0 {
			l.close()
			delete(p.links, l)
		}
		return chunk{}, false
	case toClient && l.pass > 0:
		if l.pass--; l.pass == 0 {
			p.mode = mute // this chunk is the last to get through
		}
	}
	return chunk{data: append([]byte(nil), b...), due: time.Now().Add(p.delay)}, true
}
