package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chronoq/chronoq/queue"
)

// Bounds of one scrape: its Redis reads, and the queues it reports (the
// first by name).
const (
	scrapeTimeout   = 5 * time.Second
	maxScrapeQueues = 1000
	// maxScrapeFlowKeys is the most flow keys of a queue with series of
	// their own (chronoq_flow_key_jobs): the ones with the most jobs, so
	// that a queue's keys (tenants, users: any number) never become a
	// label set as large.
	maxScrapeFlowKeys = 10
)

type metrics struct {
	reg          *prometheus.Registry
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	processing   *prometheus.HistogramVec
	lateness     *prometheus.HistogramVec
	promoted     *prometheus.HistogramVec
	routes       sync.Map // routeKey -> *routeMetrics
}

func newMetrics(r Reader) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chronoq_http_requests_total",
			Help: "HTTP requests answered, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chronoq_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template and method (long polls, waits for a job's end and event streams included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100 µs to 26 s
		}, []string{"route", "method"}),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chronoq_job_processing_seconds",
			Help:    "From claim to completion of jobs completed over HTTP, by queue.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16), // 5 ms to 164 s
		}, []string{"queue"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chronoq_job_lateness_seconds",
			Help:    "Scheduling lateness of jobs claimed over HTTP (claimed_at - run_at), by queue.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms to 33 s
		}, []string{"queue"}),
		promoted: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chronoq_promoter_batch_size",
			Help:    "Jobs moved from scheduled to pending by one promoter pass, by queue.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 to 512 (a batch is at most 500)
		}, []string{"queue"}),
	}
	m.reg.MustRegister(m.httpRequests, m.httpDuration, m.processing, m.lateness, m.promoted,
		&queueCollector{r: r, flow: flowReaderOf(r)},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (s *Server) metricsHandler() echo.HandlerFunc {
	h := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return echo.WrapHandler(h)
}

// observe counts and times a request, answered, that began at start, by
// its route template.
func (s *Server) observe(c echo.Context, start time.Time) {
	method := c.Request().Method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // a client's made-up method must not grow the label set
	}
	k := routeKey{path: c.Path(), method: method, code: c.Response().Status}
	rm, ok := s.metrics.routes.Load(k)
	if !ok {
		route := k.path
		if route == "" || route == "/*" || strings.HasSuffix(route, "/*") {
			route = "unmatched"
		} else {
			route = echoParam(route)
		}
		rm, _ = s.metrics.routes.LoadOrStore(k, &routeMetrics{
			requests: s.metrics.httpRequests.WithLabelValues(route, method, strconv.Itoa(k.code)),
			duration: s.metrics.httpDuration.WithLabelValues(route, method),
		})
	}
	m := rm.(*routeMetrics) //nolint:forcetypeassert // the map holds nothing else
	m.requests.Inc()
	m.duration.Observe(s.clock.Since(start).Seconds())
}

// routeKey names the metrics of a request: its route as Echo has it
// (registered routes only: a bounded set), its method (the known ones,
// or "other") and its status code.
type routeKey struct {
	path, method string
	code         int
}

// routeMetrics are a routeKey's series, looked up once: finding them by
// their labels on each request would be most of observe's cost.
type routeMetrics struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// queueCollector reads every queue's depths and totals from Redis at
// scrape time: statsParallel queues at a time, within scrapeTimeout, at
// most maxScrapeQueues of them; and, when the store lists flow keys, each
// of those queues' count of flow keys with work and its top
// maxScrapeFlowKeys keys' jobs.
type queueCollector struct {
	r    Reader
	flow flowKeysReader // nil: the store has no flow keys
}

// flowKeysReader lists a queue's flow keys with work, the most first
// (queue.Client.FlowKeys).
type flowKeysReader interface {
	FlowKeys(ctx context.Context, queue string, offset, limit int) ([]queue.FlowKeyStats, int64, error)
}

// flowReaderOf is r's flow key listing, nil when r has none.
func flowReaderOf(r Reader) flowKeysReader {
	f, _ := r.(flowKeysReader)
	return f
}

