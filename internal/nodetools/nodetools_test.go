package nodetools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The npm store heals, and no clone writes into another's packages: with a
// store of its own (COORD_NPM_STORE), the suite's npm step (scripts/npm-ci.sh)
// installs two clones of examples/node; a user's `npm ci` in one of them leaves
// the store and the other clone whole; a store emptied by hand (its mark
// kept), a clone's package deleted and a clone in the former layout (a link
// into the store) are each put right by the next run.
func TestNPMStoreHeals(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages")
	}
	Need(t)
	tmp := t.TempDir()
	e := &npmEnv{t: t, root: Root(t), tmp: tmp, store: filepath.Join(tmp, "store")}
	e.env = append(os.Environ(), "COORD_NPM_STORE="+e.store, "npm_config_prefer_offline=true")
	a, b := e.clone("a"), e.clone("b")
	e.npmStep(a, b)
	entries, err := filepath.Glob(filepath.Join(e.store, "*", ".complete"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("store marks %v (%v), want one", entries, err)
	}
	shop := filepath.Dir(entries[0])
	e.resolves(a)
	e.resolves(b)

	// A user's npm ci in clone a: the store and clone b stay whole.
	e.run(a, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	if err := e.checks(a, shop); err != nil {
		t.Fatalf("npm ci in one clone damaged the store: %v", err)
	}
	if err := e.checks(b, b); err != nil {
		t.Fatalf("npm ci in one clone damaged another: %v", err)
	}

	// The store emptied by hand, its mark kept: a fresh clone heals it.
	e.empty(filepath.Join(shop, "node_modules"))
	if _, err := os.Stat(filepath.Join(shop, ".complete")); err != nil {
		t.Fatal(err)
	}
	if err := e.checks(a, shop); err == nil {
		t.Fatal("an emptied store passes the check")
	}
	c := e.clone("c")
	if out := e.npmStep(c); !strings.Contains(out, "damaged") {
		t.Errorf("the npm step did not say the store was damaged: %q", out)
	}
	e.resolves(c)
	if err := e.checks(c, shop); err != nil {
		t.Fatalf("the store was not installed again: %v", err)
	}

	// A clone's package deleted: the next run puts it back.
	if err := os.RemoveAll(filepath.Join(c, "node_modules", "typescript")); err != nil {
		t.Fatal(err)
	}
	e.npmStep(c)
	e.resolves(c)

	// The former layout, a link into the store: replaced by a copy.
	d := e.clone("d")
	if err := os.Symlink(filepath.Join(shop, "node_modules"), filepath.Join(d, "node_modules")); err != nil {
		t.Fatal(err)
	}
	e.npmStep(d)
	if fi, err := os.Lstat(filepath.Join(d, "node_modules")); err != nil || !fi.IsDir() {
		t.Fatalf("d/node_modules still a link: %v %v", fi, err)
	}
	e.resolves(d)
	if err := e.checks(d, shop); err != nil {
		t.Fatalf("replacing the link touched the store: %v", err)
	}
}

// npmEnv is TestNPMStoreHeals's machine: clones of examples/node under tmp
// and a store of their own.
type npmEnv struct {
	t                *testing.T
	root, tmp, store string
	env              []string
}

// clone makes a folder with examples/node's package.json and lock file.
func (e *npmEnv) clone(name string) string {
	e.t.Helper()
	dir := filepath.Join(e.tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(e.root, "examples", "node", f))
		if err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	return dir
}

// run runs a command in dir, failing the test unless it succeeds.
func (e *npmEnv) run(dir string, name string, args ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, e.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// npmStep runs the suite's npm step, scripts/npm-ci.sh, on dirs.
func (e *npmEnv) npmStep(dirs ...string) string {
	e.t.Helper()
	return e.run(e.root, "bash", append([]string{filepath.Join(e.root, "scripts", "npm-ci.sh")}, dirs...)...)
}

// checks runs scripts/npm-check.mjs: are dir's locked packages under modules?
func (e *npmEnv) checks(dir, modules string) error {
	out, err := exec.Command("node", filepath.Join(e.root, "scripts", "npm-check.mjs"), dir, modules).CombinedOutput()
	if err != nil {
		return &checkError{string(out)}
	}
	return nil
}

// resolves fails the test unless typescript resolves in dir (what
// TestExampleLock and the type check need).
func (e *npmEnv) resolves(dir string) {
	e.t.Helper()
	e.run(dir, "node", "--input-type=module", "-e", "await import('typescript')")
}

// empty removes everything in dir (not dir).
func (e *npmEnv) empty(dir string) {
	e.t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		e.t.Fatalf("%s: %d entries, %v", dir, len(entries), err)
	}
	for _, m := range entries {
		if err := os.RemoveAll(filepath.Join(dir, m.Name())); err != nil {
			e.t.Fatal(err)
		}
	}
}

type checkError struct{ out string }

func (e *checkError) Error() string { return strings.TrimSpace(e.out) }
