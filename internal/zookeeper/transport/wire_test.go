package transport

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// connectRequest is a ConnectRequest as ZooKeeper clients write it, with
// trailing bytes after the password (a readOnly byte, or anything).
func connectRequest(version int32, id int64, passwd []byte, trailing ...byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(version))
	b = binary.BigEndian.AppendUint64(b, 0) // lastZxidSeen
	b = binary.BigEndian.AppendUint32(b, 10000)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, uint32(len(passwd)))
	b = append(b, passwd...)
	b = append(b, trailing...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// The rewrite names the session and keeps everything else (the readOnly byte
// of clients that send one included); a request laid out otherwise is refused,
// never sent garbled.
func TestRewriteConnectRequest(t *testing.T) {
	r := &Resumable{ID: 0x1234, Password: []byte("0123456789abcdef")}
	empty := make([]byte, 16)
	for _, trailing := range [][]byte{nil, {1}} {
		got, err := rewriteConnectRequest(connectRequest(0, 0, empty, trailing...), r)
		if want := connectRequest(0, r.ID, r.Password, trailing...); err != nil || !bytes.Equal(got, want) {
			t.Errorf("rewrite with trailing %v = %x, %v; want %x", trailing, got, err, want)
		}
	}
	short := connectRequest(0, 0, empty)
	binary.BigEndian.PutUint32(short, 99)
	for name, b := range map[string][]byte{
		"another protocol version": connectRequest(1, 0, empty),
		"a session already named":  connectRequest(0, 7, empty),
		"two trailing bytes":       connectRequest(0, 0, empty, 1, 2),
		"a length that is off":     short,
		"a fragment":               connectRequest(0, 0, empty)[:20],
	} {
		if got, err := rewriteConnectRequest(b, r); err == nil {
			t.Errorf("%s: rewritten to %x, want refused", name, got)
		}
	}
}

// The answer is read whole, however the reads split it.
func TestParseConnectResponse(t *testing.T) {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint32(b, 0)    // protocolVersion
	b = binary.BigEndian.AppendUint32(b, 4000) // timeOut
	b = binary.BigEndian.AppendUint64(b, 0x42)
	b = binary.BigEndian.AppendUint32(b, 16)
	b = append(b, []byte("0123456789abcdef")...)
	b = append(b, 0) // readOnly
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	for i := range len(b) {
		if _, complete, err := parseConnectResponse(b[:i]); complete || err != nil {
			t.Fatalf("%d of %d bytes: complete %v, %v", i, len(b), complete, err)
		}
	}
	r, complete, err := parseConnectResponse(append(b, 9, 9, 9)) // the next packet's bytes are not its
	if !complete || err != nil || r.ID != 0x42 || r.Timeout != 4*time.Second || string(r.Password) != "0123456789abcdef" {
		t.Fatalf("parse = %+v, %v, %v", r, complete, err)
	}
	if _, _, err := parseConnectResponse(binary.BigEndian.AppendUint32(nil, 1<<20)); err == nil {
		t.Fatal("a 1 MiB answer accepted")
	}
}
