package ctl

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// Every verb's --help, every group's, every wrapper's (lock, elect and elect
// --observe, semaphore, rwlock, group join, service register) end with the
// one exit-code table, and name COORD_TOKEN; elect's usage shows --id as
// optional.
func TestHelpShowsTheExitCodes(t *testing.T) {
	table := exitTableText()
	if !strings.Contains(table, "COORD_TOKEN") {
		t.Fatalf("the table's text does not name COORD_TOKEN:\n%s", table)
	}
	check := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, table) {
			t.Fatalf("%s --help does not show the exit-code table:\n%s", what, out)
		}
	}
	for name := range cliVerbs {
		r := cli(t, nil, "", append(strings.Fields(name), "--help")...)
		if r.code != 0 {
			t.Fatalf("%s --help: exit %d", name, r.code)
		}
		check(name, r.stdout)
		g, _, _ := strings.Cut(name, " ")
		check(g, cli(t, nil, "", g, "--help").stdout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type wrapper struct {
		name string
		args []string // before --help
		run  func(*Signals, []string, func(string) string, io.Writer, io.Writer) int
	}
	wrappers := []wrapper{{name: "elect --observe", args: []string{"--observe"}, run: RunElect}}
	for name, run := range Wrappers {
		wrappers = append(wrappers, wrapper{name: name, run: run})
	}
	for name, w := range cliWrappers {
		wrappers = append(wrappers, wrapper{name: name, run: w.run})
	}
	if len(wrappers) < 7 {
		t.Fatalf("%d wrappers: lock, elect, semaphore, rwlock, group join and service register are missing some", len(wrappers))
	}
	for _, w := range wrappers {
		var out, errb bytes.Buffer
		if code := w.run(&Signals{ctx: ctx, cancel: cancel}, append(w.args, "--help"), func(string) string { return "" }, &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d", w.name, code)
		}
		check(w.name, out.String())
		if w.name == "elect" && !strings.Contains(out.String(), "elect NAME [--id ID]") {
			t.Fatalf("elect --help shows --id as required:\n%s", out.String())
		}
	}
}

// The statuses map to the table's codes.
func TestExitForStatus(t *testing.T) {
	for _, c := range []struct {
		status  int
		problem string
		want    int
	}{
		{400, "invalid-parameter", ExitUsage}, {413, "body-too-large", ExitUsage}, {415, "unsupported-media-type", ExitUsage},
		{401, "unauthorized", ExitDenied}, {403, "forbidden", ExitDenied}, {404, "key-not-found", ExitNotFound},
		{409, "lock-held", ExitNotAcquired}, {409, "semaphore-full", ExitNotAcquired},
		{409, "version-mismatch", ExitConflict}, {409, "counter-overflow", ExitConflict}, {409, "candidate-exists", ExitConflict},
		{429, "too-many-leases", ExitUnavailable}, {503, "zookeeper-unavailable", ExitUnavailable}, {500, "internal", ExitUnavailable},
	} {
		if got := exitForStatus(c.status, c.problem); got != c.want {
			t.Errorf("%d %s: exit %d, want %d", c.status, c.problem, got, c.want)
		}
	}
}
