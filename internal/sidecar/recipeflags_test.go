package sidecar

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/registry"
)

// A recipe's flag is one of the sidecar's: its default when nothing sets it,
// its environment variable's value, the command line's over both, listed by
// --help with the variable's name, and a value its Check refuses is an error
// that names the flag.
func TestRecipeFlags(t *testing.T) {
	flags := []api.Flag{
		{Name: "widgets-base", Default: "/w", Usage: "where widgets live", Check: func(v string) error {
			if !strings.HasPrefix(v, "/") {
				return fmt.Errorf("%q is not absolute", v)
			}
			return nil
		}},
		{Name: "widgets-mode", Usage: "how widgets go"},
	}
	parse := func(args []string, env map[string]string) (map[string]string, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		done := addRecipeFlags(fs, func(k string) string { return env[k] }, flags)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return done()
	}
	for _, c := range []struct {
		args       []string
		env        map[string]string
		base, mode string
	}{
		{nil, nil, "/w", ""},
		{nil, map[string]string{"COORD_WIDGETS_BASE": "/env", "COORD_WIDGETS_MODE": "fast"}, "/env", "fast"},
		{[]string{"--widgets-base", "/flag"}, map[string]string{"COORD_WIDGETS_BASE": "/env"}, "/flag", ""},
	} {
		got, err := parse(c.args, c.env)
		if err != nil || got["widgets-base"] != c.base || got["widgets-mode"] != c.mode || len(got) != 2 {
			t.Errorf("%q %v: %v %v, want base %q mode %q", c.args, c.env, got, err, c.base, c.mode)
		}
	}
	if _, err := parse([]string{"--widgets-base", "rel"}, nil); err == nil || !strings.Contains(err.Error(), `--widgets-base: "rel" is not absolute`) {
		t.Errorf("a refused value: %v", err)
	}
	if _, err := parse(nil, map[string]string{"COORD_WIDGETS_BASE": "rel"}); err == nil || !strings.Contains(err.Error(), "--widgets-base") {
		t.Errorf("a refused value from the environment: %v", err)
	}

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	addRecipeFlags(fs, func(string) string { return "" }, flags)
	var help bytes.Buffer
	printUsage(&help, fs)
	for _, want := range []string{"-widgets-base string", "where widgets live (COORD_WIDGETS_BASE)", `(default "/w")`, "how widgets go (COORD_WIDGETS_MODE)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, help.String())
		}
	}
}

// Every recipe's flag is on the sidecar's command line: ParseFlags takes it
// and hands its value on (Config.RecipeFlags), and --help lists it.
func TestRegisteredRecipeFlagsParse(t *testing.T) {
	var help bytes.Buffer
	m := NewMain()
	m.Stdout = &help
	_ = m.ParseFlags([]string{"-h"}, func(string) string { return "" })
	m = NewMain()
	if err := m.ParseFlags(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	for _, f := range registry.Flags() {
		if !strings.Contains(help.String(), "-"+f.Name+" ") || !strings.Contains(help.String(), "("+api.EnvName(f.Name)+")") {
			t.Errorf("--help does not list --%s with %s", f.Name, api.EnvName(f.Name))
		}
		if v, ok := m.Config.RecipeFlags[f.Name]; !ok || v != f.Default {
			t.Errorf("--%s: %q %v, want its default %q", f.Name, v, ok, f.Default)
		}
	}
}
