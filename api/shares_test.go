package api_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Two tenants together cannot starve a third (issue 40): without caps of its
// own, each token's share of a global cap is the cap divided by the number of
// tokens, so that tokens a and b, taking all they can of the leases, the
// streams and the long-polls, leave token c its share of each. (With half of
// each cap per token, a and b together took everything: c got 0 of 300 leases.)

const (
	tokShareA = "share-a-token-0123456789"
	tokShareB = "share-b-token-0123456789"
	tokShareC = "share-c-token-0123456789"
)

const sharesJSON = `{"tokens":[
 {"name":"a","token":"` + tokShareA + `","allow":["locks/a-*","kv/a-*"]},
 {"name":"b","token":"` + tokShareB + `","allow":["locks/b-*","kv/b-*"]},
 {"name":"c","token":"` + tokShareC + `","allow":["locks/c-*","kv/c-*"]}
]}`

func TestTwoTenantsCannotStarveAThird(t *testing.T) {
	zkc := zktest.Shared(t)
	file := filepath.Join(t.TempDir(), "tokens.json")
	writeTokens(t, file, sharesJSON)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--tokens-file", file,
		"--max-leases", "300", "--max-streams", "6", "--max-waiters", "6")
	a, b, c := car.As(sidecartest.Bearer(tokShareA)...), car.As(sidecartest.Bearer(tokShareB)...), car.As(sidecartest.Bearer(tokShareC)...)

	tenants := []struct {
		name string
		s    *sidecartest.Sidecar
	}{{"a", a}, {"b", b}, {"c", c}}

	// Streams: a and b open what they can of 6: 2 each; c still opens 2.
	for _, tn := range tenants {
		takeStreams(t, tn.s, 3, 2)
	}

	// Long-polls: a and b wait for a lock of their own with what they can of
	// 6 waiters: 2 each; c still waits with 2.
	for _, tn := range tenants {
		lock := "/v1/locks/" + tn.name + "-held"
		tn.s.Must(t, http.StatusCreated, http.MethodPost, lock+"?ttl=60s")
		takeLongPolls(t, tn.s, 3, 2, http.MethodPost, lock+"?wait=60s&ttl=60s", func() int {
			return int(sidecartest.Num(tn.s.Must(t, http.StatusOK, http.MethodGet, lock).Body["waiters"]))
		})
	}

	// Leases: a and b make leases until refused (the holder's and waiters'
	// leases count); each then holds a third of 300, and c still makes its
	// share.
	var last string // the last lease c made
	for _, tn := range tenants {
		for range 301 {
			r := try(t, tn.s, http.MethodPost, "/v1/leases?ttl=60s")
			if r.Status != http.StatusCreated {
				ownCapProblem(t, r, http.StatusTooManyRequests, "too-many-leases", "maxLeases")
				break
			}
			last = sidecartest.Str(r.Body["lease"])
		}
		if n := sidecartest.Num(tn.s.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["leases"]); n != 100 {
			t.Fatalf("%s holds %d leases of --max-leases 300 among 3 tokens, want its share 100", tn.name, n)
		}
	}

	// c's lock cycles go on within its share, under a lease it holds.
	for range 3 {
		c.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/c-cycle?lease="+last)
		c.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/c-cycle?lease="+last)
	}
}
