package api

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
)

// The lock cycle's two operations (POST and DELETE /v1/locks/{name}) bind
// their parameters here, in front of the generated wrapper (issue 41): the
// generated one parses the whole query string once per parameter
// (r.URL.Query(), a map and its slices, four times for an acquire) and binds
// each value through reflection, and wraps the operation in a closure and its
// per-route middleware for every request. Here a plain request (its name
// unescaped by the router, its query string pairs of keys and values with
// nothing to unescape, no parameter given twice) is bound in one pass over
// the query string and handed to the same strict handler, after the same body
// check (checkJSONBody's, jsonBodyOK); any other request (an escaped name or
// value, a repeated or missing required parameter, a ';') goes to the
// generated wrapper, which answers it as it always has. What a plain request
// binds is what the generated code binds for it: the values as they are
// (strings, none of them unescaped), an absent optional parameter nil.
//
// The server stays generated from openapi.yaml: these two routes are
// registered again over the generated ones, and call the generated wrapper for
// anything but the plain case.

// hotRoutes registers the lock cycle's routes on r over the generated ones;
// gen is the generated wrapper (with the same handler, middlewares and error
// handler as the generated routes) for what they do not bind themselves.
// middlewares must be the generated routes' (Handler's: checkJSONBody alone),
// which jsonBodyOK stands for.
func (s *Server) hotRoutes(r chi.Router, strict oapi.ServerInterface, gen *oapi.ServerInterfaceWrapper) {
	r.Post("/v1/locks/{name}", func(w http.ResponseWriter, r *http.Request) {
		name, ok := plainName(r)
		var q acquireQuery
		if !ok || !plainQuery(r.URL.RawQuery, acquireKeys[:], q.vals[:], &q.set) {
			gen.AcquireLock(w, r)
			return
		}
		if s.jsonBodyOK(w, r) {
			strict.AcquireLock(w, r, name, q.params())
		}
	})
	r.Delete("/v1/locks/{name}", func(w http.ResponseWriter, r *http.Request) {
		name, ok := plainName(r)
		var vals [1]string
		var set uint8
		if !ok || !plainQuery(r.URL.RawQuery, releaseKeys[:], vals[:], &set) || set != 1 {
			gen.ReleaseLock(w, r)
			return
		}
		if s.jsonBodyOK(w, r) {
			strict.ReleaseLock(w, r, name, oapi.ReleaseLockParams{Lease: vals[0]})
		}
	})
}

// plainName is the route's {name} when the router matched it on the
// unescaped path (RawPath empty: nothing in it was escaped) and it is not
// empty: then the generated binding takes it as it is.
func plainName(r *http.Request) (string, bool) {
	if r.URL.RawPath != "" {
		return "", false
	}
	name := chi.URLParam(r, "name")
	return name, name != ""
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
