package api

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/nodetools"
)

// The reference GET /docs/ serves must match openapi.yaml: build it again
// (scripts/build-docs.sh, redocly build-docs from tools/) into a temporary file
// and compare with the embedded one. Run `make generate` when this fails.
func TestDocsPageIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redocly build-docs")
	}
	root := nodetools.Install(t, "tools")
	root = filepath.Dir(root)
	out := filepath.Join(t.TempDir(), "index.html")
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "build-docs.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-docs.sh: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docsPage, want) {
		t.Fatal("api/docs/index.html is stale: run `make generate` and commit the result")
	}
}
