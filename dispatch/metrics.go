package dispatch

import (
	"errors"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the dispatcher: request durations, outcomes by status class.
type metrics struct {
	duration *prometheus.HistogramVec
	outcomes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chronoq_dispatch_duration_seconds",
			Help:    "Push requests from send to the end of the response body, by queue.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"queue"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chronoq_dispatch_requests_total",
			Help: "Push requests by queue and by class: 2xx, 3xx, 4xx, 5xx, timeout, refused (SSRF guard), error (no response).",
		}, []string{"queue", "class"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.duration, m.outcomes} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, err
				}
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(a Attempt) {
	m.duration.WithLabelValues(a.Queue).Observe(a.Duration / 1000)
	m.outcomes.WithLabelValues(a.Queue, classOf(a)).Inc()
}

func classOf(a Attempt) string {
	switch {
	case a.Status >= 100:
		return strconv.Itoa(a.Status/100) + "xx"
	case strings.HasPrefix(a.Error, "timed out"):
		return "timeout"
	case strings.Contains(a.Error, ErrRefused.Error()):
		return "refused"
	}
	return "error"
}
