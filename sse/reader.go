package sse

import (
	"bufio"
	"io"
	"strings"
)

// Reader parses a text/event-stream, the client side of Writer. It returns
// events with their id, name and data (data lines joined with "\n"); comments and
// unknown fields are skipped.
type Reader struct {
	sc *bufio.Scanner
}

// NewReader reads events from r (a response body). Its buffer starts small and
// grows with the longest line, up to 4 MiB.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 4<<20)
	return &Reader{sc: sc}
}

// Next returns the next event, or io.EOF when the stream ends cleanly (any other
// error when it breaks). A last event not closed by a blank line is dropped, as
// the SSE specification says.
func (r *Reader) Next() (Event, error) {
	var e Event
	var data []string
	seen := false
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if seen {
				e.Data = []byte(strings.Join(data, "\n"))
				return e, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			e.ID, seen = value, true
		case "event":
			e.Name, seen = value, true
		case "data":
			data, seen = append(data, value), true
		}
	}
	if err := r.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}
