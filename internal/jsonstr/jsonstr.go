// Package jsonstr writes a Go string as a JSON string exactly as
// encoding/json writes it (HTML characters and U+2028/U+2029 escaped, invalid
// UTF-8 as U+FFFD), without reflection or allocation: for the hot answers of
// the API and the state directory's records.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s as a JSON string exactly as encoding/json's
// Encoder writes it (HTML escaping on, its default): <, >, & and control
// characters as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if safe(c) {
				continue
			}
			b = appendEscaped(append(b, s[start:i-1]...), c)
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i-size]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i-size]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			continue
		}
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// safe tells whether the ASCII byte c stands as itself in a JSON string.
func safe(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendEscaped appends the escape of the ASCII byte c.
func appendEscaped(b []byte, c byte) []byte {
	switch c {
	case '\\', '"':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}
