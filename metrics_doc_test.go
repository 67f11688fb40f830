package coordsidecar

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every metric the sidecar exports is in docs/OPERATIONS.md, and the table
// names none that the code does not export: an operator reads the list there.
// The code's metrics are the Name fields of its prometheus options
// ("coord_..."), read from every Go file but tests.
func TestEveryMetricIsDocumented(t *testing.T) {
	ops, err := os.ReadFile("docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	// A metric's name is an opts' Name field, or kit.WaitSeconds' name.
	nameField := regexp.MustCompile(`(?:Name:\s*|WaitSeconds\([^,]+,\s*)"(coord_[a-z0-9_]+)"`)
	code := map[string]string{} // metric -> file
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range nameField.FindAllStringSubmatch(string(b), -1) {
			code[m[1]] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 50 {
		t.Fatalf("found %d metrics in the code: the test does not read it right", len(code))
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(coord_[a-z0-9_]+)[`{]").FindAllStringSubmatch(string(ops), -1) {
		documented[m[1]] = true
	}
	for _, name := range slices.Sorted(mapKeys(code)) {
		if !documented[name] {
			t.Errorf("%s exports %s, which docs/OPERATIONS.md's metrics do not list", code[name], name)
		}
	}
	for _, name := range slices.Sorted(mapKeys(documented)) {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/OPERATIONS.md lists %s, which no code exports", name)
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
