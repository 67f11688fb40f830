package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/coord-sidecar/coord-sidecar/internal/nodetools"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
)

// The files of deploy/ start the sidecar with flags and COORD_ variables
// that this binary's own flag set takes: the systemd unit's ExecStart= with
// its environment file, and the Kubernetes pod's sidecar container's args
// with its env. A misspelled flag, a value of the wrong type, or a variable
// that no flag reads (which the binary would silently ignore), unless the Go
// runtime reads it, fails. The rest of
// those files is checked in deploy/.
func TestDeployFilesNameKnownFlags(t *testing.T) {
	root := nodetools.Root(t)
	known := knownEnv(t)

	unit := readText(t, filepath.Join(root, "deploy/systemd/coord-sidecar.service"))
	execStart := regexp.MustCompile(`(?m)^ExecStart=(.*)$`).FindStringSubmatch(unit)
	if execStart == nil {
		t.Fatal("deploy/systemd/coord-sidecar.service: no ExecStart=")
	}
	envFile := map[string]string{}
	for _, l := range strings.Split(readText(t, filepath.Join(root, "deploy/systemd/coord-sidecar.env")), "\n") {
		if name, value, ok := strings.Cut(strings.TrimSpace(l), "="); ok && !strings.HasPrefix(name, "#") {
			envFile[name] = value
		}
	}
	checkStart(t, "the systemd unit", strings.Fields(execStart[1])[1:], envFile, known)

	var pod struct {
		Spec struct {
			Template struct {
				Spec struct {
					InitContainers []podContainer `yaml:"initContainers"`
				}
			}
		}
	}
	manifest := readText(t, filepath.Join(root, "deploy/kubernetes/app-with-sidecar.yaml"))
	if err := yaml.NewDecoder(strings.NewReader(manifest)).Decode(&pod); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pod.Spec.Template.Spec.InitContainers, func(c podContainer) bool { return c.Name == "coord-sidecar" })
	if i < 0 {
		t.Fatal("deploy/kubernetes: no init container coord-sidecar in the first document")
	}
	c := pod.Spec.Template.Spec.InitContainers[i]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = "a-secret-of-at-least-16-characters" // a token from a Secret
		}
	}
	checkStart(t, "the Kubernetes pod", c.Args, env, known)
}

// podContainer is what TestDeployFilesNameKnownFlags reads of a container.
type podContainer struct {
	Name string
	Args []string
	Env  []struct {
		Name      string
		Value     string
		ValueFrom any `yaml:"valueFrom"`
	}
}

// goRuntimeEnv are the variables the Go runtime reads, which a deploy file
// may set for the sidecar's process (GOMAXPROCS=1 in the Kubernetes pod).
var goRuntimeEnv = []string{"GOMAXPROCS", "GOGC", "GOMEMLIMIT", "GODEBUG", "GOTRACEBACK"}

// checkStart parses args and env with the sidecar's flag set, as the binary
// would at start, and refuses a variable that neither a flag nor the Go
// runtime reads.
func checkStart(t *testing.T, who string, args []string, env map[string]string, known []string) {
	t.Helper()
	for name := range env {
		if !slices.Contains(known, name) && !slices.Contains(goRuntimeEnv, name) {
			t.Errorf("%s: %s is read by no flag of coord-sidecar (coord-sidecar --help lists them)", who, name)
		}
	}
	m := sidecar.NewMain()
	if err := m.ParseFlags(args, func(k string) string { return env[k] }); err != nil {
		t.Errorf("%s: coord-sidecar %q: %v", who, args, err)
	}
}

// knownEnv lists the environment variables the sidecar's flags read, as
// --help names them.
func knownEnv(t *testing.T) []string {
	t.Helper()
	var help bytes.Buffer
	m := sidecar.NewMain()
	m.Stdout = &help
	_ = m.ParseFlags([]string{"-h"}, func(string) string { return "" })
	_, flags, _ := strings.Cut(help.String(), "flags of the sidecar")
	var out []string
	for _, s := range regexp.MustCompile(`\((COORD_[A-Z_]+)\)`).FindAllStringSubmatch(flags, -1) {
		out = append(out, s[1])
	}
	if !slices.Contains(out, "COORD_STATE_DIR") {
		t.Fatalf("coord-sidecar --help names no COORD_STATE_DIR among %q: the parse of its flags is broken", out)
	}
	return out
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
