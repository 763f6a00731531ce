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
	// hooks counts event webhook requests by outcome: delivered, retry,
	// dead.
	hooks *prometheus.CounterVec
	// hooksDropped counts events a subscription had no room for.
	hooksDropped prometheus.Counter
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
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chronoq_webhook_requests_total",
			Help: "Event webhook requests by outcome: delivered (2xx), retry (sent again after a backoff), dead (no more attempts).",
		}, []string{"outcome"}),
		hooksDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chronoq_webhook_dropped_total",
			Help: "Events not delivered because a subscription held its cap of pending deliveries.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.duration, m.outcomes, m.hooks, m.hooksDropped} {
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
