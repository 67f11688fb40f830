package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// echoServer echoes every connection and counts the bytes it received.
type echoServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  int
	conn []net.Conn
}

func newEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conn = append(e.conn, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					e.mu.Lock()
					e.got += n
					e.mu.Unlock()
					if err != nil {
						return
					}
					c.Write(buf[:n])
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.conn {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) received() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.got
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads len(msg) bytes back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func mustEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if got, err := roundTrip(c, msg, 5*time.Second); err != nil || got != msg {
		t.Fatalf("round trip %q = %q, %v", msg, got, err)
	}
}

// mustClose expects c to be closed by the proxy: a read ends with EOF or reset, not a timeout.
func mustClose(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed by the proxy: read error %v", err)
	}
}

func TestTCPFaults(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())

	t.Run("forward", func(t *testing.T) {
		mustEcho(t, dial(t, p.Addr()), "hello")
	})
	t.Run("cut", func(t *testing.T) {
		c := dial(t, p.Addr())
		mustEcho(t, c, "x")
		p.Cut()
		mustClose(t, c)
		mustClose(t, dial(t, p.Addr()))
		p.Restore()
		mustEcho(t, dial(t, p.Addr()), "back")
	})
	t.Run("blackhole", func(t *testing.T) {
		c := dial(t, p.Addr())
		mustEcho(t, c, "x")
		before := e.received()
		p.Blackhole()
		if _, err := roundTrip(c, "lost", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("round trip through a blackhole: %v, want a timeout", err)
		}
		fresh := dial(t, p.Addr())
		if _, err := roundTrip(fresh, "lost", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("round trip on a new connection through a blackhole: %v, want a timeout", err)
		}
		if got := e.received(); got != before {
			t.Fatalf("server received %d bytes during the blackhole", got-before)
		}
		p.Restore()
		mustClose(t, c) // its stream lost bytes
		mustClose(t, fresh)
		mustEcho(t, dial(t, p.Addr()), "back")
	})
	t.Run("delay", func(t *testing.T) {
		c := dial(t, p.Addr())
		// A delay of a second each way: a round trip that took less than one
		// was not delayed, however busy the machine.
		const delay = time.Second
		p.SetDelay(delay)
		start := time.Now()
		mustEcho(t, c, "slow")
		if rtt := time.Since(start); rtt < 2*delay {
			t.Fatalf("round trip took %v, want >= %v (%v each way)", rtt, 2*delay, delay)
		}
		p.SetDelay(0)
		start = time.Now()
		mustEcho(t, c, "fast")
		if rtt := time.Since(start); rtt >= delay {
			t.Fatalf("round trip took %v after SetDelay(0): delayed", rtt)
		}
	})
	t.Run("drop replies", func(t *testing.T) {
		c := dial(t, p.Addr())
		mustEcho(t, c, "x")
		before := e.received()
		p.DropReplies(1)
		io.WriteString(c, "req")
		mustClose(t, c)
		if got := e.received() - before; got != 3 {
			t.Fatalf("server received %d bytes of the request, want 3", got)
		}
		mustEcho(t, dial(t, p.Addr()), "next")
	})
	t.Run("mute after", func(t *testing.T) {
		old := dial(t, p.Addr())
		mustEcho(t, old, "before")
		p.MuteAfter(1)
		mustEcho(t, old, "not spent") // a connection accepted before spends nothing
		c := dial(t, p.Addr())
		mustEcho(t, c, "answered")
		before := e.received()
		if _, err := roundTrip(c, "lost", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("round trip after the chunk let through: %v, want a timeout", err)
		}
		if _, err := roundTrip(old, "lost too", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("round trip on the older connection once the proxy is mute: %v, want a timeout", err)
		}
		testutil.Eventually(t, 5*time.Second, "the requests sent while mute reach the server", func() bool {
			return e.received()-before == len("lost")+len("lost too")
		})
		p.Restore()
		mustClose(t, c)
		mustClose(t, old)
		mustEcho(t, dial(t, p.Addr()), "back")
	})
	t.Run("accepted", func(t *testing.T) {
		before := p.Accepted()
		mustEcho(t, dial(t, p.Addr()), "one")
		p.Cut()
		mustClose(t, dial(t, p.Addr()))
		p.Restore()
		if got := p.Accepted() - before; got != 2 {
			t.Fatalf("Accepted grew by %d, want 2 (one forwarded, one cut)", got)
		}
	})
}

