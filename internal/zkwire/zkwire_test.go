package zkwire

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
)

// wire is the far end of a Conn: what was written, and what is left to read.
type wire struct {
	net.Conn
	in  []byte
	out bytes.Buffer
}

func (w *wire) Write(b []byte) (int, error) { return w.out.Write(b) }

// Read hands out as much as b takes: readAll picks the sizes.
func (w *wire) Read(b []byte) (int, error) {
	n := copy(b, w.in)
	w.in = w.in[n:]
	return n, nil
}

func frame(parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func i32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func i64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func connectRequest(zxid, session int64) []byte {
	return frame(i32(0), i64(zxid), i32(10000), i64(session), i32(16), make([]byte, 16), []byte{0})
}

// connectResponse's bytes 4..12 of its body (timeOut and half the session id)
// sit where a reply's zxid would: they must pass untouched.
func connectResponse() []byte {
	return frame(i32(0), i32(4000), i64(0x0102030405060708), i32(16), bytes.Repeat([]byte{7}, 16), []byte{0})
}

func reply(xid int32, zxid int64, body ...byte) []byte {
	return frame(i32(xid), i64(zxid), i32(0), body)
}

// readAll reads n bytes through c, step at a time.
func readAll(t *testing.T, c net.Conn, n, step int) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, step)
	for len(got) < n {
		k, err := c.Read(buf[:min(step, n-len(got))])
		if err != nil || k == 0 {
			t.Fatalf("read after %d of %d bytes: %d, %v", len(got), n, k, err)
		}
		got = append(got, buf[:k]...)
	}
	return got
}

// Whatever the reads' sizes: the connect answer passes untouched, a reply to a
// request reaches go-zookeeper with zxid 0 and is recorded (the newest kept),
// and a watch event's or ping's header passes as it came.
func TestRepliesZxidRecordedAndHidden(t *testing.T) {
	stream := [][]byte{
		connectResponse(),
		reply(1, 0x500, 1, 2, 3),
		reply(-2, 0x600),            // ping: not a reply to a request
		reply(-1, -1, 9, 9),         // watch event
		reply(2, 0x400),             // an older zxid is not a step back
		reply(3, 0x501, 4, 5, 6, 7), // the newest
	}
	want := [][]byte{
		connectResponse(),
		reply(1, 0, 1, 2, 3),
		reply(-2, 0x600),
		reply(-1, -1, 9, 9),
		reply(2, 0),
		reply(3, 0, 4, 5, 6, 7),
	}
	all := bytes.Join(stream, nil)
	for _, step := range []int{1, 2, 3, 5, 16, 17, len(all)} {
		var z Zxids
		c := z.Wrap(&wire{in: bytes.Clone(all)})
		if got := readAll(t, c, len(all), step); !bytes.Equal(got, bytes.Join(want, nil)) {
			t.Fatalf("step %d: read\n%x\nwant\n%x", step, got, bytes.Join(want, nil))
		}
		if z.Last() != 0x501 {
			t.Fatalf("step %d: recorded 0x%x, want 0x501", step, z.Last())
		}
	}
}

// The ConnectRequest of an existing session carries the recorded zxid; one for
// a new session starts the record over. A SetWatches request carries the zxid
// recorded when its connection's ConnectRequest went out, not a newer one.
func TestRequestsCarryTheRecordedZxid(t *testing.T) {
	var z Zxids
	z.last.Store(0x700)

	far := &wire{in: bytes.Join([][]byte{connectResponse(), reply(1, 0x900)}, nil)}
	c := z.Wrap(far)
	if _, err := c.Write(connectRequest(0, 0x42)); err != nil {
		t.Fatal(err)
	}
	if got := far.out.Bytes(); !bytes.Equal(got, connectRequest(0x700, 0x42)) {
		t.Fatalf("reconnect wrote %x, want lastZxidSeen 0x700", got)
	}
	readAll(t, c, len(connectResponse())+len(reply(1, 0)), 64) // a reply at 0x900 arrives
	far.out.Reset()
	setWatches := frame(i32(5), i32(opSetWatches), i64(0), i32(1), i32(2), []byte("/a"), i32(0), i32(0))
	if _, err := c.Write(setWatches); err != nil {
		t.Fatal(err)
	}
	want := frame(i32(5), i32(opSetWatches), i64(0x700), i32(1), i32(2), []byte("/a"), i32(0), i32(0))
	if !bytes.Equal(far.out.Bytes(), want) {
		t.Fatalf("setWatches written as %x, want relativeZxid 0x700 (the zxid before the reconnect)", far.out.Bytes())
	}
	far.out.Reset()
	exists := frame(i32(6), i32(3), i32(2), []byte("/a"), []byte{1})
	if _, err := c.Write(exists); err != nil || !bytes.Equal(far.out.Bytes(), exists) {
		t.Fatalf("another request written as %x, %v; want it untouched", far.out.Bytes(), err)
	}

	far = &wire{}
	if _, err := z.Wrap(far).Write(connectRequest(0, 0)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(far.out.Bytes(), connectRequest(0, 0)) || z.Last() != 0 {
		t.Fatalf("a new session wrote %x with record 0x%x; want lastZxidSeen 0 and the record at 0", far.out.Bytes(), z.Last())
	}
}
