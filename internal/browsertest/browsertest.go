// Package browsertest drives a headless Chromium over the DevTools protocol
// for the tests of the status page and the reference: Start opens a page,
// whose Eval, Await and Call run in it, and Problems lists what its console
// and network reported.
package browsertest

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

const chromiumPath = "/usr/bin/chromium"

// Page is one page of a headless Chromium under the DevTools protocol.
type Page struct {
	ws *wsConn

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan cdpReply
	readErr  error
	messages []message // console errors, exceptions and error log entries
	requests []string  // the URL of every request the page made (with Network.enable)
	done     chan struct{}
}

type message struct {
	text    string
	network bool // a failed request, as when the sidecar is down
}

type cdpReply struct {
	result json.RawMessage
	err    error
}

// Start starts Chromium with a page and connects to it; Chromium is
// killed and its profile removed in Cleanup.
func Start(t testing.TB) *Page {
	t.Helper()
	pageWS := uiPageTarget(t, startChromium(t))
	ws, err := wsDial(pageWS)
	if err != nil {
		t.Fatalf("DevTools websocket %s: %v", pageWS, err)
	}
	p := &Page{ws: ws, pending: map[int64]chan cdpReply{}, done: make(chan struct{})}
	go p.readLoop()
	t.Cleanup(func() {
		_ = ws.close()
		<-p.done
	})
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.Call(t, m, nil)
	}
	return p
}

// startChromium starts a headless Chromium on about:blank and returns its
// DevTools address; Chromium (with its helpers) is killed and its profile
// removed in Cleanup.
func startChromium(t testing.TB) (browserWS string) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the status page test needs Debian's chromium package (%v): apt-get install chromium (make test installs it), or run with -short to skip", err)
	}
	dir, err := os.MkdirTemp("", "coord-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromiumPath, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+dir, "--remote-debugging-port=0", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // one group with its helpers, killed together
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	listening := make(chan string, 1)
	exited := make(chan struct{})
	var tailMu sync.Mutex
	var tail []string
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if ws, ok := strings.CutPrefix(line, "DevTools listening on "); ok {
				select {
				case listening <- strings.TrimSpace(ws):
				default:
				}
			}
			tailMu.Lock()
			if tail = append(tail, line); len(tail) > 30 {
				tail = tail[1:]
			}
			tailMu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("chromium (pid %d) did not exit", cmd.Process.Pid)
		}
		_ = os.RemoveAll(dir)
	})
	stderrTail := func() string {
		tailMu.Lock()
		defer tailMu.Unlock()
		return strings.Join(tail, "\n")
	}
	select {
	case browserWS = <-listening:
	case <-exited:
		t.Fatalf("chromium exited before listening:\n%s", stderrTail())
	case <-time.After(20 * time.Second):
		t.Fatalf("chromium did not print its DevTools address within 20s:\n%s", stderrTail())
	}
	return browserWS
}

// uiPageTarget returns the DevTools websocket address of the page target (the
// one started with about:blank) of the Chromium at browserWS.
func uiPageTarget(t testing.TB, browserWS string) (pageWS string) {
	t.Helper()
	u, err := url.Parse(browserWS)
	if err != nil {
		t.Fatalf("DevTools address %q: %v", browserWS, err)
	}
	testutil.Eventually(t, 10*time.Second, "chromium lists its page target", func() bool {
		resp, err := http.Get("http://" + u.Host + "/json/list")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var targets []struct{ Type, WebSocketDebuggerURL string }
		if json.NewDecoder(resp.Body).Decode(&targets) != nil {
			return false
		}
		for _, tg := range targets {
			if tg.Type == "page" && tg.WebSocketDebuggerURL != "" {
				pageWS = tg.WebSocketDebuggerURL
				return true
			}
		}
		return false
	})
	return pageWS
}

