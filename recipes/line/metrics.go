package line

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Metrics are the metrics of a recipe whose holders wait in a line (a lock, a
// semaphore): its acquisitions' durations by result (AcquireResult), the
// grants its leases hold, the acquisitions under way, and the things it
// follows with one watch each (kit.NewFollowers).
type Metrics struct {
	Acquire *prometheus.HistogramVec
	Held    prometheus.Gauge
	Waiting prometheus.Gauge
	Watched prometheus.Gauge
}

// Metric is a metric's name and help text.
type Metric struct{ Name, Help string }

// MetricNames name and explain each of a recipe's Metrics.
type MetricNames struct{ Acquire, Held, Waiting, Watched Metric }

// NewMetrics registers a recipe's line Metrics on reg, as names says.
func NewMetrics(reg prometheus.Registerer, names MetricNames) Metrics {
	f := promauto.With(reg)
	gauge := func(m Metric) prometheus.Gauge { return f.NewGauge(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}) }
	return Metrics{
		Acquire: kit.WaitSeconds(f, names.Acquire.Name, names.Acquire.Help, "result"),
		Held:    gauge(names.Held),
		Waiting: gauge(names.Waiting),
		Watched: gauge(names.Watched),
	}
}
