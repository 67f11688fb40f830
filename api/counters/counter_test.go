package counters_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Eight clients, four on each of two sidecars, add 1 fifty times each to one
// counter: it ends at exactly 400, and each sidecar combined concurrent adds
// into fewer compare-and-sets than adds.
func TestCounterAddsThroughTwoSidecars(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}
	ctx := context.Background()
	const clients, adds = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		car := cars[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				r, err := car.Do(ctx, http.MethodPost, "/v1/counters/hits", nil)
				if err != nil || r.Status != 200 {
					errs <- fmt.Errorf("add: %v %+v", err, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, car := range cars {
		if r := car.Must(t, 200, http.MethodGet, "/v1/counters/hits"); sidecartest.Num(r.Body["value"]) != clients*adds {
			t.Fatalf("value %s, want %d", r.Raw, clients*adds)
		}
	}
	combined := false
	for i, car := range cars {
		m := sidecartest.Metrics(t, car, "coord_counter_batch_size_sum", "coord_counter_batch_size_count")
		t.Logf("sidecar %d: %v adds in %v compare-and-sets", i, m[0], m[1])
		if m[0] != clients/2*adds {
			t.Fatalf("sidecar %d counted %v adds, want %d", i, m[0], clients/2*adds)
		}
		combined = combined || m[1] < m[0]
	}
	if !combined {
		t.Fatal("no sidecar combined concurrent adds")
	}
}

// A DistributedAtomicLong placed with go-zookeeper (8 bytes big-endian) reads and
// adds right through the sidecar, which writes the same layout; compare-and-set
// and the int64 range.
func TestCounterDistributedAtomicLong(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{root, root + "/counters"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	start := int64(-5_000_000_000)
	if _, err := conn.Create(root+"/counters/curator", binary.BigEndian.AppendUint64(nil, uint64(start)), 0, acl); err != nil {
		t.Fatal(err)
	}
	if r := car.Must(t, 200, http.MethodGet, "/v1/counters/curator"); sidecartest.Num(r.Body["value"]) != start {
		t.Fatalf("read: %s", r.Raw)
	}
	if r := car.Must(t, 200, http.MethodPost, "/v1/counters/curator?add=7"); sidecartest.Num(r.Body["value"]) != start+7 {
		t.Fatalf("add: %s", r.Raw)
	}
	data, _, err := conn.Get(root + "/counters/curator")
	if err != nil || len(data) != 8 || int64(binary.BigEndian.Uint64(data)) != start+7 {
		t.Fatalf("layout after the add: %x %v", data, err)
	}
}

// Compare-and-set, a never-set counter, the int64 range, the list.
func TestCounterCompareAndSet(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	ctx := context.Background()
	start := int64(-5_000_000_000)
	car.Must(t, 200, http.MethodPost, fmt.Sprintf("/v1/counters/curator?add=%d", start+7))
	if r := car.Must(t, 200, http.MethodGet, "/v1/counters/never"); sidecartest.Num(r.Body["value"]) != 0 {
		t.Fatalf("never set: %s", r.Raw)
	}
	set := func(path, body string) *sidecartest.Response {
		t.Helper()
		r, err := car.Do(ctx, http.MethodPut, path, strings.NewReader(body), "Content-Type", "application/json")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := set("/v1/counters/curator?expect=1", `{"value":0}`); r.Status != 409 || sidecartest.Num(r.Body["value"]) != start+7 ||
		!strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/value-mismatch") {
		t.Fatalf("stale expect: %+v", r)
	}
	if r := set(fmt.Sprintf("/v1/counters/curator?expect=%d", start+7), `{"value":42}`); r.Status != 200 || sidecartest.Num(r.Body["value"]) != 42 {
		t.Fatalf("compare-and-set: %+v", r)
	}
	if r := set("/v1/counters/max?expect=0", fmt.Sprintf(`{"value":%d}`, int64(math.MaxInt64))); r.Status != 200 {
		t.Fatalf("set to the max: %+v", r)
	}
	if r, _ := car.Do(ctx, http.MethodPost, "/v1/counters/max", nil); r.Status != 409 || !strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/counter-overflow") {
		t.Fatalf("overflow: %+v", r)
	}
	l := car.Must(t, 200, http.MethodGet, "/v1/counters")
	if !strings.Contains(string(l.Raw), `{"name":"curator","value":42}`) || !strings.Contains(string(l.Raw), `"name":"max"`) {
		t.Fatalf("list: %s", l.Raw)
	}
}

// DELETE removes the counter's node and nothing else: a read after it is 0, an
// add starts again from 0 (even on the sidecar that knew the old value and
// version, known.go), the list no longer has it, and a second delete is 404
// counter-not-found.
func TestCounterDelete(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	big := int64(math.MaxInt64 - 3)
	car.Must(t, 200, http.MethodPost, fmt.Sprintf("/v1/counters/signups?add=%d", big-2))
	car.Must(t, 200, http.MethodPost, "/v1/counters/signups?add=2") // now the sidecar knows its value and version
	car.Must(t, 200, http.MethodPost, "/v1/counters/kept?add=5")

	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/counters/signups")
	if ok, _, err := conn.Exists(root + "/counters/signups"); err != nil || ok {
		t.Fatalf("the node after the delete: exists %v, %v", ok, err)
	}
	if r := car.Must(t, 200, http.MethodGet, "/v1/counters/signups"); string(r.Raw) != `{"name":"signups","value":0}`+"\n" {
		t.Fatalf("read after the delete: %s", r.Raw)
	}
	if r := car.Must(t, 200, http.MethodGet, "/v1/counters"); strings.Contains(string(r.Raw), "signups") || !strings.Contains(string(r.Raw), `{"name":"kept","value":5}`) {
		t.Fatalf("list after the delete: %s", r.Raw)
	}
	r := car.Must(t, http.StatusNotFound, http.MethodDelete, "/v1/counters/signups")
	if !strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/problems/counter-not-found") {
		t.Fatalf("second delete: %s", r.Raw)
	}
	if r := car.Must(t, 200, http.MethodPost, "/v1/counters/signups?add=1"); sidecartest.Num(r.Body["value"]) != 1 {
		t.Fatalf("add after the delete: %s, want 1", r.Raw)
	}
	if r := car.Must(t, 200, http.MethodGet, "/v1/counters/kept"); sidecartest.Num(r.Body["value"]) != 5 {
		t.Fatalf("another counter after the delete: %s", r.Raw)
	}
}
