package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Stored bytes are never a page (issue 24): a key's value and a queue item come
// back with the Content-Type they were stored with, and with nosniff and a
// sandboxing Content-Security-Policy, so that a browser that opens them neither
// runs their scripts nor lets them act as the sidecar's origin.

// storedHTML is a value whose script, if it ran, would take the lock
// "pwned" as the sidecar's own origin. The request is synchronous, so a
// script that runs has taken the lock before the parser goes past it; the
// <title> after it says that the parser did.
const storedHTML = `<!doctype html><html><body><p>stored value</p>
<script>
var x = new XMLHttpRequest();
x.open("POST", "/v1/locks/pwned?owner=stored-script&ttl=1h", false);
x.Send();
</script><title>after-script</title></body></html>`

// checkNotAPage fails t unless r carries stored bytes as stored (body and
// Content-Type) and the headers that keep a browser from treating them as a
// page of the sidecar's origin.
func checkNotAPage(t *testing.T, what string, r *sidecartest.Response, body []byte, contentType string) {
	t.Helper()
	if r.Status != http.StatusOK || !bytes.Equal(r.Raw, body) || r.Header.Get("Content-Type") != contentType {
		t.Fatalf("%s: %d %q (%s), want 200 %q (%s)", what, r.Status, r.Raw, r.Header.Get("Content-Type"), body, contentType)
	}
	if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Fatalf("%s: X-Content-Type-Options %q, want nosniff (headers %v)", what, got, r.Header)
	}
	csp := r.Header.Get("Content-Security-Policy")
	directives := map[string]bool{}
	for _, d := range strings.Split(csp, ";") {
		directives[strings.Join(strings.Fields(d), " ")] = true
	}
	if !directives["sandbox"] || !directives["default-src 'none'"] {
		t.Fatalf("%s: Content-Security-Policy %q, want sandbox and default-src 'none'", what, csp)
	}
}

// Every answer that carries stored bytes (a key's GET, its long-poll, a queue
// take and a claim) sends nosniff and the sandbox policy, and still the
// bytes and the Content-Type as stored.
func TestStoredBytesAnswersAreNotPages(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))

	html := []byte(storedHTML)
	car.MustPut(t, "/v1/kv/page", html, "text/html")
	checkNotAPage(t, "GET /v1/kv/page", car.DoReq(t, http.MethodGet, "/v1/kv/page", nil), html, "text/html")
	checkNotAPage(t, "GET /v1/kv/page long-poll", car.DoReq(t, http.MethodGet, "/v1/kv/page?version=7&wait=10s", nil), html, "text/html")

	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>fetch("/v1/locks/pwned",{method:"POST"})</script></svg>`)
	for range 2 {
		if r := car.DoReq(t, http.MethodPost, "/v1/queues/pages/items", bytes.NewReader(svg), "Content-Type", "image/svg+xml"); r.Status != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", r.Status, r.Raw)
		}
	}
	take := car.DoReq(t, http.MethodPost, "/v1/queues/pages/take", nil)
	checkNotAPage(t, "take", take, svg, "image/svg+xml")
	claim := car.DoReq(t, http.MethodPost, "/v1/queues/pages/claims?ttl=30s", nil)
	checkNotAPage(t, "claim", claim, svg, "image/svg+xml")
	if claim.Header.Get("Claim-Id") == "" || take.Header.Get("Item-Id") == "" {
		t.Fatalf("take %v, claim %v: the item's headers are gone", take.Header, claim.Header)
	}
	if h := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/pwned").Body["holder"]; h != nil {
		t.Fatalf("lock pwned held by %v", h)
	}
}

// The attack of the issue in a real headless Chromium: an HTML value whose
// script takes a lock over the API, opened at GET /v1/kv/{key}, is parsed
// (its title, after the script, shows) but its script does not run: the lock
// is never taken.
func TestStoredHTMLDoesNotRunInABrowser(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	page := browsertest.Start(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	car.MustPut(t, "/v1/kv/page", []byte(storedHTML), "text/html")

	// The sidecar's own origin is allowed: a script that ran would pass.
	own := car.DoReq(t, http.MethodPost, "/v1/locks/control?owner=x", nil, "Origin", car.Base)
	if own.Status != http.StatusCreated {
		t.Fatalf("a same-origin lock: %d %s", own.Status, own.Raw)
	}

	page.Call(t, "Page.navigate", map[string]any{"url": car.Base + "/v1/kv/page"})
	title := pageTitle(t, page, car.Base+"/v1/kv/page", "after-script")
	if h := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/pwned").Body["holder"]; h != nil {
		t.Fatalf("the stored page's script ran in the browser (title %q): lock pwned held by %v", title, h)
	}
}

// pageTitle waits until the page's current entry is url with the title want
// (read from the browser's navigation history, which needs no script in the
// page) and answers it; a title that differs past the wait fails t.
func pageTitle(t *testing.T, page *browsertest.Page, url, want string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for {
		// Errors (the page swapped while it navigates) are retried.
		raw, err := page.Send("Page.getNavigationHistory", nil)
		var h struct {
			CurrentIndex int `json:"currentIndex"`
			Entries      []struct {
				URL   string `json:"url"`
				Title string `json:"title"`
			} `json:"entries"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &h)
		}
		if err != nil {
			last = err.Error()
		} else if h.CurrentIndex >= 0 && h.CurrentIndex < len(h.Entries) {
			e := h.Entries[h.CurrentIndex]
			last = e.URL + " " + e.Title
			if e.URL == url && e.Title == want {
				return e.Title
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser did not show %s with title %q within 15s (last: %s; console: %v)", url, want, last, page.Problems(false))
		}
		time.Sleep(50 * time.Millisecond) // the polling interval
	}
}
