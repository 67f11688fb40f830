package tokens

import (
	"context"
	"fmt"
	"strings"
)

// Principal is what a request may do.
type Principal struct {
	name     string
	readOnly bool
	all      bool    // allowed every kind and name
	allow    []grant // else these
	hash     [32]byte
	// caps are the token's own caps (Token.MaxLeases, ...): -1 where the
	// tokens file gives none (then the global cap divided by tenants, see
	// Share).
	caps [NumShares]int
	// tenants is the number of tokens that hold a share (those of the tokens
	// file) in the set this principal belongs to.
	tenants int
	// shared is false for the principals no own cap applies to: Anonymous (no
	// tokens configured) and --token's, which the operator holds.
	shared bool
}

// Anonymous is the principal of every request when no token is configured.
var Anonymous = &Principal{all: true}

// Name is the name of the principal's token ("" for Anonymous): the owner of
// the leases it makes.
func (p *Principal) Name() string { return p.name }

// ReadOnly reports whether the principal may only read: GET and event streams.
func (p *Principal) ReadOnly() bool { return p.readOnly }

// All reports whether the principal is allowed every kind and name.
func (p *Principal) All() bool { return p.all }

// Hash is the SHA-256 of the principal's token: what a ticket's MAC covers, so
// that the ticket dies when its token changes.
func (p *Principal) Hash() [32]byte { return p.hash }

// The resources a token holds a share of (Principal.Share).
const (
	Leases = iota
	Streams
	Waiters
	NumShares
)

// ShareFields are the tokens file's fields of the shares.
var ShareFields = [NumShares]string{"maxLeases", "maxStreams", "maxWaiters"}

// Share is the most of a resource res (Leases, Streams, Waiters) whose global
// cap is global that the principal may hold, and whether that is a cap of its
// own (else the global one): its own cap when the tokens file gives one, else
// global divided by the number of the file's tokens, rounded down but at least
// 1 (so that a cap of 1 still lets one through); global for a principal
// without a share, or when its own is not lower. Without own caps the shares
// add up to at most global (when global is at least the number of tokens): no
// token, nor any set of tokens together, can take from another token what its
// share leaves it.
func (p *Principal) Share(res int, global int) (int, bool) {
	own := global
	switch {
	case !p.shared:
	case p.caps[res] >= 0:
		own = p.caps[res]
	default:
		own = DefaultShare(global, p.tenants)
	}
	if own >= global {
		return global, false
	}
	return own, true
}

// DefaultShare is the share of a global cap of a token without a cap of its
// own, among tenants tokens: global/tenants, at least 1.
func DefaultShare(global, tenants int) int {
	return max(1, global/max(1, tenants))
}

// grant is one compiled allow entry.
type grant struct {
	kind   string // "*" or a kind
	name   string // the name, or its prefix when prefix is set
	prefix bool
}

func parseGrant(a string, kinds Kinds) (grant, error) {
	if a == "*" {
		return grant{kind: "*", prefix: true}, nil
	}
	kind, name, ok := strings.Cut(a, "/")
	if !ok {
		return grant{}, fmt.Errorf("allow %q: want <kind>/<name>, <kind>/* or *", a)
	}
	if kind != "*" && !kinds.Has(kind) {
		return grant{}, fmt.Errorf("allow %q: unknown kind %q (one of %s, or *)", a, kind, strings.Join(kinds, ", "))
	}
	if !namePatternRE.MatchString(name) {
		return grant{}, fmt.Errorf("allow %q: the name must be a name, a name ending in *, or *, after names each followed by / for a key's tree (kv/config/*)", a)
	}
	g := grant{kind: kind, name: strings.TrimSuffix(name, "*"), prefix: strings.HasSuffix(name, "*")}
	return g, nil
}

// May reports whether the principal may act on kind/name (write: change it).
func (p *Principal) May(kind, name string, write bool) bool {
	if write && p.readOnly {
		return false
	}
	return p.Reaches(kind, name)
}

// Reaches reports whether kind/name is inside the principal's allow list.
func (p *Principal) Reaches(kind, name string) bool {
	if p.all {
		return true
	}
	for _, g := range p.allow {
		if g.kind != "*" && g.kind != kind {
			continue
		}
		if g.prefix && strings.HasPrefix(name, g.name) || !g.prefix && name == g.name {
			return true
		}
	}
	return false
}

type principalKey struct{}

// NewContext is ctx carrying p as its request's principal.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the principal of the request whose context ctx is: the one
// NewContext put there, else Anonymous.
func FromContext(ctx context.Context) *Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		return p
	}
	return Anonymous
}
