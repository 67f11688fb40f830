//go:build !unix

package statedir

import (
	"errors"
	"os"
)

func mapShared(*os.File, int) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmap([]byte) error { return nil }
