package api

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/internal/nodetools"
)

// The generated server (oapi/api.gen.go) and Go client (client/client.gen.go) must
// match openapi.yaml: regenerate each into a temporary file and compare. Run
// `make generate` when this fails.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the code generator")
	}
	for _, dir := range []string{"oapi", "client"} {
		t.Run(dir, func(t *testing.T) { checkGeneratedFresh(t, dir) })
	}
}

// checkGeneratedFresh runs oapi-codegen with dir's oapi-codegen.yaml into a
// temporary file and compares the result with the file the config names.
func checkGeneratedFresh(t *testing.T, dir string) {
	cfg, err := os.ReadFile(filepath.Join(dir, "oapi-codegen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, line := range strings.Split(string(cfg), "\n") {
		if v, ok := strings.CutPrefix(line, "output: "); ok {
			name = strings.TrimSpace(v)
		}
	}
	if name == "" {
		t.Fatalf("%s/oapi-codegen.yaml names no output", dir)
	}
	out := filepath.Join(t.TempDir(), name)
	tmpCfg := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := os.WriteFile(tmpCfg, []byte(strings.Replace(string(cfg), "output: "+name, "output: "+out, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := filepath.Abs("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", tmpCfg, spec)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `make generate` and commit the result", filepath.Join("api", dir, name))
	}
}

// The embedded spec loads, so the generated server and openapi.yaml agree on it.
func TestEmbeddedSpecLoads(t *testing.T) {
	sw, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	if sw.Paths.Find("/v1/locks/{name}") == nil {
		t.Fatal("the embedded spec has no /v1/locks/{name}")
	}
}

// The Node examples' typed client is generated from openapi.yaml
// (examples/node/api.d.ts, by openapi-typescript in generate.mjs) and every example type-checks
// against it (tsc, with checkJs): a change of the contract that breaks a client
// fails here. Run `make generate` when the types are stale.
func TestTypeScriptClientIsFreshAndTypeChecks(t *testing.T) {
	dir := nodetools.Install(t, "examples/node")
	bin := func(name string) string { return filepath.Join(dir, "node_modules", ".bin", name) }
	fresh := filepath.Join(t.TempDir(), "api.d.ts")
	gen := exec.Command("node", "generate.mjs", fresh) // openapi-typescript, int64 as number | bigint
	gen.Dir = dir
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("generate.mjs (openapi-typescript): %v\n%s", err, b)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "api.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("examples/node/api.d.ts is stale: run `make generate` and commit the result")
	}
	tsc := exec.Command(bin("tsc"), "--project", dir)
	tsc.Dir = dir
	if b, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc: the Node examples do not type-check against openapi.yaml: %v\n%s", err, b)
	}
}
