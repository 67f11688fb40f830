package main

import (
	"strings"
	"testing"
	"time"
)

// rounds is n rounds of the given cycles each, one second long.
func rounds(cycles ...int64) []round {
	rs := make([]round, len(cycles))
	for i, c := range cycles {
		rs[i] = round{cycles: c, elapsed: time.Second}
	}
	return rs
}

// contains fails t for each of wants that out (what) lacks.
func contains(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, out)
		}
	}
}

// With -sidecar-stated the lock table gains the stated column and its ratio
// to the sidecar (target 0.95) after the columns and ratios it had, which stay
// as they were; the counter table gains nothing. Without the flag the lock
// table is the one it was.
func TestReportStatedColumn(t *testing.T) {
	lock := rowResult{row: allRows["c1"], rounds: map[string][]round{
		"sidecar": rounds(1000), "inprocess": rounds(1250), "etcd": rounds(1000), "stated": rounds(940)}}
	counter := rowResult{row: allRows["counter-c1"], rounds: map[string][]round{
		"sidecar": rounds(1000), "inprocess": rounds(1000)}}
	report := func(engines ...string) string {
		o := &options{engines: engines, rounds: 1, round: time.Second, warmup: time.Second}
		var b strings.Builder
		printReport(&b, o, []rowResult{lock, counter}, time.Now())
		return b.String()
	}

	with := report("sidecar", "stated", "inprocess", "etcd")
	contains(t, "the report with the stated engine", with,
		"| row | sidecar | in-process (zk.Lock, 4 sessions) | etcd 3.4 gateway | sidecar with --state-dir | sidecar/in-process | sidecar/etcd | stated/sidecar |\n",
		"| c1 | 1000 | 1250 | 1000 | 940 | **0.80** (≥ 0.8 met) | **1.00** | **0.94** (≥ 0.95 **missed**) |\n",
		"| row | sidecar | in-process (Get+Set loop, 4 sessions) | sidecar/in-process |\n",
		"| counter adds, c1 | 1000 | 1000 | **1.00** (≥ 0.8 met) |\n",
		"| c1 | stated | 940 |",
	)

	without := report("sidecar", "inprocess", "etcd")
	contains(t, "the report without the stated engine", without,
		"| row | sidecar | in-process (zk.Lock, 4 sessions) | etcd 3.4 gateway | sidecar/in-process | sidecar/etcd |\n",
		"| c1 | 1000 | 1250 | 1000 | **0.80** (≥ 0.8 met) | **1.00** |\n",
	)
	if strings.Contains(without, "stated") {
		t.Errorf("the report without the stated engine mentions it:\n%s", without)
	}
}

// The stated engine is in the default list only when -sidecar-stated is set.
func TestStatedEngineNeedsItsURL(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.engines, ",") != "sidecar,inprocess" {
		t.Errorf("engines without -sidecar-stated or -etcd: %v", o.engines)
	}
	o, err = parseFlags([]string{"-sidecar-stated", "http://127.0.0.1:1", "-etcd", "http://127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.engines, ",") != "sidecar,stated,inprocess,etcd" {
		t.Errorf("engines with -sidecar-stated and -etcd: %v", o.engines)
	}
}
