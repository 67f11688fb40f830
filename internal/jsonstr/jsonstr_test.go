package jsonstr

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// Append writes every string as encoding/json does: control characters,
// quotes, backslashes, HTML characters, U+2028/U+2029 and invalid UTF-8
// included.
func TestAppendAsEncodingJSON(t *testing.T) {
	alphabet := []string{"a", "é", "\"", "\\", "<", ">", "&", "\n", "\x00", "\x1f", "\u2028", "\u2029", "\xff", "\xe2\x80", "日", "\t"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		s := ""
		for range rng.IntN(12) {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, want %s", s, got, want)
		}
	}
}
