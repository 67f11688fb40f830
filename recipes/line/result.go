package line

import (
	"context"
	"errors"
)

// AcquireResult is the result label of an acquire's duration metric, the same
// for every recipe of a line: "granted" (err nil), "timeout" (err matches
// timeout, the recipe's not-granted-in-time error), "cancelled" (the client
// went away) or "error".
func AcquireResult(err, timeout error) string {
	switch {
	case err == nil:
		return "granted"
	case errors.Is(err, timeout):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	default:
		return "error"
	}
}
