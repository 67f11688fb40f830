// Package guid makes the random UUIDs (version 4) of protected creates, the
// "_c_<guid>-" prefix by which a create whose answer was lost finds its node
// again. It is pure (crypto/rand and hex, nothing of ZooKeeper), so that the
// sidecar's ZooKeeper layer and coord-bench's floor, which must not share the
// sidecar's request path, name their nodes with the same code (the sidecar
// Encodes it straight into the node's path, one string made where New and a
// concatenation make two).
package guid

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns a random UUID, version 4, in its 36-character form.
func New() string {
	var out [36]byte
	Encode(&out)
	return string(out[:])
}

// Encode writes a random UUID, version 4, in its 36-character form to out: for
// a caller that puts it in a string of its own (a node's path) without making
// one for it alone.
func Encode(out *[36]byte) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's documented guarantee since Go 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	hex.Encode(out[0:8], b[0:4])
	hex.Encode(out[9:13], b[4:6])
	hex.Encode(out[14:18], b[6:8])
	hex.Encode(out[19:23], b[8:10])
	hex.Encode(out[24:36], b[10:16])
	out[8], out[13], out[18], out[23] = '-', '-', '-', '-'
}
