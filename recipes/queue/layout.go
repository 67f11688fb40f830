package queue

import (
	"cmp"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Queue node names, item ids and the item data format. See the package
// documentation for the layout.

const (
	// bucketSize is the sequence number from which a bucket is closed: a bucket
	// holds about this many items (fewer when takers delete from it while it is
	// the tail, since deletes advance the sequence too), so listing one costs a few
	// tens of KB whatever the depth of the queue.
	bucketSize = 1000
	// MaxPriority is the largest priority; 0 is taken first.
	MaxPriority = 99
	// maxContentType bounds the stored content type.
	maxContentType = 255
	// DefaultContentType is stored for an item enqueued without a content type.
	DefaultContentType = "application/octet-stream"
	itemFormat         = 1
	claimNode          = "claim"
	claimsDir          = "claims"
	receiptsDir        = "receipts"
)

func prioName(p int) string                { return fmt.Sprintf("p%02d", p) }
func bucketName(b int64) string            { return fmt.Sprintf("b%010d", b) }
func (q *Queues) qpath(name string) string { return q.dir + "/" + name }
func (q *Queues) ppath(name string, p int) string {
	return q.qpath(name) + "/" + prioName(p)
}
func (q *Queues) bpath(name string, p int, b int64) string {
	return q.ppath(name, p) + "/" + bucketName(b)
}
func (q *Queues) ipath(name string, r itemRef) string {
	return q.bpath(name, r.prio, r.bucket) + "/" + r.name
}
func (q *Queues) cpath(name string) string { return q.qpath(name) + "/" + claimsDir }

// rpath is the container of take receipts (see takeOne).
func (q *Queues) rpath(name string) string { return q.qpath(name) + "/" + receiptsDir }

// parsePrio parses "pNN"; ok is false for anything else (e.g. "claims").
func parsePrio(s string) (int, bool) {
	if len(s) != 3 || s[0] != 'p' {
		return 0, false
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil || n < 0 || n > MaxPriority {
		return 0, false
	}
	return n, true
}

// parseBucket parses "b<10 digits>".
func parseBucket(s string) (int64, bool) {
	if len(s) != 11 || s[0] != 'b' {
		return 0, false
	}
	n, err := strconv.ParseInt(s[1:], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// itemRef locates one item: its priority, bucket and node name
// "i<header length>-<token>-<sequence>".
type itemRef struct {
	prio   int
	bucket int64
	seq    int64
	name   string
	key    string // id(), computed once
}

// id is the item's id as clients see it: "p05.b0000000003.i27-<token>-0000000042",
// the node's path below the queue with dots for slashes. It is a valid name
// (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$, at most 46 characters).
func (r itemRef) id() string {
	return prioName(r.prio) + "." + bucketName(r.bucket) + "." + r.name
}

// before orders items of one priority: bucket, then sequence.
func (r itemRef) before(o itemRef) bool {
	if r.bucket != o.bucket {
		return r.bucket < o.bucket
	}
	return r.seq < o.seq
}

// itemPrefix is the name given to a sequential create: the header length lets a
// listing report an item's size from its Stat alone; the token finds the item
// again when the answer to its create was lost.
func itemPrefix(headerLen int, token string) string {
	return "i" + strconv.Itoa(headerLen) + "-" + token + "-"
}

// parseItemName returns the sequence, header length and token of an item name.
func parseItemName(name string) (seq int64, header int, token string, ok bool) {
	if !strings.HasPrefix(name, "i") {
		return 0, 0, "", false
	}
	seq, ok = zookeeper.SeqOf(name)
	if !ok {
		return 0, 0, "", false
	}
	rest := name[1 : len(name)-10]
	h, tok, found := strings.Cut(rest, "-")
	if !found || !strings.HasSuffix(tok, "-") {
		return 0, 0, "", false
	}
	header, err := strconv.Atoi(h)
	if err != nil || header < 2 {
		return 0, 0, "", false
	}
	return seq, header, strings.TrimSuffix(tok, "-"), true
}

// parseItemID parses an id made by itemRef.id.
func parseItemID(id string) (itemRef, bool) {
	ps, rest, ok := strings.Cut(id, ".")
	if !ok {
		return itemRef{}, false
	}
	bs, name, ok := strings.Cut(rest, ".")
	if !ok {
		return itemRef{}, false
	}
	p, ok1 := parsePrio(ps)
	b, ok2 := parseBucket(bs)
	seq, _, _, ok3 := parseItemName(name)
	if !ok1 || !ok2 || !ok3 {
		return itemRef{}, false
	}
	return itemRef{prio: p, bucket: b, seq: seq, name: name, key: id}, true
}

// bucketRefs turns a bucket listing into sorted item refs.
func bucketRefs(p int, b int64, names []string) []itemRef {
	refs := make([]itemRef, 0, len(names))
	for _, n := range names {
		seq, _, _, ok := parseItemName(n)
		if !ok {
			continue
		}
		r := itemRef{prio: p, bucket: b, seq: seq, name: n}
		r.key = r.id()
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b itemRef) int { return cmp.Compare(a.seq, b.seq) })
	return refs
}

// encodeItem is the node data: format byte, content-type length, content type,
// payload. It returns the data and the header length.
func encodeItem(contentType string, payload []byte) ([]byte, int) {
	h := 2 + len(contentType)
	data := make([]byte, 0, h+len(payload))
	data = append(data, itemFormat, byte(len(contentType)))
	data = append(data, contentType...)
	return append(data, payload...), h
}

// decodeItem splits node data into content type and payload.
func decodeItem(data []byte) (string, []byte, error) {
	if len(data) < 2 || data[0] != itemFormat || len(data) < 2+int(data[1]) {
		return "", nil, fmt.Errorf("queue item: unknown data format")
	}
	n := int(data[1])
	return string(data[2 : 2+n]), data[2+n:], nil
}

// decodeOrWhole is decodeItem for handing an item over: data written by someone
// else (not in the item format) is handed over whole, as DefaultContentType.
func decodeOrWhole(data []byte) (string, []byte) {
	ct, payload, err := decodeItem(data)
	if err != nil {
		return DefaultContentType, data
	}
	return ct, payload
}

var tokenEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newToken returns 13 random lower-case base32 characters.
func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(tokenEncoding.EncodeToString(b[:]))
}

// Delayed items (see the package documentation): kept apart under delayed/
// until they are due, named d<due unix ms, 13 digits>-p<NN>-<H>-<token>-<seq>.

const (
	delayedDir = "delayed"
	// delayedIDPrefix starts the id of an item that waits under delayed/.
	delayedIDPrefix = delayedDir + "."
	// MaxDelay bounds how far ahead an item may be due.
	MaxDelay = 30 * 24 * time.Hour
)

// dpath is the parent of the queue's delayed items.
func (q *Queues) dpath(name string) string { return q.qpath(name) + "/" + delayedDir }

// delayedRef is one delayed item, parsed from its node name.
type delayedRef struct {
	due    int64 // unix ms
	prio   int
	header int
	token  string
	seq    int64
	name   string
}

// delayedPrefix is the name given to a delayed item's sequential create.
func delayedPrefix(due time.Time, prio, headerLen int, token string) string {
	return fmt.Sprintf("d%013d-%s-%d-%s-", due.UnixMilli(), prioName(prio), headerLen, token)
}

// parseDelayedName parses "d<13 digits>-p<NN>-<H>-<token>-<seq>".
func parseDelayedName(name string) (delayedRef, bool) {
	seq, ok := zookeeper.SeqOf(name)
	if !ok || len(name) < 1+13+1+3+1+10 || name[0] != 'd' {
		return delayedRef{}, false
	}
	parts := strings.Split(name[1:len(name)-10], "-")
	if len(parts) != 5 || parts[4] != "" || len(parts[0]) != 13 {
		return delayedRef{}, false
	}
	due, err1 := strconv.ParseInt(parts[0], 10, 64)
	p, ok1 := parsePrio(parts[1])
	h, err2 := strconv.Atoi(parts[2])
	if err1 != nil || !ok1 || err2 != nil || h < 2 || parts[3] == "" {
		return delayedRef{}, false
	}
	return delayedRef{due: due, prio: p, header: h, token: parts[3], seq: seq, name: name}, true
}

// id is the delayed item's id as clients see it,
// "delayed.p<NN>.i<H>-<token>-<seq>" (seq: its node's under delayed/), shaped as
// an item id is so that the token reads the same in both.
func (d delayedRef) id() string {
	return fmt.Sprintf("%s%s.i%d-%s-%010d", delayedIDPrefix, prioName(d.prio), d.header, d.token, d.seq)
}

// before orders delayed items: due time, then sequence.
func (d delayedRef) before(o delayedRef) bool {
	if d.due != o.due {
		return d.due < o.due
	}
	return d.seq < o.seq
}
