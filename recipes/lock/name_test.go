package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// askedSource is a kit.LeaseSource that counts how often it is asked.
type askedSource struct {
	lease *kit.Lease
	asked int
}

func (s *askedSource) Lease(context.Context) (*kit.Lease, error) {
	s.asked++
	return s.lease, nil
}

// The name is checked (here, and nowhere above) before the lease is asked for:
// a request refused for its name finds no lease and makes none; a valid name
// asks for it once.
func TestNameCheckedBeforeTheLease(t *testing.T) {
	_, _, locks, grant := newLockTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := &askedSource{lease: grant()}
	for _, bad := range []string{"..", "_c_x", "a/b", ""} {
		if _, err := locks.Acquire(ctx, src, bad, "o", 0); !errors.Is(err, kit.ErrInvalidName) {
			t.Errorf("acquire %q: %v, want ErrInvalidName", bad, err)
		}
		if err := locks.Release(ctx, src, bad); !errors.Is(err, kit.ErrInvalidName) {
			t.Errorf("release %q: %v, want ErrInvalidName", bad, err)
		}
	}
	if src.asked != 0 {
		t.Fatalf("the lease was asked for %d times for invalid names", src.asked)
	}
	if _, err := locks.Acquire(ctx, src, "ok", "o", 0); err != nil {
		t.Fatal(err)
	}
	if err := locks.Release(ctx, src, "ok"); err != nil {
		t.Fatal(err)
	}
	if src.asked != 2 {
		t.Fatalf("the lease was asked for %d times for an acquire and a release, want 2", src.asked)
	}
}
