package api

import "time"

// Suspended is how a followed state's suspension shows in its body: the
// `suspended` and `suspendedSince` fields, both absent when the state is not
// suspended (and `suspendedSince` absent when the session is lost rather than
// suspended: since is zero then).
func Suspended(suspended bool, since time.Time) (*bool, *time.Time) {
	if !suspended {
		return nil, nil
	}
	t := true
	if since.IsZero() {
		return &t, nil
	}
	s := since.UTC()
	return &t, &s
}
