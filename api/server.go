package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
)

// Defaults of [Config].
const (
	DefaultBodyLimit       = 1 << 20
	DefaultSSEHeartbeat    = 15 * time.Second
	DefaultMaxEventStreams = 1000
	readyTimeout           = 2 * time.Second
)

// Config configures a [Server]. Only Store is required.
type Config struct {
	// Store is the job engine, a *queue.Client. Required.
	Store Store
	// Manager serves the routes that manage single jobs and the dead set.
	// Defaults to Store when it implements Manager; without one those
	// routes answer 501.
	Manager Manager
	// Cron serves the /v1/cron routes, which are registered only when it
	// is set. Defaults to nil.
	Cron CronStore
	// Token, when set, is the API token: every /v1 route and the dashboard
	// need "Authorization: Bearer <token>". /healthz and /readyz stay open.
	// Defaults to none (no authentication).
	Token string
	// MetricsAuth makes /metrics need the token too. Defaults to false
	// (/metrics open).
	MetricsAuth bool
	// BodyLimit caps a request body in bytes; larger is a 413. Defaults to
	// 1 MiB.
	BodyLimit int64
	// Clock is the source of time. Defaults to Store's Clock() when it has
	// one, else the real clock.
	Clock clockwork.Clock
	// Ready answers /readyz: nil when the store can serve. Defaults to a
	// PING through Store's Redis() when it has one, else always ready.
	Ready func(ctx context.Context) error
	// Dashboard, when set, serves GET /. Defaults to a small page that
	// points at the API.
	Dashboard http.Handler
	// DisableCoalescing sends each single enqueue (POST /v1/jobs) to the
	// store on its own instead of batching those that arrive together.
	// Defaults to false.
	DisableCoalescing bool
	// MaxEventStreams caps the event streams open at once (each holds a
	// Redis subscription); past it GET /v1/events answers 503. Defaults to
	// 1000.
	MaxEventStreams int
	// SSEHeartbeat is the interval of the comment lines that keep an event
	// stream open through proxies. Defaults to 15 s.
	SSEHeartbeat time.Duration
	// Logger receives errors. Defaults to slog.Default().
	Logger *slog.Logger
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg     Config
	e       *echo.Echo
	store   Store
	manager Manager
	cron    CronStore
	clock   clockwork.Clock
	log     *slog.Logger
	metrics *metrics
	token   [sha256.Size]byte
	enqueue func(context.Context, queue.NewJob) (queue.Enqueued, error)
	streams atomic.Int64 // event streams open

	drainOnce sync.Once
	drainCtx  context.Context
	drain     context.CancelFunc
}

// New checks cfg, fills its defaults and registers the routes.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("api: Config.Store is required")
	}
	cfg.BodyLimit = cmp.Or(cfg.BodyLimit, DefaultBodyLimit)
	if cfg.BodyLimit < 0 {
		return nil, errors.New("api: Config.BodyLimit must not be negative")
	}
	cfg.SSEHeartbeat = cmp.Or(cfg.SSEHeartbeat, DefaultSSEHeartbeat)
	cfg.MaxEventStreams = cmp.Or(cfg.MaxEventStreams, DefaultMaxEventStreams)
	if cfg.Clock == nil {
		if c, ok := cfg.Store.(interface{ Clock() clockwork.Clock }); ok {
			cfg.Clock = c.Clock()
		} else {
			cfg.Clock = clockwork.NewRealClock()
		}
	}
	if cfg.Ready == nil {
		if r, ok := cfg.Store.(interface{ Redis() redis.UniversalClient }); ok {
			rdb := r.Redis()
			cfg.Ready = func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
		} else {
			cfg.Ready = func(context.Context) error { return nil }
		}
	}
	if cfg.Manager == nil {
		cfg.Manager, _ = cfg.Store.(Manager)
	}
	s := &Server{cfg: cfg, store: cfg.Store, manager: cfg.Manager, cron: cfg.Cron, clock: cfg.Clock,
		log: cmp.Or(cfg.Logger, slog.Default())}
	if cfg.Token != "" {
		s.token = sha256.Sum256([]byte(cfg.Token))
	}
	s.drainCtx, s.drain = context.WithCancel(context.Background())
	s.metrics = newMetrics(cfg.Store)
	s.enqueue = cfg.Store.Enqueue
	if !cfg.DisableCoalescing {
		s.enqueue = newCoalescer(cfg.Store, s.log).Enqueue
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observe, s.writeErrors, s.recover, s.bodyLimit)
	s.e = e
	s.routes()
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.e.ServeHTTP(w, r) }

// Echo is the server's router, for tests and for adding routes.
func (s *Server) Echo() *echo.Echo { return s.e }

// Registry is the Prometheus registry that /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// ObservePromote records a promoter pass that moved jobs: pass it as
// delayed.Config.OnPromote.
func (s *Server) ObservePromote(queue string, moved int) {
	s.metrics.promoted.WithLabelValues(queue).Observe(float64(moved))
}

// Drain ends the event streams and long-polling claims under way, and
// those that start later, at once: a claim answers what it has (usually no
// job), a stream ends. Register it with http.Server.RegisterOnShutdown so
// that Shutdown does not wait for them.
func (s *Server) Drain() { s.drainOnce.Do(s.drain) }

