package sidecartest

import (
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Outcomes collects what a fault workload saw: the answers by "what status
// problem-type" and the first 50 failures. It is safe for concurrent use.
type Outcomes struct {
	omu      sync.Mutex
	failures []string
	answers  map[string]int
}

// Fail records a failure (the first 50 are kept).
func (o *Outcomes) Fail(format string, args ...any) {
	o.omu.Lock()
	defer o.omu.Unlock()
	if len(o.failures) < 50 {
		o.failures = append(o.failures, fmt.Sprintf(format, args...))
	}
}

// Count counts an answer to a request of the kind what.
func (o *Outcomes) Count(what string, r *Response) {
	o.omu.Lock()
	defer o.omu.Unlock()
	if o.answers == nil {
		o.answers = map[string]int{}
	}
	o.answers[fmt.Sprintf("%s %d %s", what, r.Status, ProblemType(r))]++
}

// Snapshot returns the answers as sorted "kind: count" lines, and the failures.
func (o *Outcomes) Snapshot() (answers, failures []string) {
	o.omu.Lock()
	defer o.omu.Unlock()
	for k, n := range o.answers {
		answers = append(answers, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(answers)
	return answers, slices.Clone(o.failures)
}
