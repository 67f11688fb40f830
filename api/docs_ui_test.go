package api_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	coordsidecar "github.com/coord-sidecar/coord-sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The HTTP reference at /docs/ in a real headless Chromium: /docs sidecartest.Leads there,
// the page shows every operation of openapi.yaml (its menu entry names the
// operation's summary and method, its section the summary and the path), it
// logs no error, and no request of the page's leaves the sidecar's origin (the
// page works offline: Redoc's script is in it). Like the status page it needs no
// token, though the sidecar has one.
func TestDocsPage(t *testing.T) {
	t.Parallel() // mostly waiting on Chromium: see TestMain
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	page := browsertest.Start(t)
	page.Call(t, "Network.enable", nil)
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), "--token", "docs-page-test-token-0123456789")

	page.Call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false})
	page.Call(t, "Page.navigate", map[string]any{"url": car.Base + "/docs"})
	shown := page.Await(t, time.Minute, "the reference is shown at /docs/", `location.pathname === "/docs/" && document.readyState === "complete" &&
		document.querySelector('#api-content [data-section-id="/"] h1')?.textContent.startsWith("coord-sidecar")`)
	// The browser asked for it compressed and got it so: under 1 MB on the
	// wire (the page itself is 2.7 MB). The time is only logged: speed is a
	// benchmark's matter, not a test's.
	sizes, _ := page.Eval(t, `(() => { const n = performance.getEntriesByType("navigation")[0];
		return [n.encodedBodySize, n.decodedBodySize, n.name]; })()`).([]any)
	if len(sizes) != 3 {
		t.Fatalf("the navigation's sizes: %v", sizes)
	}
	wire, whole := sidecartest.Num(sizes[0]), sidecartest.Num(sizes[1])
	if wire <= 0 || wire >= 1<<20 || whole <= wire {
		t.Errorf("/docs/ in the browser (%v): %d bytes on the wire for %d, want compressed, under 1 MB", sizes[2], wire, whole)
	}
	t.Logf("/docs/: %d bytes on the wire, %d decoded; shown %s after Page.navigate answered", wire, whole, shown.Round(time.Millisecond))

	// The menu's entries stay on the page: a click on a tag shows its operations.
	page.Eval(t, `document.querySelector('[data-component-name="Menu/MenuItem"] [data-text="counters"]').click(); true`)
	page.Await(t, 10*time.Second, "a click on the menu's counters shows them", `location.pathname === "/docs/" &&
		location.hash === "#/counters" && document.querySelector('a[href="#/counters/addcounter"] [data-text]') !== null`)

	ops := docsOperations(t)
	if len(ops) < 50 {
		t.Fatalf("openapi.yaml has %d operations: the test does not read it right", len(ops))
	}
	for _, op := range ops {
		// Redoc's address of an operation: #/<first tag>/<operationId in lower case>.
		anchor := "#/" + op.tag + "/" + strings.ToLower(op.id)
		page.Eval(t, fmt.Sprintf(`location.hash = %q; true`, anchor))
		page.Await(t, 10*time.Second, op.method+" "+op.path+" ("+op.id+") shown at "+anchor, fmt.Sprintf(`(() => {
			const want = %s;
			const item = document.querySelector('a[href="' + want.anchor + '"] [data-text]');
			const method = item?.closest('a').querySelector('.tag-http')?.textContent;
			const section = document.querySelector('#api-content [data-section-id="' + want.anchor.slice(1) + '"]');
			return item?.dataset.text === want.summary && method === want.method &&
				section?.querySelector('h2')?.textContent === want.summary && section.innerText.includes(want.path);
		})()`, docsJSON(t, map[string]string{"anchor": anchor, "summary": op.summary, "method": strings.ToLower(op.method), "path": op.path})))
	}

	if p := page.Problems(false); len(p) > 0 {
		t.Errorf("the reference logged errors:\n%s", strings.Join(p, "\n"))
	}
	requests := page.Requests()
	var fetched []string
	for _, u := range requests {
		if strings.HasPrefix(u, "data:") || strings.HasPrefix(u, "blob:") {
			continue // in the page
		}
		if fetched = append(fetched, u); !strings.HasPrefix(u, car.Base+"/") {
			t.Errorf("the reference made a request outside the sidecar's origin: %.200s", u)
		}
	}
	t.Logf("%d operations shown; the page fetched only %v", len(ops), fetched)

	// The page is served with its own policy (the page above kept to it).
	resp, err := car.Do(t.Context(), http.MethodGet, "/docs/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || resp.Status != http.StatusOK {
		t.Errorf("GET /docs/: %d with Content-Security-Policy %q", resp.Status, csp)
	}
}

// docsOperation is one operation of openapi.yaml as the reference shows it.
type docsOperation struct{ tag, id, method, path, summary string }

// docsOperations reads every operation of openapi.yaml, tag by tag (the
// reference renders one tag at a time: visiting a tag's operations in a row
// renders it once, not once per operation).
func docsOperations(t *testing.T) []docsOperation {
	t.Helper()
	spec, err := openapi3.NewLoader().LoadFromData(coordsidecar.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var ops []docsOperation
	for _, path := range spec.Paths.InMatchingOrder() {
		for method, op := range spec.Paths.Value(path).Operations() {
			if len(op.Tags) == 0 || op.OperationID == "" || op.Summary == "" {
				t.Fatalf("%s %s: the reference files an operation under its first tag, by its operationId and summary", method, path)
			}
			ops = append(ops, docsOperation{tag: op.Tags[0], id: op.OperationID, method: method, path: path, summary: op.Summary})
		}
	}
	slices.SortFunc(ops, func(a, b docsOperation) int {
		return cmp.Or(strings.Compare(a.tag, b.tag), strings.Compare(a.id, b.id))
	})
	return ops
}

func docsJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
