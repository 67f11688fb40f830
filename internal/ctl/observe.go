package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// `coord-sidecar elect --observe NAME`: who leads the election, now and at
// each change, without campaigning (etcdctl elect -l).

const electObserveAbout = `Writes the candidate id of the election's leader at once (nothing while there is
none), then the id of each new leader, one line each, until interrupted (SIGINT,
SIGTERM: exit 128+N). A new term of the same candidate (it resigned to the back
of a line of one, or led again after a gap) writes its id again. It follows GET
/v1/elections/{name}/events without campaigning; through a restart of the
sidecar it opens the stream again and writes a leader only if it changed, and
exits 69 when the sidecar is not reached again within a minute.`

// observeRequested tells whether the elect command line asks for --observe
// (before any --).
func observeRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--observe", "-observe", "--observe=true", "-observe=true":
			return true
		}
	}
	return false
}

// runElectObserve implements `coord-sidecar elect --observe NAME`.
func runElectObserve(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	const prog = "elect --observe"
	fs := flag.NewFlagSet("coord-sidecar elect", flag.ContinueOnError)
	o := wrapOptions{stderr: stderr}
	o.registerConnection(fs, getenv)
	fs.Bool("observe", true, "observe the election instead of campaigning")
	verb := cliVerb{args: "--observe NAME", min: 1, max: 1, about: electObserveAbout}
	positional, code, ok := parseCLIArgs(fs, args, verb, stdout, stderr)
	if !ok {
		return code
	}
	c, code := o.client(prog)
	if c == nil {
		return code
	}
	ctx, cancel := context.WithCancel(sig.ctx)
	defer cancel()
	f, err := c.follow(ctx, "/v1/elections/"+url.PathEscape(positional[0])+"/events", kvWatchGiveUp, nil)
	if err != nil {
		return c.unavailable(sig, stderr, "coord-sidecar "+prog+":", err, nil)
	}
	defer f.Wait()
	var last leadership
	for ev := range f.Events {
		if now, ok := leadershipOf(ev); ok && now != last {
			last = now
			if now.candidate != "" {
				fmt.Fprintln(stdout, now.candidate)
			}
		}
	}
	if sig.received() != 0 {
		return sig.exitCode()
	}
	return c.unavailable(sig, stderr, "coord-sidecar "+prog+": the stream ended:", f.Err(), nil)
}

// leadership is who leads an election in which term ("" when nobody does).
type leadership struct {
	candidate string
	term      int64
}

// leadershipOf is the leadership a `leader` event shows (ok false for
// another event).
func leadershipOf(ev sse.Event) (leadership, bool) {
	if ev.Name != "leader" {
		return leadership{}, false
	}
	var body struct {
		Leader *struct {
			Candidate string `json:"candidate"`
			Term      int64  `json:"term"`
		} `json:"leader"`
	}
	if json.Unmarshal(ev.Data, &body) != nil {
		return leadership{}, false
	}
	if body.Leader == nil {
		return leadership{}, true
	}
	return leadership{strings.TrimSpace(body.Leader.Candidate), body.Leader.Term}, true
}