// streamContext is the request's context, also ended by Drain.
func (s *Server) streamContext(c echo.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.Request().Context())
	stop := context.AfterFunc(s.drainCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// route is one route of the API.
type route struct {
	method, path string
	h            echo.HandlerFunc
	open         bool // no token needed
}

func (s *Server) routes() {
	rs := []route{
		{http.MethodGet, "/", s.dashboard, false},
		{http.MethodGet, "/healthz", s.healthz, true},
		{http.MethodGet, "/readyz", s.readyz, true},
		{http.MethodGet, "/metrics", s.metricsHandler(), !s.cfg.MetricsAuth},
		{http.MethodGet, "/v1/openapi.json", s.openAPI, false},

		{http.MethodPost, "/v1/jobs", s.enqueueOne, false},
		{http.MethodPost, "/v1/jobs/batch", s.enqueueBatch, false},
		{http.MethodPost, "/v1/queues/:queue/jobs", s.enqueueOne, false},

		{http.MethodGet, "/v1/queues", s.listQueues, false},
		{http.MethodGet, "/v1/queues/:queue", s.getQueue, false},
		{http.MethodGet, "/v1/queues/:queue/jobs", s.listJobs, false},
		{http.MethodGet, "/v1/queues/:queue/jobs/:id", s.getJob, false},
		{http.MethodPatch, "/v1/queues/:queue/jobs/:id", s.rescheduleJob, false},
		{http.MethodDelete, "/v1/queues/:queue/jobs/:id", s.cancelJob, false},
		{http.MethodPost, "/v1/queues/:queue/jobs/:id/retry", s.retryJob, false},
		{http.MethodPost, "/v1/queues/:queue/pause", s.pauseQueue, false},
		{http.MethodPost, "/v1/queues/:queue/resume", s.resumeQueue, false},
		{http.MethodPost, "/v1/queues/:queue/reclaim", s.reclaimQueue, false},
		{http.MethodPost, "/v1/queues/:queue/dead/retry", s.requeueDead, false},
		{http.MethodDelete, "/v1/queues/:queue/dead", s.purgeDead, false},

		{http.MethodPost, "/v1/queues/:queue/claim", s.claim, false},
		{http.MethodPost, "/v1/queues/:queue/jobs/:id/complete", s.complete, false},
		{http.MethodPost, "/v1/queues/:queue/jobs/:id/fail", s.fail, false},
		{http.MethodPost, "/v1/queues/:queue/jobs/:id/heartbeat", s.heartbeat, false},
		{http.MethodPost, "/v1/queues/:queue/jobs/:id/cancel", s.cancelClaimed, false},

		{http.MethodGet, "/v1/events", s.events, false},
	}
	if s.cron != nil {
		rs = append(rs,
			route{http.MethodGet, "/v1/cron", s.listCron, false},
			route{http.MethodPut, "/v1/cron/:name", s.putCron, false},
			route{http.MethodGet, "/v1/cron/:name", s.getCron, false},
			route{http.MethodDelete, "/v1/cron/:name", s.deleteCron, false},
			route{http.MethodPost, "/v1/cron/:name/trigger", s.triggerCron, false},
		)
	}
	for _, r := range rs {
		var mw []echo.MiddlewareFunc
		if !r.open && s.cfg.Token != "" {
			mw = append(mw, s.auth)
		}
		s.e.Add(r.method, r.path, r.h, mw...)
	}
}

// auth checks the bearer token in constant time (both sides hashed first,
// so not even the length leaks).
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return errUnauthenticated
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			return errUnauthenticated
		}
		return next(c)
	}
}

// writeErrors writes a handler's error at once, so that observe sees the
// status that was sent.
func (s *Server) writeErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := next(c); err != nil {
			s.handleError(err, c)
		}
		return nil
	}
}

// recover turns a panic of a handler into a 500, logged with its stack.
func (s *Server) recover(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("api: panic in handler", "method", c.Request().Method, "path", c.Request().URL.Path,
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
			}
		}()
		return next(c)
	}
}

func (s *Server) healthz(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	if err := s.cfg.Ready(ctx); err != nil {
		s.log.Warn("api: not ready", "err", err)
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the job store (Redis) does not answer", err: err}
	}
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI is the OpenAPI 3 document of the API, as served at
// /v1/openapi.json.
func OpenAPI() []byte { return openAPIDoc }

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}

const dashboardPlaceholder = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>chronoq</title></head>
<body style="font-family:sans-serif;max-width:40em;margin:2em auto">
<h1>chronoq</h1>
<p>The scheduled job queue is running. The API is under <code>/v1</code>
(<a href="/v1/openapi.json">OpenAPI document</a>); queues are listed at
<a href="/v1/queues"><code>/v1/queues</code></a>, metrics at
<a href="/metrics"><code>/metrics</code></a>.</p>
</body></html>
`

func (s *Server) dashboard(c echo.Context) error {
	if s.cfg.Dashboard != nil {
		s.cfg.Dashboard.ServeHTTP(c.Response(), c.Request())
		return nil
	}
	return c.HTML(http.StatusOK, dashboardPlaceholder)
}
