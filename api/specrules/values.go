package specrules

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

// MaxQuoted is the most characters of one value a client sent that an
// answer quotes (Quote, Shorten): a problem never echoes a 65,000-character
// name back in full.
const MaxQuoted = 256

// Shorten is s cut to its first MaxQuoted characters, with "…" after them
// when it was longer.
func Shorten(s string) string {
	if len(s) <= MaxQuoted {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxQuoted {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// Quote is s, Shorten'd, in double quotes with Go's escapes; a value cut
// short says how long it was.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	n := utf8.RuneCountInString(s)
	if n <= MaxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(strings.TrimSuffix(Shorten(s), "…")) + fmt.Sprintf("… (%d characters)", n)
}

// Query is what an operation declares of its query, and whether it takes a
// body at all.
type Query struct {
	// Names are the declared query parameters' names, sorted.
	Names []string
	// NoBody: the operation declares no request body (a body sent is refused).
	NoBody bool
	params []param // in Names' order
}

// NewQuery is the Query of untyped (string) parameters named names.
func NewQuery(names ...string) Query {
	var ps []*openapi3.Parameter
	for _, n := range names {
		ps = append(ps, &openapi3.Parameter{Name: n, In: openapi3.ParameterInQuery})
	}
	return newQuery(ps)
}

func newQuery(ps []*openapi3.Parameter) Query {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	q := Query{Names: []string{}}
	for _, p := range ps {
		if len(q.Names) > 0 && q.Names[len(q.Names)-1] == p.Name {
			continue
		}
		q.Names = append(q.Names, p.Name)
		q.params = append(q.params, newParam(p))
	}
	return q
}

// index is the position of the declared parameter name, or -1.
func (q Query) index(name string) int {
	for i, n := range q.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// param is what a query parameter's schema allows of its value.
type param struct {
	name     string
	kind     byte // 's' a string, 'i' an integer, 'b' a boolean
	min, max int64
	enum     []string
	maxLen   int // 0: no bound
}

func newParam(p *openapi3.Parameter) param {
	pr := param{name: p.Name, kind: 's'}
	if p.Schema == nil || p.Schema.Value == nil {
		return pr
	}
	s := p.Schema.Value
	switch {
	case s.Type.Is("integer"):
		pr.kind, pr.min, pr.max = 'i', math.MinInt64, math.MaxInt64
		if s.Format == "int32" {
			pr.min, pr.max = math.MinInt32, math.MaxInt32
		}
		if s.Min != nil {
			pr.min = int64(*s.Min)
		}
		if s.Max != nil {
			pr.max = int64(*s.Max)
		}
	case s.Type.Is("boolean"):
		pr.kind = 'b'
	}
	for _, e := range s.Enum {
		if es, ok := e.(string); ok {
			pr.enum = append(pr.enum, es)
		}
	}
	if s.MaxLength != nil {
		pr.maxLen = int(*s.MaxLength)
	}
	return pr
}

// check is the refusal of value v, or nil: an empty value, a value not of
// the parameter's type, outside its range or its enum, or longer than its
// maximum length. The detail names the parameter, quotes the value (Quote)
// and says what is expected.
func (p param) check(v string) error {
	if v == "" {
		return refusedParam(BadQuery, p.name, "%s= is empty: give %s a value, or leave it out", p.name, p.name)
	}
	switch p.kind {
	case 'i':
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < p.min || n > p.max {
			what := "is not a whole number"
			if err == nil || isRange(err) {
				what = "is out of range"
			}
			return refusedParam(BadQuery, p.name, "%s=%s %s: %s takes an integer from %d to %d", p.name, Quote(v), what, p.name, p.min, p.max)
		}
	case 'b':
		if _, err := strconv.ParseBool(v); err != nil {
			return refusedParam(BadQuery, p.name, "%s=%s is not true or false", p.name, Quote(v))
		}
	}
	if len(p.enum) > 0 && !contains(p.enum, v) {
		return refusedParam(BadQuery, p.name, "%s=%s is not one of %s", p.name, Quote(v), strings.Join(p.enum, ", "))
	}
	if p.maxLen > 0 && len(v) > p.maxLen {
		if n := utf8.RuneCountInString(v); n > p.maxLen {
			return refusedParam(BadQuery, p.name, "%s=%s is %d characters long: %s takes at most %d", p.name, Quote(v), n, p.name, p.maxLen)
		}
	}
	return nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// shown is a JSON value as a client would have written it, shortened.
func shown(v any) string {
	switch v := v.(type) {
	case string:
		return Quote(v)
	case json.Number:
		return Shorten(string(v))
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return Shorten(fmt.Sprint(v))
}
