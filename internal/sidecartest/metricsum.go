package sidecartest

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// MetricSum is the sum of every series of the metric name on car's /metrics,
// with labels or without (0 when there is none).
func MetricSum(t testing.TB, car *Sidecar, name string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(string(car.Must(t, http.StatusOK, http.MethodGet, "/metrics").Raw), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}
