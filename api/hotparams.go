package api

import (
	"net/http"
	"strings"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/specrules"
)

// The lock cycle's two operations (POST and DELETE /v1/locks/{name}) are
// served before the router (issue 41): a plain request (below) is recognised
// by a test of its method, path, query and body, and goes through the same
// steps as every request (frontOf; nestName has nothing to do for it), then
// the steps of its route as the router's path runs them, in one function:
// the query check (specrules.CheckQuery, with the route's rules looked up
// once), the long-poll's slot (takeSlot, with wait= as bound), the binding of
// its parameters in one pass over the query string, the operation of the
// strict server (ops: the very method the generated wrapper calls), and its
// answer written as the generated wrapper and answerDirect write it
// (writeDirect, else the answer's own Visit method; writeProblem for an
// error). What it skips is what does nothing for it: chi's routing context
// and its copy of the request, the route tree's walk, headAsGet (neither
// method is HEAD), the per-route middleware chain and the body check (a plain
// request sends no body, and these operations take none), the request's copy
// with the slot's context (the context is handed to the operation), and the
// generated wrapper, which parses the whole query string once per parameter
// (r.URL.Query(), a map and its slices, four times for an acquire), binds
// each value through reflection, and boxes the request and its handler in
// interfaces and closures.
//
// A plain request: the method POST or DELETE; the path /v1/locks/<name> with
// a non-empty name free of '/', nothing in it escaped (RawPath empty: the
// router would match the unescaped path, and the generated binding take the
// name as it is); no body (a Content-Length of 0, http.NoBody); its query
// string pairs of keys and values with nothing to unescape or refuse ('%',
// '+', ';'), no parameter given twice, and a release's lease given. Any other
// request goes to the router, and on these routes to the generated wrapper,
// which answers it as it always has. What a plain request binds is what the
// generated code binds for it: the values as they are (strings, none of them
// unescaped), an absent optional parameter nil. Its metrics and request line
// name the route's pattern, as the router's would; a request refused before
// the route (401, 403) stays "unmatched".
//
// The server stays generated from openapi.yaml: the routes and the
// operations' interface are the generated ones, and the generated wrapper
// serves all but the plain case.

// lockRoute is the lock cycle's route pattern, as the router's table names it.
const lockRoute = "/v1/locks/{name}"

