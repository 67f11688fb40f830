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
	root := Root(t)
	tmp := t.TempDir()
	store := filepath.Join(tmp, "store")
	env := append(os.Environ(), "COORD_NPM_STORE="+store, "npm_config_prefer_offline=true")
	clone := func(name string) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(root, "examples", "node", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	npmStep := func(dirs ...string) string {
		t.Helper()
		return run(root, "bash", append([]string{filepath.Join(root, "scripts", "npm-ci.sh")}, dirs...)...)
	}
	checks := func(dir, modules string) error {
		cmd := exec.Command("node", filepath.Join(root, "scripts", "npm-check.mjs"), dir, modules)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return &checkError{string(out)}
		}
		return nil
	}
	resolves := func(dir string) {
		t.Helper()
		// What TestExampleLock and the type check need: typescript resolves.
		run(dir, "node", "--input-type=module", "-e", "await import('typescript')")
	}
	a, b := clone("a"), clone("b")
	npmStep(a, b)
	entries, err := filepath.Glob(filepath.Join(store, "*", ".complete"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("store marks %v (%v), want one", entries, err)
	}
	shop := filepath.Dir(entries[0])
	resolves(a)
	resolves(b)

	// A user's npm ci in clone a: the store and clone b stay whole.
	run(a, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	if err := checks(a, shop); err != nil {
		t.Fatalf("npm ci in one clone damaged the store: %v", err)
	}
	if err := checks(b, b); err != nil {
		t.Fatalf("npm ci in one clone damaged another: %v", err)
	}

	// The store emptied by hand, its mark kept: a fresh clone heals it.
	modules, err := os.ReadDir(filepath.Join(shop, "node_modules"))
	if err != nil || len(modules) == 0 {
		t.Fatalf("store's node_modules: %d entries, %v", len(modules), err)
	}
	for _, m := range modules {
		if err := os.RemoveAll(filepath.Join(shop, "node_modules", m.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(shop, ".complete")); err != nil {
		t.Fatal(err)
	}
	if err := checks(a, shop); err == nil {
		t.Fatal("an emptied store passes the check")
	}
	c := clone("c")
	if out := npmStep(c); !strings.Contains(out, "damaged") {
		t.Errorf("the npm step did not say the store was damaged: %q", out)
	}
	resolves(c)
	if err := checks(c, shop); err != nil {
		t.Fatalf("the store was not installed again: %v", err)
	}

	// A clone's package deleted: the next run puts it back.
	if err := os.RemoveAll(filepath.Join(c, "node_modules", "typescript")); err != nil {
		t.Fatal(err)
	}
	npmStep(c)
	resolves(c)

	// The former layout, a link into the store: replaced by a copy.
	d := clone("d")
	if err := os.Symlink(filepath.Join(shop, "node_modules"), filepath.Join(d, "node_modules")); err != nil {
		t.Fatal(err)
	}
	npmStep(d)
	if fi, err := os.Lstat(filepath.Join(d, "node_modules")); err != nil || !fi.IsDir() {
		t.Fatalf("d/node_modules still a link: %v %v", fi, err)
	}
	resolves(d)
	if err := checks(d, shop); err != nil {
		t.Fatalf("replacing the link touched the store: %v", err)
	}
}

type checkError struct{ out string }

func (e *checkError) Error() string { return strings.TrimSpace(e.out) }
