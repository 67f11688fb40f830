package sidecar_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
)

// --suspend-wait defaults to the session timeout, follows it when that is
// set, may be set (0: no wait) from the flag or COORD_SUSPEND_WAIT, and is
// refused negative.
func TestSuspendWaitFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{nil, nil, 10 * time.Second},
		{[]string{"--session-timeout", "4s"}, nil, 4 * time.Second},
		{[]string{"--session-timeout", "4s", "--suspend-wait", "30s"}, nil, 30 * time.Second},
		{[]string{"--suspend-wait", "0s"}, nil, 0},
		{nil, map[string]string{"COORD_SUSPEND_WAIT": "1500ms"}, 1500 * time.Millisecond},
	} {
		m := sidecar.NewMain()
		if err := m.ParseFlags(c.args, func(k string) string { return c.env[k] }); err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		if m.Config.SuspendWait != c.want {
			t.Fatalf("%v %v: --suspend-wait %s, want %s", c.args, c.env, m.Config.SuspendWait, c.want)
		}
	}
	if err := sidecar.NewMain().ParseFlags([]string{"--suspend-wait", "-1s"}, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "suspend-wait") {
		t.Fatalf("a negative --suspend-wait: %v, want refused", err)
	}
}