var (
	descDepth = prometheus.NewDesc("chronoq_queue_jobs",
		"Jobs in a queue now, by status (scheduled, pending, processing, dead).", []string{"queue", "status"}, nil)
	descPaused = prometheus.NewDesc("chronoq_queue_paused",
		"1 when the queue is paused.", []string{"queue"}, nil)
	descOldest = prometheus.NewDesc("chronoq_queue_oldest_pending_age_seconds",
		"How long the next job to be claimed has been due.", []string{"queue"}, nil)
	descTotal = prometheus.NewDesc("chronoq_jobs_total",
		"Jobs by outcome since the queue was first used (enqueued, promoted, completed, failed, retried, reclaimed, dead), from the queue's totals in Redis: the same on every instance.",
		[]string{"queue", "outcome"}, nil)
	descFlowKeys = prometheus.NewDesc("chronoq_flow_keys",
		"Flow keys of a queue with jobs pending or processing.", []string{"queue"}, nil)
	descFlowKeyJobs = prometheus.NewDesc("chronoq_flow_key_jobs",
		"Jobs of a flow key now, by state (pending, in_flight), for the 10 keys of each queue with the most jobs only (the others have no series: see chronoq_flow_keys and GET /v1/queues/{queue}/flow/keys).",
		[]string{"queue", "key", "state"}, nil)
	descUp = prometheus.NewDesc("chronoq_store_up",
		"1 when the scrape could read the queues from Redis.", nil, nil)
)

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descPaused, descOldest, descTotal, descFlowKeys, descFlowKeyJobs, descUp} {
		ch <- d
	}
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	stats, err := allStats(ctx, q.r, maxScrapeQueues)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	for _, s := range stats {
		for status, n := range map[string]int64{"scheduled": s.Scheduled, "pending": s.Pending,
			"processing": s.Processing, "dead": s.Dead} {
			ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(n), s.Queue, status)
		}
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, paused, s.Queue)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, s.OldestPendingAge.Seconds(), s.Queue)
		for outcome, n := range map[string]int64{"enqueued": s.EnqueuedTotal, "promoted": s.PromotedTotal,
			"completed": s.CompletedTotal, "failed": s.FailedTotal, "retried": s.RetriedTotal,
			"reclaimed": s.ReclaimedTotal, "dead": s.DeadTotal} {
			ch <- prometheus.MustNewConstMetric(descTotal, prometheus.CounterValue, float64(n), s.Queue, outcome)
		}
	}
	if q.flow != nil {
		q.collectFlow(ctx, ch, stats)
	}
}

// collectFlow reports each queue's flow keys with work and the jobs of
// its top maxScrapeFlowKeys keys, statsParallel queues at a time. A
// queue whose keys cannot be read has no flow series in this scrape.
func (q *queueCollector) collectFlow(ctx context.Context, ch chan<- prometheus.Metric, stats []queue.Stats) {
	type flow struct {
		keys  []queue.FlowKeyStats
		total int64
		err   error
	}
	out := make([]flow, len(stats))
	sem := make(chan struct{}, statsParallel)
	var wg sync.WaitGroup
	for i, s := range stats {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].keys, out[i].total, out[i].err = q.flow.FlowKeys(ctx, s.Queue, 0, maxScrapeFlowKeys)
		})
	}
	wg.Wait()
	for i, s := range stats {
		f := out[i]
		if f.err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descFlowKeys, prometheus.GaugeValue, float64(f.total), s.Queue)
		for _, k := range f.keys[:min(len(f.keys), maxScrapeFlowKeys)] {
			ch <- prometheus.MustNewConstMetric(descFlowKeyJobs, prometheus.GaugeValue, float64(k.Pending), s.Queue, k.Key, "pending")
			ch <- prometheus.MustNewConstMetric(descFlowKeyJobs, prometheus.GaugeValue, float64(k.InFlight), s.Queue, k.Key, "in_flight")
		}
	}
}
