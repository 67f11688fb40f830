package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The status page shows signed 64-bit values exactly, in a real headless
// Chromium: a counter near the top of the range, one near the bottom, a
// small one, and a throughput group whose limit and share are past 2^53
// (JSON.parse alone would show 9223372036854775804 as 9223372036854776000).
func TestStatusPageShowsInt64Exactly(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	page := browsertest.Start(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	counters := map[string]string{"signups": "9223372036854775804", "floor": "-9223372036854775807", "small": "42", "edge": "9007199254740993"}
	for name, v := range counters {
		car.Send(t, http.StatusOK, http.MethodPut, "/v1/counters/"+name, `{"value":`+v+`}`)
	}
	const limit = "9007199254740993" // 2^53 + 1
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/huge", `{"limit":`+limit+`}`)
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/huge/members?id=only&ttl=60s")

	page.Call(t, "Page.navigate", map[string]any{"url": car.Base + "/ui/"})
	var want []string
	for name, v := range counters {
		want = append(want, uiField("counter", name, "value")+` === "`+v+`"`)
	}
	want = append(want,
		`document.querySelector('[data-group="huge"] [data-field="limit"]')?.textContent === "`+limit+`"`,
		`document.querySelector('[data-group="huge"] tr[data-member="only"] [data-field="share"]')?.textContent === "`+limit+`"`)
	page.Await(t, 10*time.Second, "every value exact", strings.Join(want, " && "))

	// A change past 2^53 shows exactly too (the stream's next event, not the first state).
	car.Must(t, http.StatusOK, http.MethodPost, "/v1/counters/signups?add=-1")
	page.Await(t, 5*time.Second, "signups one lower", uiField("counter", "signups", "value")+` === "9223372036854775803"`)
	if p := page.Problems(false); len(p) > 0 {
		t.Errorf("console errors: %v", p)
	}
	if r, err := car.Do(context.Background(), http.MethodGet, "/v1/counters/signups", nil); err != nil || !strings.Contains(string(r.Raw), "9223372036854775803") {
		t.Fatalf("the sidecar's own answer: %v %+v", err, r)
	}
}
