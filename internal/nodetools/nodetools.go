// Package nodetools gives tests the npm packages the project pins: the contract
// tools under tools/ (redocly, Prism) and the Node examples' client under
// examples/node/ (openapi-fetch, openapi-typescript, tsc). Each folder's
// package-lock.json is installed into its git-ignored node_modules by
// scripts/npm-ci.sh, which checks the packages against the lock file on every
// run and copies them from the machine's store when they are not whole (`make
// test` has done it already; a plain `go test` does it here).
package nodetools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Root is the repository's root folder (the one with go.mod), found upwards from
// the test's working folder.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("nodetools: no go.mod above the working folder")
		}
		dir = parent
	}
}

// Need skips the test when node or npm is not on PATH, the one case in which the
// contract tests may not run (make test installs both; see scripts/deps.sh).
func Need(tb testing.TB) {
	tb.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("%s is not on PATH: the contract tests need Node.js and npm (scripts/deps.sh test installs them)", tool)
		}
	}
}

// Install makes sure the packages of dir (relative to the root, e.g. "tools")
// are installed, and returns dir's absolute path. It skips the test without node
// or npm (see Need) and fails it when the install fails.
func Install(tb testing.TB, dir string) string {
	tb.Helper()
	Need(tb)
	root := Root(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "npm-ci.sh"), dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("scripts/npm-ci.sh %s: %v\n%s", dir, err, out)
	}
	return filepath.Join(root, dir)
}

// Bin returns the path of an installed package's command in dir's
// node_modules/.bin, installing dir's packages first.
func Bin(tb testing.TB, dir, name string) string {
	tb.Helper()
	return filepath.Join(Install(tb, dir), "node_modules", ".bin", name)
}