func TestCloseStopsEverything(t *testing.T) {
	e := newEcho(t)
	base := runtime.NumGoroutine()
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	mustEcho(t, c, "x")
	p.SetDelay(time.Hour)
	io.WriteString(c, "pending")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, c)
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepts after Close")
	}
	// The proxy's own goroutines are gone when Close returns; the echo
	// server's handler of the closed connection ends shortly after.
	testutil.Eventually(t, 5*time.Second, "goroutines to return to baseline", func() bool { return runtime.NumGoroutine() <= base })
	p.Close()
}

// zkSetup returns the shared ZooKeeper server, a proxy in front of it and a
// test root that exists.
func zkSetup(t *testing.T) (server []string, p *Proxy, direct *zk.Conn, root string) {
	t.Helper()
	server = zktest.Shared(t).Servers()
	p = newProxy(t, server[0])
	direct = zktest.Connect(t, server, 10*time.Second)
	root = zktest.Root(t)
	if _, err := direct.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	return server, p, direct, root
}

func TestZKForwarding(t *testing.T) {
	_, p, direct, root := zkSetup(t)
	conn := zktest.Connect(t, []string{p.Addr()}, 10*time.Second)
	if _, err := conn.Create(root+"/a", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if data, _, err := direct.Get(root + "/a"); err != nil || string(data) != "v" {
		t.Fatalf("direct Get = %q, %v", data, err)
	}
}

func TestZKShortCutKeepsSession(t *testing.T) {
	_, p, direct, root := zkSetup(t)
	conn, ev := zktest.ConnectEvents(t, []string{p.Addr()}, 10*time.Second)
	id := conn.SessionID()
	eph := root + "/eph"
	if _, err := conn.Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	ev.Wait(t, zk.StateDisconnected, 5*time.Second)
	if ok, _, err := direct.Exists(eph); err != nil || !ok {
		t.Fatalf("ephemeral gone during a short cut: exists=%v err=%v", ok, err)
	}
	p.Restore()
	ev.Wait(t, zk.StateHasSession, 10*time.Second)
	if got := conn.SessionID(); got != id {
		t.Fatalf("session id after reconnect = %#x, want %#x", got, id)
	}
	if ok, _, err := conn.Exists(eph); err != nil || !ok {
		t.Fatalf("ephemeral after reconnect: exists=%v err=%v", ok, err)
	}
}

func TestZKLongCutExpiresSession(t *testing.T) {
	_, p, direct, root := zkSetup(t)
	conn, ev := zktest.ConnectEvents(t, []string{p.Addr()}, time.Second)
	id := conn.SessionID()
	eph := root + "/eph"
	if _, err := conn.Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := direct.ExistsW(eph)
	if err != nil {
		t.Fatal(err)
	}

	p.Cut()
	ev.Wait(t, zk.StateDisconnected, 5*time.Second)
	select { // the server expires the session and deletes its ephemeral
	case e := <-watch:
		if e.Type != zk.EventNodeDeleted {
			t.Fatalf("watch event %v, want EventNodeDeleted", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("session not expired by the server within 10s")
	}
	p.Restore()
	ev.Wait(t, zk.StateExpired, 10*time.Second)
	ev.Wait(t, zk.StateHasSession, 10*time.Second) // the client starts a new session by itself
	if got := conn.SessionID(); got == id || got == 0 {
		t.Fatalf("session id after expiry = %#x, want a new one (old %#x)", got, id)
	}
}

func TestZKDroppedReplyAppliedOnServer(t *testing.T) {
	_, p, direct, root := zkSetup(t)
	// A long session keeps pings (every timeout/3) out of the way.
	conn := zktest.Connect(t, []string{p.Addr()}, 30*time.Second)
	p.DropReplies(1)
	if _, err := conn.Create(root+"/n", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("Create with its reply dropped: %v, want ErrConnectionClosed", err)
	}
	if ok, _, err := direct.Exists(root + "/n"); err != nil || !ok {
		t.Fatalf("node of the lost reply: exists=%v err=%v, want applied", ok, err)
	}
}

func TestZKBlackholeDisconnects(t *testing.T) {
	_, p, _, _ := zkSetup(t)
	conn, ev := zktest.ConnectEvents(t, []string{p.Addr()}, 2*time.Second)
	p.Blackhole()
	// No reset: the client notices only once nothing arrived for 2/3 of the
	// session timeout (pings are sent every 1/3).
	start := time.Now()
	ev.Wait(t, zk.StateDisconnected, 10*time.Second)
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("disconnected after %v: too early for a silent partition", d)
	}
	p.Restore()
	ev.Wait(t, zk.StateHasSession, 15*time.Second)
	if _, _, err := conn.Exists("/"); err != nil {
		t.Fatal(err)
	}
}
