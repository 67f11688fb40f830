package main

import (
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The status page with 10,000 things (6,000 locks, 2,000 elections, 1,000
// queues, 1,000 barriers) in a real headless Chromium: it takes in the whole
// first state, draws at most a page of rows per kind with a note of how many
// more, and its search box finds one lock among the 6,000 at once.
func TestStatusPageSearch10k(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	page := startUIBrowser(t)
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	conn := zktest.Connect(t, zkc.Servers(), 30*time.Second)
	n := things{locks: 6000, elections: 2000, queues: 1000, barriers: 1000}
	makeThings(t, conn, root, n)
	car := startSidecar(t, zkc.Servers(), root)

	page.call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false})
	page.call(t, "Page.navigate", map[string]any{"url": car.base + "/ui/"})
	took := page.await(t, 60*time.Second, "every thing on the page", `location.pathname === "/ui/" && document.readyState === "complete" &&
		document.body.dataset.connected === "true" &&
		document.querySelector('[data-count="lock"]').textContent === "6000" &&
		document.querySelector('[data-count="leader"]').textContent === "2000" &&
		document.querySelector('[data-count="queue"]').textContent === "1000" &&
		document.querySelector('[data-count="barrier"]').textContent === "1000"`)
	t.Logf("10,000 things on the page after %v", took)
	if rows := page.eval(t, `document.querySelectorAll("#lock-rows tr[data-lock]").length`); rows.(float64) > 200 {
		t.Errorf("%v lock rows drawn: want at most a page", rows)
	}
	page.await(t, 5*time.Second, "a note of the locks not drawn", `/^5800 more/.test(document.querySelector('[data-more="lock"]')?.textContent ?? "")`)

	want := thingName("lock", 4242)
	start := time.Now()
	page.eval(t, `(() => { const s = document.querySelector('input[type=search]'); s.value = "`+want+`"; s.dispatchEvent(new Event("input")); return true; })()`)
	page.await(t, 5*time.Second, "the search finds "+want, `(() => {
		const rows = [...document.querySelectorAll("#lock-rows tr[data-lock]")];
		return rows.length === 1 && rows[0].dataset.lock === "`+want+`" &&
			rows[0].querySelector('[data-field="owner"]').textContent === "owner-4242" &&
			document.querySelector('[data-count="lock"]').textContent === "1 of 6000" &&
			document.querySelectorAll("#leader-rows tr[data-election], #queue-rows tr[data-queue], #barrier-rows tr[data-barrier]").length === 0;
	})()`)
	if d := time.Since(start); d > time.Second {
		t.Errorf("the search took %v to show its one lock", d)
	} else {
		t.Logf("the search showed its one lock after %v", d)
	}
	if p := page.problems(false); len(p) > 0 {
		t.Errorf("console errors: %v", p)
	}
}
