// Package zkwire keeps a ZooKeeper client connection's last-seen zxid on the
// wire, out of go-zookeeper's reach.
//
// Why: go-zookeeper v1.0.4 (the newest release) keeps the last zxid it has seen
// in one unguarded field. Its receiving goroutine writes it for every reply,
// and on a reconnect the connecting goroutine reads it to re-set the
// connection's watches while the receiving goroutine already runs: a data race
// (upstream go-zookeeper/zk#35) that `go test -race` reports whenever replies
// arrive while a reconnected client with watches re-sets them, and that can
// re-set the watches relative to a zxid seen on the new connection, missing
// changes made while the client was away.
//
// A Conn wraps each connection go-zookeeper dials (zk.WithDialer) and follows
// ZooKeeper's framing in both directions:
//
//   - Replies: the zxid of every reply to a request is recorded in the Zxids
//     shared by the client's connections, then zeroed before go-zookeeper
//     reads it, so go-zookeeper never writes its field (it only ever sees 0)
//     and has no race to lose.
//   - The ConnectRequest (the connection's first write) carries the recorded
//     zxid as lastZxidSeen when it names an existing session, so a server
//     that is behind what the client has seen refuses it, as ZooKeeper's own
//     clients are; a request for a new session (id 0) starts the record over
//     at 0.
//   - A SetWatches request (opcode 101) carries, as its relativeZxid, the
//     zxid recorded when this connection's ConnectRequest was written: the
//     last one seen before the reconnect, as ZooKeeper's Java client sends it.
//     The server fires every watch whose node changed after it, so nothing
//     that changed while the client was away is missed, and nothing else fires.
//
// The wrapper relies on go-zookeeper writing each request in one Write (it
// does: its send loop encodes a whole packet, then writes it) and reading the
// ConnectResponse before anything else. A request it does not recognise is
// passed through unchanged; a relativeZxid left at go-zookeeper's 0 would only
// make every re-set watch fire once, which every follower tolerates.
package zkwire

import (
	"encoding/binary"
	"net"
	"sync/atomic"
)

// Zxids is the zxid record of one client (one zk.Conn and every connection it
// dials in turn). The zero value is ready.
type Zxids struct {
	last atomic.Int64
}

// Last is the newest zxid a reply has carried since the client's session began.
func (z *Zxids) Last() int64 { return z.last.Load() }

// Wrap returns c, wrapped to keep z's record (see the package comment).
func (z *Zxids) Wrap(c net.Conn) net.Conn { return &Conn{Conn: c, z: z} }

// The offsets in ZooKeeper's packets this package reads or writes.
const (
	// ConnectRequest: int32 length, int32 protocolVersion, int64 lastZxidSeen,
	// int32 timeOut, int64 sessionId, ...
	connectZxidAt    = 4 + 4
	connectSessionAt = connectZxidAt + 8 + 4
	// A request: int32 length, int32 xid, int32 opcode, then its body;
	// SetWatches' body starts with int64 relativeZxid.
	opcodeAt       = 4 + 4
	relativeZxidAt = opcodeAt + 4
	opSetWatches   = 101
	// A reply: int32 length, then int32 xid, int64 zxid, int32 err.
	replyXidAt  = 4
	replyZxidAt = replyXidAt + 4
	replyHeader = replyZxidAt + 8
)

// Conn is one connection of a client. go-zookeeper writes on one goroutine at
// a time (its connecting goroutine, then its send loop started after) and reads
// on one at a time (the same connecting goroutine, then its receive loop), so
// the fields of each side need no lock.
type Conn struct {
	net.Conn
	z *Zxids

	// Writes.
	wrote bool  // the ConnectRequest has gone out
	since int64 // the record when it did: this connection's relativeZxid

	// Reads: where the next byte falls in the server's stream.
	answered bool // the ConnectResponse has been passed through
	pos      int  // bytes of the current packet read, its length prefix included
	size     int  // the current packet's length (once pos >= 4)
	head     [replyHeader]byte
}

// Write rewrites the ConnectRequest's lastZxidSeen and a SetWatches request's
// relativeZxid; everything else passes as it is.
func (c *Conn) Write(b []byte) (int, error) {
	if !c.wrote {
		c.wrote = true
		return c.writeConnect(b)
	}
	if len(b) >= relativeZxidAt+8 && binary.BigEndian.Uint32(b[opcodeAt:]) == opSetWatches &&
		int(binary.BigEndian.Uint32(b)) == len(b)-4 {
		out := append([]byte(nil), b...)
		binary.BigEndian.PutUint64(out[relativeZxidAt:], uint64(c.since))
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *Conn) writeConnect(b []byte) (int, error) {
	if len(b) < connectSessionAt+8 || int(binary.BigEndian.Uint32(b)) != len(b)-4 {
		return c.Conn.Write(b) // not a ConnectRequest this package knows
	}
	if binary.BigEndian.Uint64(b[connectSessionAt:]) == 0 {
		c.z.last.Store(0) // a new session: nothing of it seen yet
	}
	c.since = c.z.last.Load()
	out := append([]byte(nil), b...)
	binary.BigEndian.PutUint64(out[connectZxidAt:], uint64(c.since))
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Read passes the server's bytes through, recording and zeroing each reply's
// zxid on the way (the ConnectResponse, which has no reply header, aside).
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.follow(b[:n])
	return n, err
}

// follow moves through b, the next bytes of the server's stream.
func (c *Conn) follow(b []byte) {
	for i := 0; i < len(b); {
		if c.pos < 4 {
			c.head[c.pos] = b[i]
			c.pos++
			i++
			if c.pos == 4 {
				c.size = int(binary.BigEndian.Uint32(c.head[:]))
				c.endIfComplete()
			}
			continue
		}
		if c.answered && c.pos < replyHeader {
			c.head[c.pos] = b[i]
			if c.pos >= replyZxidAt && int32(binary.BigEndian.Uint32(c.head[replyXidAt:])) >= 0 {
				b[i] = 0 // go-zookeeper records the zxid of a reply to a request (xid >= 0)
			}
			c.pos++
			i++
			if c.pos == replyHeader {
				c.record()
			}
			c.endIfComplete()
			continue
		}
		step := min(len(b)-i, 4+c.size-c.pos)
		c.pos += step
		i += step
		c.endIfComplete()
	}
}

// record keeps the zxid of the reply header just read, as go-zookeeper would:
// a reply to a request (xid >= 0) with a zxid above 0.
func (c *Conn) record() {
	xid := int32(binary.BigEndian.Uint32(c.head[replyXidAt:]))
	zxid := int64(binary.BigEndian.Uint64(c.head[replyZxidAt:]))
	if xid >= 0 && zxid > c.z.last.Load() {
		c.z.last.Store(zxid)
	}
}

// endIfComplete starts the next packet once the current one is read whole.
func (c *Conn) endIfComplete() {
	if c.pos >= 4 && c.pos >= 4+c.size {
		c.pos, c.size, c.answered = 0, 0, true
	}
}
