package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// The layout of ZooKeeper's ConnectRequest as go-zookeeper v1.0.4 writes it,
// in one write: int32 length of the rest, int32 protocolVersion, int64
// lastZxidSeen, int32 timeOut, int64 sessionId, int32 password length, the
// password, and (in clients that send it) one readOnly byte.
const (
	reqSessionAt = 4 + 4 + 8 + 4
	reqPasswdAt  = reqSessionAt + 8
)

// The layout of the ConnectResponse: int32 length of the rest (the body), then
// in the body int32 protocolVersion, int32 timeOut (ms), int64 sessionId, int32
// password length, the password, one readOnly byte (servers since 3.4).
// Offsets are in the body.
const (
	respTimeoutAt = 4
	respSessionAt = respTimeoutAt + 4
	respPasswdAt  = respSessionAt + 8
	// maxConnectResponse bounds what is buffered while looking for the answer.
	maxConnectResponse = 1024
)

// rewriteConnectRequest returns the ConnectRequest b naming r's session and
// password instead of none. It refuses a b not laid out as go-zookeeper v1.0.4
// writes it (another protocol version, a session already named, a length that
// does not add up), so that a go-zookeeper that changes its handshake is
// noticed, never sent garbled. lastZxidSeen stays go-zookeeper's (0 on a new
// connection: the server accepts it; one above the server's it refuses).
func rewriteConnectRequest(b []byte, r *Resumable) ([]byte, error) {
	if len(b) < reqPasswdAt+4 {
		return nil, fmt.Errorf("a first write of %d bytes", len(b))
	}
	if n := int(binary.BigEndian.Uint32(b)); n != len(b)-4 {
		return nil, fmt.Errorf("length %d in a first write of %d bytes", n, len(b))
	}
	if v := int32(binary.BigEndian.Uint32(b[4:])); v != 0 {
		return nil, fmt.Errorf("protocol version %d", v)
	}
	if id := int64(binary.BigEndian.Uint64(b[reqSessionAt:])); id != 0 {
		return nil, fmt.Errorf("session 0x%x already named", id)
	}
	pwLen := int(int32(binary.BigEndian.Uint32(b[reqPasswdAt:])))
	rest := reqPasswdAt + 4 + pwLen
	if pwLen < 0 || rest > len(b) || len(b)-rest > 1 { // at most the readOnly byte follows
		return nil, fmt.Errorf("password length %d in a first write of %d bytes", pwLen, len(b))
	}
	out := make([]byte, 0, len(b)-pwLen+len(r.Password))
	out = append(out, b[:reqSessionAt]...)
	out = binary.BigEndian.AppendUint64(out, uint64(r.ID))
	out = binary.BigEndian.AppendUint32(out, uint32(len(r.Password)))
	out = append(out, r.Password...)
	out = append(out, b[rest:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// parseConnectResponse reads the ConnectResponse at the start of b: complete
// once b holds all of it, an error if it cannot be one.
func parseConnectResponse(b []byte) (r Resumable, complete bool, err error) {
	if len(b) < 4 {
		return r, false, nil
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < respPasswdAt+4 || n > maxConnectResponse {
		return r, false, fmt.Errorf("a connect answer of %d bytes", n)
	}
	if len(b) < 4+n {
		return r, false, nil
	}
	body := b[4 : 4+n]
	pwLen := int(int32(binary.BigEndian.Uint32(body[respPasswdAt:])))
	if pwLen < 0 || respPasswdAt+4+pwLen > n {
		return r, false, fmt.Errorf("password length %d in a connect answer of %d bytes", pwLen, n)
	}
	r.ID = int64(binary.BigEndian.Uint64(body[respSessionAt:]))
	r.Timeout = time.Duration(int32(binary.BigEndian.Uint32(body[respTimeoutAt:]))) * time.Millisecond
	r.Password = bytes.Clone(body[respPasswdAt+4 : respPasswdAt+4+pwLen])
	return r, true, nil
}
