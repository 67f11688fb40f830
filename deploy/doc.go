// Package deploy holds no code: it is where the files users run the sidecar
// with live (systemd/: a unit and its environment file; kubernetes/: an
// application pod with the sidecar as a native sidecar container), and its
// tests check them: the unit with systemd-analyze verify, the manifests
// decoded strictly into the Kubernetes API's Go types, and what each must
// say. That their arguments and environment variables name only flags the
// binary knows is checked with the binary's own flag set, in cmd/coord-sidecar
// (TestDeployFilesNameKnownFlags).
package deploy
