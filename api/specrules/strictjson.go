package specrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// maxDepth bounds how deep a body's arrays and objects nest (the schemas are
// two levels deep at most).
const maxDepth = 32

// decodeStrict decodes a body that must be exactly one JSON value, in one
// pass of the decoder's tokens (numbers as json.Number): a member given twice
// in one object (however it is escaped) is refused, naming it, instead of the
// last one silently winning; so is a body that is not JSON, nests deeper than
// maxDepth, or has more after its value. Every refusal is in the client's
// terms (where the body goes wrong), never the decoder's message.
func decodeStrict(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := decodeValue(dec, body, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, refused(BadBody, "the body has more data after its JSON value; send exactly one value")
	}
	return v, nil
}

// decodeValue decodes the next value of dec; at is its JSON pointer without
// the leading slash ("" at the top), depth how deep it is.
func decodeValue(dec *json.Decoder, body []byte, at string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, refused(BadBody, "the body nests deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, notJSON(err, body)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, notJSON(err, body)
			}
			k, _ := kt.(string)
			path := join(at, k)
			if _, dup := m[k]; dup {
				return nil, refusedParam(BadBody, path, "the body gives %s twice: give each field once", Quote(path))
			}
			if m[k], err = decodeValue(dec, body, path, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, notJSON(err, body)
		}
		return m, nil
	case '[':
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec, body, join(at, strconv.Itoa(len(a))), depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, notJSON(err, body)
		}
		return a, nil
	}
	return nil, refused(BadBody, "the body is not valid JSON (an unexpected %q)", string(d))
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "/" + k
}

// notJSON is the refusal of a body the decoder could not read: where it goes
// wrong, and the few bytes before.
func notJSON(err error, body []byte) *Refused {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(min(max(se.Offset, 0), int64(len(body))))
		from := max(0, off-20)
		return refused(BadBody, "the body is not valid JSON (it goes wrong at byte %d, after %s)", off, Quote(string(body[from:off])))
	}
	return refused(BadBody, "the body is not valid JSON (it ends before its value does)")
}

// checkTypes refuses the first value (in member name order, depth first) whose
// JSON type its schema does not allow, and an integer that is not a whole
// number or lies outside its format's range (int32, else int64), naming the
// member, the value sent and what the member takes: what the generated
// decoder would otherwise refuse in its own words. at is v's JSON pointer
// without the leading slash. The rest of the schema (bounds, enums, required
// members) is VisitJSON's.
func checkTypes(s *openapi3.Schema, v any, at string) *Refused {
	if s == nil || v == nil {
		return nil
	}
	if s.Type != nil && len(*s.Type) > 0 && at != "" {
		if r := checkType(s, v, at); r != nil {
			return r
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := declared(s)
		for _, k := range sortedKeys(v) {
			if p, ok := props[k]; ok {
				if r := checkTypes(p, v[k], join(at, k)); r != nil {
					return r
				}
			}
		}
	case []any:
		if s.Items != nil {
			for i, e := range v {
				if r := checkTypes(s.Items.Value, e, join(at, strconv.Itoa(i))); r != nil {
					return r
				}
			}
		}
	}
	return nil
}

// checkType checks one value's type against s's.
func checkType(s *openapi3.Schema, v any, at string) *Refused {
	t := s.Type
	ok := false
	switch v := v.(type) {
	case string:
		ok = t.Includes("string")
	case bool:
		ok = t.Includes("boolean")
	case map[string]any:
		ok = t.Includes("object")
	case []any:
		ok = t.Includes("array")
	case json.Number:
		if t.Includes("number") {
			return nil
		}
		if !t.Includes("integer") {
			break
		}
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if s.Format == "int32" {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		n, err := v.Int64()
		switch {
		case err == nil && n >= lo && n <= hi:
			return nil
		case err != nil && strings.ContainsAny(string(v), ".eE"):
			return refusedParam(BadBody, at, "%s is %s, not a whole number: %s takes an integer from %d to %d", Quote(at), shown(v), Quote(at), lo, hi)
		default:
			return refusedParam(BadBody, at, "%s is %s, out of range: %s takes an integer from %d to %d", Quote(at), shown(v), Quote(at), lo, hi)
		}
	}
	if ok {
		return nil
	}
	return refusedParam(BadBody, at, "%s is %s: %s takes %s", Quote(at), shown(v), Quote(at), typeNames(t))
}

// typeNames says what a schema's types are, "an integer or null".
func typeNames(t *openapi3.Types) string {
	var names []string
	for _, n := range *t {
		switch n {
		case "integer", "object", "array":
			names = append(names, "an "+n)
		case "null":
			names = append(names, "null")
		default:
			names = append(names, "a "+n)
		}
	}
	return strings.Join(names, " or ")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
