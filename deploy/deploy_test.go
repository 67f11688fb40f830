package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
)

const (
	unitFile     = "systemd/coord-sidecar.service"
	manifestFile = "kubernetes/app-with-sidecar.yaml"
	sidecarName  = "coord-sidecar"
)

// The unit passes `systemd-analyze verify` (Debian's systemd package;
// scripts/deps.sh installs it) without a word: verify exits 0 on an unknown
// key or a value it cannot parse, and only says so, so anything it prints
// fails the test. The ExecStart binary must exist for verify: a copy of the
// unit names this test's own executable in its place (what the binary does
// with its flags is TestDeployFilesNameKnownFlags's part).
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (%v): scripts/deps.sh test installs Debian's systemd package", err)
	}
	unit := readFile(t, unitFile)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := execStart(t, unit)[0]
	copyPath := filepath.Join(t.TempDir(), path.Base(unitFile))
	if err := os.WriteFile(copyPath, []byte(strings.Replace(unit, "ExecStart="+exe, "ExecStart="+self, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
}

// The unit restarts the sidecar on failure on its state directory, reloads by
// SIGUSR2, and follows the main PID through the pid file the sidecar writes
// in that directory.
func TestSystemdUnitKeepsStateAndFollowsUpgrades(t *testing.T) {
	unit := readFile(t, unitFile)
	want := map[string]string{
		"Restart":         "on-failure",
		"StateDirectory":  "coord-sidecar",
		"ExecReload":      "/bin/kill -USR2 $MAINPID",
		"PIDFile":         "/var/lib/coord-sidecar/" + statedir.PIDFile,
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
	}
	for key, value := range want {
		if got := unitValues(unit, key); !slices.Equal(got, []string{value}) {
			t.Errorf("%s: %s=%q; want %q", unitFile, key, got, value)
		}
	}
	if typ := unitValues(unit, "Type"); !slices.Equal(typ, []string{"exec"}) && !slices.Equal(typ, []string{"simple"}) {
		t.Errorf("%s: Type=%q; want exec or simple (the binary does not speak sd_notify)", unitFile, typ)
	}
	dir, ok := flagValue(execStart(t, unit)[1:], "state-dir")
	if !ok || dir != "/var/lib/"+unitValues(unit, "StateDirectory")[0] || path.Dir(unitValues(unit, "PIDFile")[0]) != dir {
		t.Errorf("%s: --state-dir %q; want StateDirectory='s /var/lib/coord-sidecar, where PIDFile= is", unitFile, dir)
	}
}

// Every document of the manifests decodes strictly into its Kubernetes API
// type: an unknown or misspelled field, one in the wrong case, or a value of
// the wrong type fails.
func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	docs := decodeManifests(t)
	if len(docs) == 0 {
		t.Fatalf("%s: no documents", manifestFile)
	}
}

// The application pod runs the sidecar as a native sidecar container, keeps
// its state on an emptyDir, probes it on /healthz and /readyz of its admin
// listener, restricts it,
// bounds its resources, and tells the application where it is.
func TestKubernetesPodRunsTheSidecar(t *testing.T) {
	var dep *appsv1.Deployment
	for _, d := range decodeManifests(t) {
		if d, ok := d.(*appsv1.Deployment); ok {
			dep = d
		}
	}
	if dep == nil {
		t.Fatalf("%s: no Deployment", manifestFile)
	}
	pod := dep.Spec.Template.Spec
	i := slices.IndexFunc(pod.InitContainers, func(c corev1.Container) bool { return c.Name == sidecarName })
	if i < 0 {
		t.Fatalf("%s: no init container %q: the sidecar is a native sidecar container", manifestFile, sidecarName)
	}
	c := pod.InitContainers[i]
	if policy := cmpOr(c.RestartPolicy, new(corev1.ContainerRestartPolicy)); *policy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init container %s: restartPolicy %q; want Always (a native sidecar)", c.Name, *policy)
	}
	checkStateVolume(t, pod, c)
	port := checkProbes(t, c)
	checkRestricted(t, pod, c)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if c.Resources.Requests.Name(r, "").IsZero() || c.Resources.Limits.Name(r, "").IsZero() {
			t.Errorf("init container %s: no %s request or limit", c.Name, r)
		}
	}
	addr := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, app := range pod.Containers {
		if !slices.ContainsFunc(app.Env, func(e corev1.EnvVar) bool { return e.Name == "COORD_ADDR" && e.Value == addr }) {
			t.Errorf("container %s: no COORD_ADDR=%s: the application reaches the sidecar on localhost", app.Name, addr)
		}
		checkSecurityContext(t, "container "+app.Name, pod.SecurityContext, app.SecurityContext)
	}
}

// checkStateVolume: --state-dir is a directory below the mount point of an
// emptyDir, not the mount point itself (it belongs to root, and the sidecar,
// running as another user, refuses a state directory it does not own).
func checkStateVolume(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	dir, ok := flagValue(c.Args, "state-dir")
	if !ok {
		t.Errorf("init container %s: no --state-dir in %q", c.Name, c.Args)
		return
	}
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, dir)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || pod.Volumes[i].EmptyDir == nil {
			t.Errorf("--state-dir %s is on volume %q, not an emptyDir", dir, m.Name)
		}
		if m.ReadOnly {
			t.Errorf("--state-dir %s is on a read-only mount", dir)
		}
		return
	}
	t.Errorf("--state-dir %s is below no volume mount of %s (a directory under an emptyDir's mount point)", dir, c.Name)
}

// checkProbes: liveness on /healthz, readiness and startup on /readyz, all on
// the admin listener (--admin-listen, on all of the pod's addresses: the
// kubelet probes the pod's IP; outside --max-conns, so that no client of the
// API can fail them); it returns the port of the API's --listen.
func checkProbes(t *testing.T, c corev1.Container) int32 {
	t.Helper()
	admin, ok := flagValue(c.Args, "admin-listen")
	m := regexp.MustCompile(`^(0\.0\.0\.0|\[::\]|):(\d+)$`).FindStringSubmatch(admin)
	if !ok || m == nil {
		t.Errorf("init container %s: --admin-listen %q; want all of the pod's addresses (the kubelet probes the pod's IP)", c.Name, admin)
		return 0
	}
	var adminPort int32
	fmt.Sscan(m[2], &adminPort)
	listen, _ := flagValue(c.Args, "listen")
	l := regexp.MustCompile(`^127\.0\.0\.1:(\d+)$`).FindStringSubmatch(listen)
	if l == nil {
		t.Errorf("init container %s: --listen %q; want loopback (only the pod's containers use the API)", c.Name, listen)
		return 0
	}
	var port int32
	fmt.Sscan(l[1], &port)
	probes := []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}, {"startupProbe", c.StartupProbe, "/readyz"}}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("init container %s: no HTTP %s", c.Name, p.name)
			continue
		}
		g := p.probe.HTTPGet
		at := g.Port.IntVal
		if g.Port.StrVal != "" {
			i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == g.Port.StrVal })
			if i < 0 {
				t.Errorf("%s: port %q is none of the container's", p.name, g.Port.StrVal)
				continue
			}
			at = c.Ports[i].ContainerPort
		}
		if g.Path != p.path || at != adminPort {
			t.Errorf("%s: GET %s on port %d; want %s on %d (--admin-listen)", p.name, g.Path, at, p.path, adminPort)
		}
	}
	return port
}

// checkRestricted: the sidecar's container runs under the "restricted" Pod
// Security Standard, with a read-only root file system.
func checkRestricted(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	checkSecurityContext(t, "init container "+c.Name, pod.SecurityContext, c.SecurityContext)
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("init container %s: readOnlyRootFilesystem not true", c.Name)
	}
}

// checkSecurityContext holds a container to the restricted Pod Security
// Standard: non-root, no privilege escalation, no capability, the runtime's
// seccomp profile (the pod's settings count where the container has none).
func checkSecurityContext(t *testing.T, who string, pod *corev1.PodSecurityContext, sc *corev1.SecurityContext) {
	t.Helper()
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	if sc == nil {
		t.Errorf("%s: no securityContext", who)
		return
	}
	nonRoot := cmpOr(sc.RunAsNonRoot, pod.RunAsNonRoot)
	if nonRoot == nil || !*nonRoot {
		t.Errorf("%s: runAsNonRoot not true", who)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation not false", who)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities %v; want drop ALL and add none", who, sc.Capabilities)
	}
	seccomp := cmpOr(sc.SeccompProfile, pod.SeccompProfile)
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccompProfile %v; want RuntimeDefault", who, seccomp)
	}
}

func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// decodeManifests decodes every document of the manifest file strictly into
// the Go type of its apiVersion and kind.
func decodeManifests(t *testing.T) []any {
	t.Helper()
	types := map[string]func() any{
		"apps/v1/Deployment":                 func() any { return &appsv1.Deployment{} },
		"networking.k8s.io/v1/NetworkPolicy": func() any { return &networkingv1.NetworkPolicy{} },
	}
	var out []any
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(readFile(t, manifestFile), -1) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%s, document %d: %v", manifestFile, i+1, err)
		}
		if head.Kind == "" && strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) == "" {
			continue // only comments
		}
		newObj, ok := types[head.APIVersion+"/"+head.Kind]
		if !ok {
			t.Fatalf("%s, document %d: %s %s is not a type this test knows: add it to decodeManifests", manifestFile, i+1, head.APIVersion, head.Kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s, document %d (%s): %v", manifestFile, i+1, head.Kind, err)
		}
		if err := sameKeys(t, []byte(doc), obj); err != nil {
			t.Fatalf("%s, document %d (%s): %v", manifestFile, i+1, head.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

// sameKeys fails unless every field and value of doc comes back when obj,
// decoded from it, is encoded again: encoding/json matches field names
// regardless of case, Kubernetes does not, so a field spelled in another case
// is decoded by UnmarshalStrict and refused by the API server.
func sameKeys(t *testing.T, doc []byte, obj any) error {
	t.Helper()
	var orig, back any
	if err := yaml.Unmarshal(doc, &orig); err != nil {
		return err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &back); err != nil {
		return err
	}
	return within(orig, back, "")
}

// within says where a, a decoded JSON value, has a field or value that b has not.
func within(a, b any, at string) error {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: an object, decoded as %T", at, b)
		}
		for k, v := range a {
			bv, ok := bm[k]
			if !ok {
				return fmt.Errorf("%s.%s: no such field (a field name is case-sensitive)", at, k)
			}
			if err := within(v, bv, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		bs, ok := b.([]any)
		if !ok || len(bs) != len(a) {
			return fmt.Errorf("%s: a list of %d, decoded as %v", at, len(a), b)
		}
		for i := range a {
			if err := within(a[i], bs[i], fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	default:
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("%s: %v, decoded as %v", at, a, b)
		}
	}
	return nil
}

// flagValue is the value of --name (as --name=V or --name V) in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		a = "-" + strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v, true
		}
		if a == "-"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// unitValues are the values of every key= line of a unit file.
func unitValues(unit, key string) []string {
	var out []string
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// execStart is the unit's one ExecStart= command line, split on spaces.
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	lines := unitValues(unit, "ExecStart")
	if len(lines) != 1 {
		t.Fatalf("%s: ExecStart=%q; want one", unitFile, lines)
	}
	return strings.Fields(lines[0])
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
