package service

import (
	"os"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }
