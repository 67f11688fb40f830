package main

import "github.com/coord-sidecar/coord-sidecar/internal/sidecartest"

// The names suspend_test.go uses for sidecartest's session-state matcher and
// never-lost check (they were faults_test.go's, which moved to api/). Once
// suspend_test.go has moved out of this package too, nothing here uses them.
var (
	sessionEvent = sidecartest.SessionEvent
	neverLost    = sidecartest.NeverLost
)
