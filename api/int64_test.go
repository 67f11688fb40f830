package api

import (
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
)

// int64Names are the integer fields and parameters that hold signed 64-bit
// values: counter values and amounts, fencing tokens and terms (czxids),
// versions of groups and partitions (zxids), throughput limits, shares and
// demands. The clients type them from `format: int64` (examples/node:
// number | bigint), so one without it would be rounded past 2^53.
var int64Names = []string{"value", "add", "expect", "fencingToken", "term", "version", "limit", "share", "demand"}

// notInt64Params are query parameters of int64Names' names that are not
// 64-bit values: a list's page size.
var notInt64Params = []string{"limit"}

// int32Versions are the schemas and operations whose version is ZooKeeper's
// data version of a key (int32), not a zxid.
var int32Versions = []string{"KeyInfo", "KeyState", "KeyWritten", "VersionMismatchProblem", "putkey", "deletekey", "getkey", "streamkey"}

// Every integer of int64Names in openapi.yaml, in a schema or a parameter,
// carries `format: int64` (a key's version is int32, its own kind).
func TestInt64FieldsCarryFormatInt64(t *testing.T) {
	sw, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	c := &int64Check{seen: map[*openapi3.Schema]bool{}}
	for name, r := range sw.Components.Schemas {
		c.walk("#/components/schemas/"+name, r.Value)
	}
	params := 0
	for path, item := range sw.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path + " /" + strings.ToLower(op.OperationID)
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p.Value != nil && p.Value.Schema != nil && !slices.Contains(notInt64Params, p.Value.Name) {
					c.check(where, p.Value.Name, p.Value.Schema.Value)
					params++
				}
			}
		}
	}
	if params == 0 || len(c.seen) == 0 {
		t.Fatal("walked nothing: the spec's shape changed")
	}
	slices.Sort(c.bad)
	for _, b := range c.bad {
		t.Error(b)
	}
}

// int64Check walks schemas once each, noting the int64 fields without the format.
type int64Check struct {
	seen map[*openapi3.Schema]bool
	bad  []string
}

func (c *int64Check) check(where, name string, s *openapi3.Schema) {
	if s == nil || !s.Type.Is("integer") || !slices.Contains(int64Names, name) {
		return
	}
	want := "int64"
	if name == "version" && slices.ContainsFunc(int32Versions, func(k string) bool { return strings.HasSuffix(where, "/"+k) }) {
		want = "int32"
	}
	if s.Format != want {
		c.bad = append(c.bad, where+"/"+name+": format "+s.Format+", want "+want)
	}
}

func (c *int64Check) walk(where string, s *openapi3.Schema) {
	if s == nil || c.seen[s] {
		return
	}
	c.seen[s] = true
	for name, p := range s.Properties {
		c.check(where, name, p.Value)
		c.walkRef(where+"/"+name, p)
	}
	for _, group := range [][]*openapi3.SchemaRef{s.AllOf, s.OneOf, s.AnyOf} {
		for _, r := range group {
			c.walkRef(where, r)
		}
	}
	if s.Items != nil {
		c.walkRef(where+"[]", s.Items)
	}
}

// walkRef walks a named schema under its own name.
func (c *int64Check) walkRef(where string, r *openapi3.SchemaRef) {
	if r.Ref != "" {
		where = r.Ref
	}
	c.walk(where, r.Value)
}
