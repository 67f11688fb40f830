package kit

import "context"

// A LeaseSource gives the lease a hold is taken for. A recipe asks for it once
// it has checked its own arguments (the name first), so that a request refused
// for them finds no lease and makes none: an implicit lease is made, and the
// session awaited for it, only for a request that can go on. A *Lease is its
// own source; the HTTP side's finds the request's lease= or makes an implicit
// one when asked.
type LeaseSource interface {
	Lease(ctx context.Context) (*Lease, error)
}

// Lease returns l: a lease at hand is its own LeaseSource.
func (l *Lease) Lease(context.Context) (*Lease, error) { return l, nil }
