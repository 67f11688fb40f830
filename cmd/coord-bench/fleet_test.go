package main

import (
	"strings"
	"testing"
	"time"
)

// -fleet takes the fleet's URLs with one process per URL, and sizes from 2 to
// the fleet's size; a sum of processes in -pids (an ensemble) is summed.
func TestFleetFlags(t *testing.T) {
	o, err := parseFlags([]string{"-fleet", "http://a,http://b,http://c", "-fleet-pids", "1,2,3", "-fleet-sizes", "2,3",
		"-pids", "zookeeper=7+8+9"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.engines, ",") != "sidecar,inprocess" || len(o.fleet.urls) != 3 || o.fleet.sizes[1] != 3 {
		t.Errorf("fleet options: engines %v, %+v", o.engines, o.fleet)
	}
	if zk := o.pids["zookeeper"]; len(zk) != 3 || zk[2] != 9 {
		t.Errorf("-pids zookeeper=7+8+9: %v", zk)
	}
	for _, bad := range [][]string{
		{"-fleet", "http://a,http://b", "-fleet-pids", "1"},
		{"-fleet", "http://a,http://b", "-fleet-pids", "1,2", "-fleet-sizes", "3"},
		{"-fleet", "http://a,http://b", "-fleet-pids", "1,2", "-fleet-sizes", "1"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// The fleet's tables: the handoff ratio against its target of 1.0, the
// failover's every-stream median against 50 ms and the kill's against the
// session timeout, the fleet at rest against 0.2 % of a core and 20 MiB.
func TestFleetReport(t *testing.T) {
	o, err := parseFlags([]string{"-fleet", "http://a,http://b", "-fleet-pids", "1,2", "-fleet-sizes", "2", "-rounds", "1"})
	if err != nil {
		t.Fatal(err)
	}
	hot := rowResult{row: row{name: "hot lock through 2 sidecars", workers: 2, hot: true},
		rounds: map[string][]round{"sidecar": rounds(120), "inprocess": rounds(100)}}
	ms := time.Millisecond
	fo := failover{sidecars: 2, every: []time.Duration{30 * ms, 40 * ms, 90 * ms}, each: []time.Duration{10 * ms, 20 * ms},
		killed: 11 * time.Second, expired: 10900 * ms}
	rest := fleetRest{span: 10 * time.Second, cpu: []time.Duration{10 * ms, 30 * ms}, rss: []int64{19 << 20, 21 << 20}, anon: []int64{5 << 20, 6 << 20}}
	var b strings.Builder
	printFleet(&b, o, time.Now(), rest, []rowResult{hot}, map[int]fleetRest{2: rest}, []failover{fo})
	contains(t, "the fleet report", b.String(),
		"| hot lock through 2 sidecars | 120 | 100 | **1.20** (≥ 1.0 met) |\n",
		"| 2 | 3 | 40.0 / 90.0 | 20.0 / 20.0 | 11.00 s (session timeout 10s; the node gone, as a watch of the bench's own saw it: 10.90 s) | median ≤ 50 ms met; kill ≤ session timeout **missed** |\n",
		"| 2 | 0.200 % / 0.300 % | 21.0 / 21.0 | 6.0 |",
		"CPU ≤ 0.2 % met; RSS ≤ 20 MiB **missed** |\n",
	)
}
