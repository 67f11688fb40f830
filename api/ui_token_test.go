package api_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The status page with tokens, in a real headless Chromium: it asks for a token,
// refuses a wrong one, then goes live over a ticket cookie (EventSource cannot
// send a header) and shows only what the token may read; a reload of the page
// connects again without asking (the token stays in the tab's sessionStorage).
func TestStatusPageWithTokens(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	page := browsertest.Start(t)
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	dir := t.TempDir()
	file := sidecartest.WriteFile(t, dir, "tokens.json", []byte(`{"tokens":[
		{"name":"dashboard","token":"dashboard-token-0123456789","allow":["locks/public-*"],"readOnly":true},
		{"name":"ops","token":"ops-token-0123456789","allow":["*"]}]}`))
	m, err := runMain(t, nil, append([]string{"--listen", "127.0.0.1:0", "--tokens-file", filepath.Clean(file)}, zkArgs(zkc.Servers(), root)...)...)
	if err != nil {
		t.Fatal(err)
	}
	car := (&sidecartest.Sidecar{M: m, Base: "http://" + m.Addr()}).As(sidecartest.Bearer("ops-token-0123456789")...)
	car.WaitReady(t)

	page.Call(t, "Page.navigate", map[string]any{"url": car.Base + "/ui/"})
	page.Await(t, 10*time.Second, "the page asks for a token", `location.pathname === "/ui/" && document.readyState === "complete" &&
		document.body.dataset.auth === "needed" && !document.querySelector("#auth").hidden`)
	submit := func(token string) {
		page.Eval(t, `document.querySelector("#auth-token").value = `+jsString(token)+`; document.querySelector("#auth-submit").click(); true`)
	}
	submit("wrong-token-0123456789")
	page.Await(t, 5*time.Second, "a wrong token is refused", `/refused/.test(document.querySelector("#auth-error").textContent) && document.body.dataset.connected === "false"`)
	submit("dashboard-token-0123456789")
	page.Await(t, 10*time.Second, "live with the token", `document.body.dataset.auth === "ok" && document.querySelector("#auth").hidden &&
		document.body.dataset.connected === "true" && document.querySelector("#status").dataset.state === "connected"`)

	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/public-1?owner=ui")
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/secret-1?owner=ui")
	page.Await(t, 5*time.Second, "the readable lock shown", uiField("lock", "public-1", "owner")+` === "ui"`)
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/public-2?owner=ui")
	page.Await(t, 5*time.Second, "the next readable lock shown", uiField("lock", "public-2", "owner")+` === "ui"`)
	if v := page.Eval(t, `document.querySelector('[data-lock="secret-1"]') === null && !document.body.innerText.includes("secret-1")`); v != true {
		t.Fatal("the page shows a lock its token may not read")
	}
	// The token never reaches script-readable cookies.
	if v := page.Eval(t, `document.cookie`); v != "" {
		t.Fatalf("document.cookie = %v", v)
	}

	page.Eval(t, `window.beforeReload = true`)
	page.Call(t, "Page.reload", nil)
	page.Await(t, 10*time.Second, "live again after a reload, without asking", `!window.beforeReload && document.readyState === "complete" && document.body.dataset.auth !== "needed" &&
		document.body.dataset.connected === "true" && `+uiField("lock", "public-1", "owner")+` === "ui"`)
}

func jsString(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		if r == '"' || r == '\\' {
			b = append(b, '\\')
		}
		b = append(b, string(r)...)
	}
	return string(append(b, '"'))
}
