package statedir

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkJournalLockCycle is what a lock cycle with an implicit lease costs
// the journal, on the request's goroutines: the six changes the kit records
// (the lease, its pin, the hold; the unpin, the hold let go, the lease's end)
// and the two commits its two answers wait for, on parallel goroutines each
// cycling a lease of its own, as the bench's c16 and c64 rows do. A state
// directory's cost to a sidecar is this, against the sidecar's own CPU per
// cycle (docs/BENCHMARKS.md).
func BenchmarkJournalLockCycle(b *testing.B) {
	d := openTemp(b)
	src := newLeaseSource()
	j := startJournal(b, d, src)
	ctx := context.Background()
	var next int64
	var idMu = make(chan struct{}, 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		idMu <- struct{}{}
		next++
		id := fmt.Sprintf("lease%06d", next)
		<-idMu
		hold := Hold{Kind: "lock", Name: "bench-" + id, Nodes: []string{"/coord/locks/bench-" + id + "/_c_0b8f0c5e-1d6e-4f4f-9d59-3a0d4bb1f0a1-lock-0000000001"}}
		for pb.Next() {
			src.put(Lease{ID: id, TTL: time.Minute, ExpiresAt: time.Now().Add(time.Minute), Implicit: true, Holds: []Hold{hold}})
			j.Changed(id)
			j.Changed(id)
			j.HoldChanged(id, hold.Kind, hold.Name)
			if err := j.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			src.end(id)
			j.Changed(id)
			j.HoldChanged(id, hold.Kind, hold.Name)
			j.Changed(id)
			if err := j.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