// hotFirst serves the lock cycle's plain requests with front and ops, and
// every other request with mux (the router, behind front).
func (s *Server) hotFirst(mux http.Handler, ops oapi.StrictServerInterface) http.Handler {
	if s.nested["locks"] != nil { // a lock's name may hold '/': the router's nestName applies
		return mux
	}
	acquireRules, ok1 := s.rules.Query(http.MethodPost, lockRoute)
	releaseRules, ok2 := s.rules.Query(http.MethodDelete, lockRoute)
	if !ok1 || !ok2 || !s.bodiless(http.MethodPost, lockRoute) || !s.bodiless(http.MethodDelete, lockRoute) {
		return mux // not the operations this path was written for
	}
	c := &lockCycle{s: s, ops: ops, acquireRules: acquireRules, releaseRules: releaseRules,
		acquireObs: s.metrics.routeSeries(http.MethodPost, lockRoute), releaseObs: s.metrics.routeSeries(http.MethodDelete, lockRoute)}
	hot := s.frontOf(http.HandlerFunc(c.serve), false)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if plainLockRequest(r) {
			hot.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// lockCycle serves the lock cycle's plain requests past front (hotFirst).
type lockCycle struct {
	s                          *Server
	ops                        oapi.StrictServerInterface
	acquireRules, releaseRules specrules.Query
	acquireObs, releaseObs     *routeSeries
}

func (c *lockCycle) serve(w http.ResponseWriter, r *http.Request) {
	rec := recorderOf(w)
	if rec != nil {
		rec.route, rec.obs = lockRoute, c.acquireObs
		if r.Method == http.MethodDelete {
			rec.obs = c.releaseObs
		}
	}
	name := r.URL.Path[len(lockPrefix):]
	if r.Method == http.MethodPost {
		c.acquire(w, r, name)
	} else {
		c.release(w, r, name)
	}
}

// acquire is POST /v1/locks/{name}: the query checked, the slot of a
// long-poll taken, then the operation with its answer.
func (c *lockCycle) acquire(w http.ResponseWriter, r *http.Request, name string) {
	var q acquireQuery
	if raw := r.URL.RawQuery; raw != "" {
		plainQuery(raw, acquireKeys[:], q.vals[:], &q.set)
		if err := specrules.CheckQuery(raw, c.acquireRules); err != nil {
			c.s.writeProblem(w, r, err)
			return
		}
	}
	slot, ok := c.s.takeSlot(w, r, q.vals[0]) // acquireKeys[0] is wait
	if !ok {
		return
	}
	ctx := r.Context()
	if slot != nil {
		defer c.s.endSlot(slot)
		ctx = slot
	}
	resp, err := c.ops.AcquireLock(ctx, oapi.AcquireLockRequestObject{Name: name, Params: q.params()})
	if err == nil && resp != nil && !writeDirect(w, resp) {
		err = resp.VisitAcquireLockResponse(w)
	}
	if err != nil {
		c.s.writeProblem(w, r, err)
	}
}

// release is DELETE /v1/locks/{name}: the query checked, then the operation
// with its answer.
func (c *lockCycle) release(w http.ResponseWriter, r *http.Request, name string) {
	var vals [1]string
	var set uint8
	plainQuery(r.URL.RawQuery, releaseKeys[:], vals[:], &set)
	if err := specrules.CheckQuery(r.URL.RawQuery, c.releaseRules); err != nil {
		c.s.writeProblem(w, r, err)
		return
	}
	resp, err := c.ops.ReleaseLock(r.Context(), oapi.ReleaseLockRequestObject{Name: name, Params: oapi.ReleaseLockParams{Lease: vals[0]}})
	if err == nil && resp != nil {
		err = resp.VisitReleaseLockResponse(w)
	}
	if err != nil {
		c.s.writeProblem(w, r, err)
	}
}

// bodiless tells whether the route declares no JSON body that a request
// must send: one sent without a body passes its body check.
func (s *Server) bodiless(method, route string) bool {
	rule, ok := s.rules.Body(method, route)
	return !ok || rule.Check("", nil) == nil
}

const lockPrefix = "/v1/locks/"

// plainLockRequest tells whether r is a plain request of the lock cycle
// (hotFirst).
func plainLockRequest(r *http.Request) bool {
	var keys []string
	switch r.Method {
	case http.MethodPost:
		keys = acquireKeys[:]
	case http.MethodDelete:
		keys = releaseKeys[:]
	default:
		return false
	}
	name, ok := strings.CutPrefix(r.URL.Path, lockPrefix)
	if !ok || name == "" || r.URL.RawPath != "" || strings.IndexByte(name, '/') >= 0 {
		return false
	}
	if r.ContentLength != 0 || r.Body != nil && r.Body != http.NoBody {
		return false // a body, even an empty chunked one: the router's checks say what of it
	}
	var vals [4]string
	var set uint8
	if !plainQuery(r.URL.RawQuery, keys, vals[:len(keys)], &set) {
		return false
	}
	return r.Method == http.MethodPost || set == 1
}

// acquireKeys are AcquireLockParams' query parameters, in acquireQuery's order.
var acquireKeys = [4]string{"wait", "ttl", "lease", "owner"}

// releaseKeys are ReleaseLockParams'.
var releaseKeys = [1]string{"lease"}

// acquireQuery is an acquire's query bound: vals[i] is acquireKeys[i]'s
// value, given when bit i of set is.
type acquireQuery struct {
	vals [4]string
	set  uint8
}

// params are the query's AcquireLockParams: the given values point into one
// copy of vals (one allocation for all).
func (q *acquireQuery) params() oapi.AcquireLockParams {
	var p oapi.AcquireLockParams
	if q.set == 0 {
		return p
	}
	v := new([4]string)
	*v = q.vals
	for i, dst := range [4]**string{&p.Wait, &p.Ttl, &p.Lease, &p.Owner} {
		if q.set&(1<<i) != 0 {
			*dst = &v[i]
		}
	}
	return p
}

// plainQuery binds raw's values of keys into vals (bit i of *set for
// keys[i]) and reports true when raw is plain: every pair free of what
// url.ParseQuery would unescape or refuse ('%', '+', ';') and no key of keys
// given twice. A key not among keys is skipped, as the generated binding
// skips it (checkQuery has refused what the operation does not declare). On
// false, vals and set are not to be used.
func plainQuery(raw string, keys, vals []string, set *uint8) bool {
	if strings.ContainsAny(raw, "%+;") {
		return false
	}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		for i, key := range keys {
			if k != key {
				continue
			}
			if *set&(1<<i) != 0 {
				return false // twice: the generated binding's "multiple values" problem
			}
			*set |= 1 << i
			vals[i] = v
			break
		}
	}
	return true
}
