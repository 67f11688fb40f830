package sidecar_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Explicit per-token caps that add up to more than a global cap are warned
// about at start (issue 40): a token within its share could find the cap used
// up by the others. Caps that fit are not.
func TestOversubscribedCapsWarned(t *testing.T) {
	zkc := zktest.Shared(t)
	dir := t.TempDir()
	over := sidecartest.WriteFile(t, dir, "over.json", []byte(`{"tokens":[
 {"name":"a","token":"over-a-token-0123456789","allow":["*"],"maxLeases":250},
 {"name":"b","token":"over-b-token-0123456789","allow":["*"]},
 {"name":"c","token":"over-c-token-0123456789","allow":["*"]}]}`))
	_, logs := startLoggedSidecar(t, zkc.Servers(), zktest.Root(t), "--tokens-file", over, "--max-leases", "300")
	testutil.Eventually(t, 10*time.Second, "the oversubscription warned", func() bool {
		return strings.Contains(logs.String(), "maxLeases add up to 450, more than the global cap 300")
	})

	fits := sidecartest.WriteFile(t, dir, "fits.json", []byte(`{"tokens":[
 {"name":"a","token":"fits-a-token-0123456789","allow":["*"],"maxLeases":100},
 {"name":"b","token":"fits-b-token-0123456789","allow":["*"]},
 {"name":"c","token":"fits-c-token-0123456789","allow":["*"]}]}`))
	car, logs := startLoggedSidecar(t, zkc.Servers(), zktest.Root(t), "--tokens-file", fits, "--max-leases", "300")
	car.WaitReady(t)
	if strings.Contains(logs.String(), "add up to") {
		t.Fatalf("caps that fit were warned about: %s", logs.String())
	}
}