// readLoop hands answers to their callers and records the page's errors.
func (p *Page) readLoop() {
	defer close(p.done)
	for {
		msg, err := p.ws.readMessage()
		if err != nil {
			p.mu.Lock()
			p.readErr = err
			for id, ch := range p.pending {
				ch <- cdpReply{err: fmt.Errorf("DevTools connection: %w", err)}
				delete(p.pending, id)
			}
			p.mu.Unlock()
			return
		}
		var m struct {
			ID     int64           `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(msg, &m) != nil {
			continue
		}
		if m.ID != 0 {
			p.mu.Lock()
			ch := p.pending[m.ID]
			delete(p.pending, m.ID)
			p.mu.Unlock()
			if ch != nil {
				r := cdpReply{result: m.Result}
				if m.Error != nil {
					r.err = fmt.Errorf("DevTools error %d: %s", m.Error.Code, m.Error.Message)
				}
				ch <- r
			}
			continue
		}
		if m.Method == "Network.requestWillBeSent" {
			p.recordRequest(m.Params)
			continue
		}
		if text, network, ok := cdpProblem(m.Method, m.Params); ok {
			p.mu.Lock()
			p.messages = append(p.messages, message{text: text, network: network})
			p.mu.Unlock()
		}
	}
}

// cdpProblem turns a console error, an uncaught exception or an error log entry
// into text.
func cdpProblem(method string, params json.RawMessage) (text string, network, ok bool) {
	switch method {
	case "Runtime.consoleAPICalled":
		var ev struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(params, &ev) != nil || (ev.Type != "error" && ev.Type != "assert") {
			return "", false, false
		}
		var parts []string
		for _, a := range ev.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, fmt.Sprint(a.Value))
			}
		}
		return "console." + ev.Type + ": " + strings.Join(parts, " "), false, true
	case "Runtime.exceptionThrown":
		var ev struct {
			Details struct {
				Text      string `json:"text"`
				URL       string `json:"url"`
				Line      int    `json:"lineNumber"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		_ = json.Unmarshal(params, &ev)
		d := ev.Details
		return fmt.Sprintf("exception at %s:%d: %s %s", d.URL, d.Line+1, d.Text, d.Exception.Description), false, true
	case "Log.entryAdded":
		var ev struct {
			Entry struct {
				Source string `json:"source"`
				Level  string `json:"level"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		if json.Unmarshal(params, &ev) != nil || ev.Entry.Level != "error" {
			return "", false, false
		}
		e := ev.Entry
		return fmt.Sprintf("log (%s): %s %s", e.Source, e.Text, e.URL), e.Source == "network", true
	}
	return "", false, false
}

// Problems answers the errors recorded so far, without failed requests when
// allowNetwork (they are expected while the sidecar is down).
func (p *Page) Problems(allowNetwork bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.messages {
		if !(allowNetwork && m.network) {
			out = append(out, m.text)
		}
	}
	return out
}

// cdpPatience bounds the wait for one DevTools answer: a navigation to a
// 2.7 MB page on a machine busy with the rest of the suite has taken more
// than 15 s to commit.
const cdpPatience = time.Minute

// Send issues one DevTools command and waits for its answer; it never calls
// t.Fatal.
func (p *Page) Send(method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = map[string]any{}
	}
	p.mu.Lock()
	if p.readErr != nil {
		p.mu.Unlock()
		return nil, p.readErr
	}
	p.nextID++
	id := p.nextID
	ch := make(chan cdpReply, 1)
	p.pending[id] = ch
	p.mu.Unlock()
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err == nil {
		err = p.ws.writeText(msg)
	}
	if err == nil {
		select {
		case r := <-ch:
			return r.result, r.err
		case <-time.After(testutil.Patience(cdpPatience)):
			err = fmt.Errorf("no answer within %s", testutil.Patience(cdpPatience))
		}
	}
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
	return nil, fmt.Errorf("%s: %w", method, err)
}

func (p *Page) Call(t testing.TB, method string, params any) json.RawMessage {
	t.Helper()
	r, err := p.Send(method, params)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// EvalErr evaluates a JS expression in the page and answers its JSON value.
func (p *Page) EvalErr(expr string) (any, error) {
	raw, err := p.Send("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return nil, err
	}
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if r.Exception != nil {
		return nil, fmt.Errorf("evaluate %s: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	return r.Result.Value, nil
}

func (p *Page) Eval(t testing.TB, expr string) any {
	t.Helper()
	v, err := p.EvalErr(expr)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Await polls a JS condition every 50ms until it is true and answers how long
// that took; past within (made testutil.Patience) the test fails with what the
// page shows.
func (p *Page) Await(t testing.TB, within time.Duration, what, cond string) time.Duration {
	t.Helper()
	within = testutil.Patience(within)
	start := time.Now()
	deadline := start.Add(within)
	for {
		v, err := p.EvalErr(cond)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v == true {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			text, _ := p.EvalErr(`document.body.innerText`)
			t.Fatalf("not within %s: %s; the page shows:\n%v\nconsole: %v", within, what, text, p.Problems(false))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Screenshot writes the whole page as a PNG.
func (p *Page) Screenshot(t *testing.T, path string) {
	t.Helper()
	h, _ := p.Eval(t, `document.documentElement.scrollHeight`).(float64)
	raw := p.Call(t, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": 1280, "height": max(h, 800), "scale": 1},
	})
	var r struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// wsConn is a minimal RFC 6455 Client: text frames out (masked), whole messages
// in (reassembling fragments, answering pings), no extensions.
type wsConn struct {
	c   net.Conn
	br  *bufio.Reader
	wmu sync.Mutex
}

func wsDial(rawURL string) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "ws" {
		return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		c.Close()
		return nil, err
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		c.Close()
		return nil, fmt.Errorf("websocket handshake refused: %s", resp.Status)
	}
	_ = c.SetDeadline(time.Time{})
	return &wsConn{c: c, br: br}, nil
}

func (w *wsConn) writeText(b []byte) error { return w.writeFrame(0x1, b) }

func (w *wsConn) writeFrame(op byte, payload []byte) error {
	n := len(payload)
	frame := []byte{0x80 | op} // FIN
	switch {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	case n <= 0xFFFF:
		frame = append(frame, 0x80|126)
		frame = binary.BigEndian.AppendUint16(frame, uint16(n))
	default:
		frame = append(frame, 0x80|127)
		frame = binary.BigEndian.AppendUint64(frame, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err := w.c.Write(frame)
	return err
}

// readMessage answers the next whole text or binary message.
func (w *wsConn) readMessage() ([]byte, error) {
	var msg []byte
	for {
		fin, op, payload, err := w.readFrame()
		if err != nil {
			return nil, err
		}
		switch op {
		case 0x0, 0x1, 0x2: // continuation, text, binary
			msg = append(msg, payload...)
			if fin {
				return msg, nil
			}
		case 0x8:
			return nil, io.EOF
		case 0x9:
			if err := w.writeFrame(0xA, payload); err != nil {
				return nil, err
			}
		case 0xA:
		default:
			return nil, fmt.Errorf("websocket opcode %#x", op)
		}
	}
}

// readFrame reads one frame: whether it ends its message, its opcode and its
// payload, unmasked (servers do not mask, but it is tolerated).
func (w *wsConn) readFrame() (fin bool, op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(w.br, h[:]); err != nil {
		return false, 0, nil, err
	}
	fin, op = h[0]&0x80 != 0, h[0]&0x0F
	n, err := w.payloadLength(h[1] & 0x7F)
	if err != nil {
		return false, 0, nil, err
	}
	var mask []byte
	if h[1]&0x80 != 0 {
		mask = make([]byte, 4)
		if _, err := io.ReadFull(w.br, mask); err != nil {
			return false, 0, nil, err
		}
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(w.br, payload); err != nil {
		return false, 0, nil, err
	}
	for i := range payload {
		if mask != nil {
			payload[i] ^= mask[i%4]
		}
	}
	return fin, op, payload, nil
}

// payloadLength reads a frame's payload length from its 7-bit field (and the
// 16- or 64-bit one that follows it); at most 256 MiB.
func (w *wsConn) payloadLength(short byte) (uint64, error) {
	n := uint64(short)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(w.br, b[:]); err != nil {
			return 0, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(w.br, b[:]); err != nil {
			return 0, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 256<<20 {
		return 0, fmt.Errorf("websocket frame of %d bytes", n)
	}
	return n, nil
}

func (w *wsConn) close() error {
	_ = w.writeFrame(0x8, nil)
	return w.c.Close()
}

// uiSemaphoreAndRWLock makes a semaphore with two of three permits held and a

// recordRequest keeps the URL of a Network.requestWillBeSent event.
func (p *Page) recordRequest(params json.RawMessage) {
	var ev struct {
		Request struct {
			URL string `json:"url"`
		} `json:"request"`
	}
	if json.Unmarshal(params, &ev) != nil {
		return
	}
	p.mu.Lock()
	p.requests = append(p.requests, ev.Request.URL)
	p.mu.Unlock()
}

// Requests is the URL of every request the page made (with Network.enable).
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// LogLatency logs how long the page took to show a change, each time. It asserts
// nothing: that each change showed is the await's (bounded only for a failure),
// and how fast is make bench's (BenchmarkPicture10k's change-ms): on a busy
// 2-core machine under -race a median of a second says nothing of the page.
func LogLatency(t *testing.T, what string, took []time.Duration) {
	t.Helper()
	ms := make([]string, len(took))
	for i, d := range took {
		ms[i] = fmt.Sprintf("%d ms", d.Milliseconds())
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	t.Logf("%s after %s (median %d ms)", what, strings.Join(ms, ", "), median.Milliseconds())
}
