package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
)

// JSON request bodies are held to what openapi.yaml declares of them before the
// generated decoder sees them (it takes any Content-Type, ignores what follows the
// first JSON value, and turns a missing required field into its zero value):
//
//   - a body sent with a Content-Type other than application/json (a charset other
//     than utf-8 included) is 415 unsupported-media-type;
//   - a body with a member its schema does not declare is 400 unknown-parameter
//     (see unknown.go);
//   - a body that is not exactly one JSON value (bad JSON, or more data after it),
//     or that does not match its schema (a required field missing, a wrong type, a
//     value out of range), or a required body that is absent, is 400 invalid-body.
//
// Each is answered before the handler runs, so nothing reaches ZooKeeper. The
// rules come from the embedded spec itself, so a body added to openapi.yaml is
// checked without code here.

// bodyRule is what the spec says of one operation's JSON request body.
type bodyRule struct {
	required bool
	schema   *openapi3.Schema
	name     string // the schema's component name, for messages
}

// bodyRules maps "METHOD /path/{template}" (chi's route pattern) to its rule; only
// operations with an application/json request body have one.
func bodyRules(spec *openapi3.T) map[string]bodyRule {
	rules := map[string]bodyRule{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			mt := op.RequestBody.Value.Content["application/json"] // exactly: Get would match */* too
			if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
				continue
			}
			name := "its schema"
			if ref := mt.Schema.Ref; ref != "" {
				name = ref[strings.LastIndex(ref, "/")+1:]
			}
			rules[method+" "+path] = bodyRule{required: op.RequestBody.Value.Required, schema: mt.Schema.Value, name: name}
		}
	}
	return rules
}

// checkJSONBody is a per-route middleware of the generated router (it runs once
// chi has matched the route, so the route pattern names the operation).
func (s *Server) checkJSONBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := chi.RouteContext(r.Context())
		if rc == nil {
			next.ServeHTTP(w, r)
			return
		}
		rule, ok := s.bodies[r.Method+" "+rc.RoutePattern()]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.writeProblem(w, r, bodyError(err)) // *http.MaxBytesError: 413
			return
		}
		if err := rule.check(r.Header.Get("Content-Type"), body); err != nil {
			s.writeProblem(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// check applies the rule to a body and its Content-Type.
func (b bodyRule) check(contentType string, body []byte) error {
	if len(body) == 0 {
		if b.required {
			return InvalidBody("the request needs a JSON body (%s)", b.name)
		}
		return nil // an optional body left out: no Content-Type needed either
	}
	if err := jsonContentType(contentType); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return InvalidBody("the body is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return InvalidBody("the body has more data after its JSON value; send exactly one value")
	}
	if field, known := unknownField(b.schema, v, ""); field != "" {
		return unknownParameter(b.name, field, known)
	}
	if err := b.schema.VisitJSON(v, openapi3.VisitAsRequest()); err != nil {
		return InvalidBody("the body does not match %s: %s", b.name, schemaReason(err))
	}
	return nil
}

// jsonContentType accepts application/json, with no charset or utf-8.
func jsonContentType(contentType string) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	shown := contentType
	if shown == "" {
		shown = "none"
	}
	return NewProblem(http.StatusUnsupportedMediaType, "unsupported-media-type",
		fmt.Sprintf("a JSON body needs Content-Type: application/json (this request's: %s)", shown))
}

// schemaReason says where and why a value failed its schema, in one line.
func schemaReason(err error) string {
	var me openapi3.MultiError
	if errors.As(err, &me) && len(me) > 0 {
		err = me[0]
	}
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		return err.Error()
	}
	at := "the body"
	if p := se.JSONPointer(); len(p) > 0 {
		at = `"` + strings.Join(p, "/") + `"`
	}
	reason := se.Reason
	if reason == "" {
		reason = "does not match " + se.SchemaField
	}
	return at + ": " + reason
}

// InvalidBody is a 400 invalid-body problem: the request's body is not what
// its operation takes.
func InvalidBody(format string, args ...any) *Problem {
	return NewProblem(http.StatusBadRequest, "invalid-body", fmt.Sprintf(format, args...))
}

// ReadItem reads a body of at most MaxItem bytes (what: "queue item", "value");
// above it, 413 and nothing kept.
func (s *Server) ReadItem(body io.Reader, what string) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, s.opt.MaxItem+1))
	if err != nil {
		// Above --max-body: a 413 too; a body shorter than its Content-Length or
		// too slow: the client's fault, a 4xx.
		return nil, bodyError(err)
	}
	if int64(len(data)) > s.opt.MaxItem {
		return nil, NewProblem(http.StatusRequestEntityTooLarge, "body-too-large",
			fmt.Sprintf("a %s is at most %d bytes (--max-item)", what, s.opt.MaxItem))
	}
	return data, nil
}
