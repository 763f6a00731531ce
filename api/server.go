package api

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronoq/chronoq/dashboard"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

// Defaults of [Config].
const (
	DefaultBodyLimit       = 1 << 20
	DefaultSSEHeartbeat    = 15 * time.Second
	DefaultMaxEventStreams = 1000
	DefaultMaxWaits        = 10_000
	readyTimeout           = 2 * time.Second
)

// Config configures a [Server]. Only Store is required.
type Config struct {
	// Store is the job engine, a *queue.Client: every role of store.go.
	// Required.
	Store Store
	// Engine is what the API reads of the engine beyond Store's roles.
	// Defaults to the *queue.Client's (plumbing.Of(Store)); required
	// when Store is something else.
	Engine Engine
	// Cron serves the /v1/cron routes, which are registered only when it
	// is set. Defaults to nil.
	Cron CronStore
	// Workflows serves the /v1/workflows routes, which are registered
	// only when it is set; a *workflow.Client. Defaults to nil.
	Workflows WorkflowStore
	// Push serves the /v1/queues/{queue}/config routes (push targets),
	// shows a queue's push config in GET /v1/queues/{queue}, and lets
	// enqueues give a target and callbacks; a *dispatch.Store. Defaults to
	// nil (none of this).
	Push PushStore
	// Hooks serves the /v1/webhooks routes (event webhook subscriptions
	// and their dead deliveries); a *dispatch.Hooks. Defaults to nil (no
	// such routes).
	Hooks HookStore
	// Token, when set, is the API token: every /v1 route and the dashboard
	// need "Authorization: Bearer <token>", or the dashboard's session
	// cookie (see [Server.ServeHTTP] and docs/DASHBOARD.md). /healthz and
	// /readyz stay open. Defaults to none (no authentication).
	Token string
	// MetricsAuth makes /metrics need the token too. Defaults to false
	// (/metrics open).
	MetricsAuth bool
	// BodyLimit caps a request body in bytes; larger is a 413. Defaults to
	// 1 MiB.
	BodyLimit int64
	// Clock is the source of time. Defaults to Store's Clock().
	Clock clockwork.Clock
	// Ready answers /readyz: nil when the store can serve. Defaults to a
	// PING through Store's Redis().
	Ready func(ctx context.Context) error
	// Dashboard, when set, serves GET / (dashboard.Handler() is chronoq's).
	// Defaults to dashboard.Placeholder(), a small page that points at the
	// API.
	Dashboard http.Handler
	// Routes are more routes, registered behind the same authentication as
	// the API's own (the demo's /v1/demo routes). Defaults to none.
	Routes []Route
	// RoutesOpenAPI documents Routes: an OpenAPI document of "tags",
	// "paths" and "components" only, merged into the one the server
	// serves (see [Server.OpenAPI]). Defaults to none.
	RoutesOpenAPI []byte
	// DisableCoalescing sends each single enqueue (POST /v1/jobs), claim,
	// complete and failure to the store, and each sighting of a worker to
	// the registry, in a script call of its own, instead of batching, per
	// queue (per worker), those that arrive while one is in flight. It is
	// for measuring what the batching gives; nothing waits on purpose
	// either way. Defaults to false.
	DisableCoalescing bool
	// MaxEventStreams caps the event streams open at once (each holds a
	// Redis subscription): GET /v1/events and the job streams (GET
	// /v1/queues/{queue}/jobs/{id}/stream) together; past it they answer
	// 503. Defaults to 1000.
	MaxEventStreams int
	// MaxWaits caps the requests that wait for a job's end at once (the
	// ?wait of GET /v1/queues/{queue}/jobs/{id} and of the enqueues),
	// each holding a connection and a goroutine, not a Redis connection
	// (see queue.Client.WaitEnded); past it they answer 503, and an
	// enqueue with a wait enqueues nothing. Defaults to 10,000.
	MaxWaits int
	// SSEHeartbeat is the interval of the comment lines that keep an event
	// stream open through proxies. Defaults to 15 s.
	SSEHeartbeat time.Duration
	// Logger receives errors. Defaults to slog.Default().
	Logger *slog.Logger
	// AllowedHosts are the host names (and addresses) a server without a
	// Token answers to in the Host header besides loopback names and
	// addresses and the address a request arrived at; a request with
	// another Host gets 421 Misdirected Request, so that a web page whose
	// name was rebound to this server's address cannot use it (see
	// host.go). chronoq serve passes its --listen host and
	// --allowed-hosts. Ignored with a Token. Defaults to none.
	AllowedHosts []string
	// Workers is the worker registry: the /v1/workers routes, the
	// worker_id of the worker calls and the chronoq_workers gauge
	// (registry.New over the same *queue.Client). Defaults to none: no
	// such routes, and worker_id is ignored.
	Workers *registry.Registry
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg Config
	e   *echo.Echo
	// The engine, by role (store.go): each handler uses the roles it needs.
	produce   Producer
	read      Reader
	manage    Manager
	consume   Consumer
	outputs   Outputs
	subscribe Subscriber
	engine    Engine
	cron      CronStore
	workers   *registry.Registry // nil: none
	clock     clockwork.Clock
	log       *slog.Logger
	metrics   *metrics
	token     [sha256.Size]byte
	session   [sha256.Size]byte // sha256 of the session cookie's value
	// hostNames and hostAddrs are Config.AllowedHosts (see hostPart).
	hostNames []string
	hostAddrs []netip.Addr
	enqueue   func(context.Context, queue.NewJob) (queue.Enqueued, error)
	// claimJobs claims, through a claimer or alone.
	claimJobs func(ctx context.Context, q string, o queue.ClaimOptions) ([]*queue.Job, error)
	// completeJob completes a job and answers it as the completion left
	// it (nil when not kept): through a completer, or alone.
	completeJob func(ctx context.Context, q string, a queue.Ack) (*queue.Job, error)
	// failJob records a failure and answers the job as it left it (in
	// FailResult.Job): through a failer, or alone.
	failJob func(ctx context.Context, q string, f queue.Failed) (queue.FailResult, error)
	// touch records a sighting of a worker in the registry and answers its
	// TTL (nil without one): through a toucher, or alone.
	touch func(ctx context.Context, id string, t registry.Touch) (time.Duration, error)
	// sightings keeps the HTTP workers' sightings a second before they
	// are written (nil without a registry, or without coalescing).
	sightings *sightings
	started   time.Time    // when New made the server, on its clock
	streams   atomic.Int64 // event streams open
	waits     atomic.Int64 // requests waiting for a job's end
	doc       []byte       // the OpenAPI document served

	// traced is the router wrapped in OpenTelemetry's HTTP server
	// instrumentation, when tracing was on at New (see tracing.go); nil
	// otherwise.
	traced http.Handler

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
	cfg.MaxWaits = cmp.Or(cfg.MaxWaits, DefaultMaxWaits)
	if cfg.Dashboard == nil {
		cfg.Dashboard = dashboard.Placeholder()
	}
	eng := cfg.Engine
	if eng == nil {
		qc, ok := cfg.Store.(*queue.Client)
		if !ok {
			return nil, fmt.Errorf("api: Config.Engine is required with a Store that is not a *queue.Client (a %T)", cfg.Store)
		}
		eng = plumbing.Of(qc)
	}
	if cfg.Clock == nil {
		cfg.Clock = eng.Clock()
	}
	if cfg.Ready == nil {
		rdb := eng.Redis()
		cfg.Ready = func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
	}
	st := cfg.Store
	s := &Server{cfg: cfg, produce: st, read: st, manage: st, consume: st, outputs: st, subscribe: st, engine: eng,
		cron: cfg.Cron, workers: cfg.Workers, clock: cfg.Clock, log: cmp.Or(cfg.Logger, slog.Default()), started: cfg.Clock.Now()}
	var err error
	if s.hostNames, s.hostAddrs, err = allowedHosts(cfg.AllowedHosts); err != nil {
		return nil, err
	}
	if cfg.Token != "" {
		s.token = sha256.Sum256([]byte(cfg.Token))
		s.session = sha256.Sum256([]byte(sessionValue(cfg.Token)))
	}
	s.drainCtx, s.drain = context.WithCancel(context.Background()) //nolint:gosec // G118: s.drain is called by Drain
	s.metrics = newMetrics(cfg.Store)
	if s.workers != nil {
		s.metrics.reg.MustRegister(&workersCollector{r: s.workers})
	}
	s.enqueue, s.claimJobs, s.completeJob, s.failJob = enqueueAlone(cfg.Store), cfg.Store.Claim, storeComplete(cfg.Store), storeFail(cfg.Store)
	if !cfg.DisableCoalescing {
		s.enqueue = newCoalescer(cfg.Store, s.log).Enqueue
		s.claimJobs = newClaimer(cfg.Store, s.log).Claim
		s.completeJob = newCompleter(cfg.Store, s.log).Complete
		s.failJob = newFailer(cfg.Store, s.log).Fail
	}
	if s.workers != nil {
		s.touch = s.workers.TouchTTL
		if !cfg.DisableCoalescing {
			s.touch = newToucher(s.workers, s.log).Touch
			s.sightings = newSightings(s.touch, s.clock, s.log)
		}
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.middleware) // not e.Pre: with any Pre middleware Echo builds a routing closure per request
	s.e = e
	s.traced = s.tracedHandler()
	s.routes()
	if s.doc, err = s.buildOpenAPI(); err != nil {
		return nil, err
	}
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.traced != nil {
		s.traced.ServeHTTP(w, r)
		return
	}
	s.e.ServeHTTP(w, r)
}

// Echo is the server's router, for tests and for adding routes.
func (s *Server) Echo() *echo.Echo { return s.e }

// Registry is the Prometheus registry that /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// ObservePromote records a promoter pass that moved jobs: pass it as
// delayed.Config.OnPromote.
func (s *Server) ObservePromote(queue string, moved int) {
	s.metrics.promoted.WithLabelValues(queue).Observe(float64(moved))
}

// Close writes to the registry the HTTP workers' sightings this server
// still keeps (see sightings): call it once the HTTP server has shut
// down, so that no request adds one after.
func (s *Server) Close(ctx context.Context) error {
	if s.sightings == nil {
		return nil
	}
	return s.sightings.flushAll(ctx)
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

// Route is a route added to the server by [Config.Routes]. Path is in
// Echo's form ("/v1/demo/:name"). Errors the handler returns are answered
// as the API's errors (an [*Error] as it is, anything else a 500).
type Route struct {
	Method, Path string
	Handler      echo.HandlerFunc
}

// route is one route of the API.
type route struct {
	method, path string
	h            echo.HandlerFunc
	open         bool // no token needed
}

func (s *Server) routes() {
	rs := []route{
		{http.MethodGet, "/", s.dashboard, true}, // checks the token itself: see dashboard
		{http.MethodGet, "/healthz", s.healthz, true},
		{http.MethodGet, "/readyz", s.readyz, true},
		{http.MethodGet, "/metrics", s.metricsHandler(), !s.cfg.MetricsAuth},
		{http.MethodGet, "/v1/openapi.json", s.openAPI, false},
		{http.MethodGet, "/v1/status", s.status, false},

		{http.MethodPost, "/v1/jobs", s.enqueueOne, false},
		{http.MethodPost, "/v1/jobs/batch", s.enqueueBatch, false},
		{http.MethodPost, "/v1/queues/:queue/jobs", s.enqueueOne, false},

		{http.MethodGet, "/v1/queues", s.listQueues, false},
		{http.MethodGet, "/v1/queues/:queue", s.getQueue, false},
		{http.MethodDelete, "/v1/queues/:queue", s.deleteQueue, false},
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

		// Artifacts, logs, progress (artifacts.go, stream.go).
		{http.MethodPut, "/v1/queues/:queue/jobs/:id/artifacts/:name", s.putArtifact, false},
		{http.MethodGet, "/v1/queues/:queue/jobs/:id/artifacts", s.getArtifacts, false},
		{http.MethodPost, "/v1/queues/:queue/jobs/:id/logs", s.appendLogs, false},
		{http.MethodGet, "/v1/queues/:queue/jobs/:id/logs", s.getLogs, false},
		{http.MethodGet, "/v1/queues/:queue/jobs/:id/stream", s.jobStream, false},
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
	rs = append(rs,
		route{http.MethodGet, "/v1/queues/:queue/limits", s.getLimits, false},
		route{http.MethodPut, "/v1/queues/:queue/limits", s.putLimits, false},
		route{http.MethodDelete, "/v1/queues/:queue/limits", s.deleteLimits, false},
		route{http.MethodGet, "/v1/queues/:queue/flow", s.getFlow, false},
		route{http.MethodPut, "/v1/queues/:queue/flow", s.putFlow, false},
		route{http.MethodDelete, "/v1/queues/:queue/flow", s.deleteFlow, false},
		route{http.MethodGet, "/v1/queues/:queue/flow/overrides", s.listFlowOverrides, false},
		route{http.MethodPut, "/v1/queues/:queue/flow/overrides/:key", s.putFlowOverride, false},
		route{http.MethodDelete, "/v1/queues/:queue/flow/overrides/:key", s.deleteFlowOverride, false},
		route{http.MethodGet, "/v1/queues/:queue/flow/keys", s.listFlowKeys, false},
		route{http.MethodGet, "/v1/queues/:queue/flow/keys/:key", s.getFlowKey, false},
	)
	if s.cfg.Push != nil {
		rs = append(rs,
			route{http.MethodGet, "/v1/queues/:queue/config", s.getPushConfig, false},
			route{http.MethodPut, "/v1/queues/:queue/config", s.putPushConfig, false},
			route{http.MethodDelete, "/v1/queues/:queue/config", s.deletePushConfig, false},
		)
	}
	if s.cfg.Hooks != nil {
		rs = append(rs, s.hookRoutes()...)
	}
	rs = append(rs, s.workersRoutes()...)
	if s.cfg.Workflows != nil {
		rs = append(rs,
			route{http.MethodPost, "/v1/workflows", s.enqueueWorkflow, false},
			route{http.MethodGet, "/v1/workflows", s.listWorkflows, false},
			route{http.MethodGet, "/v1/workflows/:id", s.getWorkflow, false},
			route{http.MethodPost, "/v1/workflows/:id/cancel", s.cancelWorkflow, false},
			route{http.MethodPost, "/v1/workflows/:id/retry", s.retryWorkflow, false},
		)
	}
	for _, r := range s.cfg.Routes {
		rs = append(rs, route{r.Method, r.Path, r.Handler, false})
	}
	for _, r := range rs {
		// The route's middleware wraps its handler here, once: Echo would
		// apply it anew to each request.
		h := r.h
		switch {
		case !r.open && s.cfg.Token != "":
			h = s.auth(h)
		case !r.open:
			h = noCrossSite(h)
		}
		s.e.Add(r.method, r.path, h)
	}
}

// auth lets a request through with the bearer token, or with the
// dashboard's session cookie; a state-changing request authenticated by
// the cookie must also come from the dashboard's own origin (see
// sameOrigin). Both are compared in constant time (both sides hashed
// first, so not even the length leaks).
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
			if !s.bearerOK(h) {
				return errUnauthenticated
			}
			return next(c)
		}
		if !s.cookieOK(r) {
			return errUnauthenticated
		}
		if stateChanging(r.Method) && !sameOrigin(r) {
			return errCrossOrigin
		}
		return next(c)
	}
}

// noCrossSite guards a server without a token: anyone who reaches it may
// change jobs, but a web page of another site, open in a browser on the
// same machine, may not. A state-changing request that a browser marks as
// coming from another origin (Origin, or Sec-Fetch-Site) is refused;
// clients that send neither (curl, workers) are not browsers.
func noCrossSite(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if stateChanging(r.Method) {
			o, site := r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")
			if (o != "" || (site != "" && site != "none")) && !sameOrigin(r) {
				return errCrossOrigin
			}
		}
		return next(c)
	}
}

func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// bearerOK checks an Authorization header.
func (s *Server) bearerOK(h string) bool {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return s.tokenOK(strings.TrimSpace(tok))
}

// tokenOK compares tok with the configured token in constant time.
func (s *Server) tokenOK(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

// cookieOK checks the dashboard's session cookie.
func (s *Server) cookieOK(r *http.Request) bool {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return false
	}
	sum := sha256.Sum256([]byte(ck.Value))
	return subtle.ConstantTimeCompare(sum[:], s.session[:]) == 1
}

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "chronoq_session"

// sessionValue is the session cookie's value for token: derived from it,
// so the token itself is not kept in the browser, and stable, so every
// instance that shares the token accepts the cookie.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("chronoq dashboard session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin reports whether a request comes from a page of this server:
// its Origin header is this request's own scheme and host, or, without an
// Origin, the browser says Sec-Fetch-Site: same-origin. A request with
// neither (not a browser's fetch) is refused: a cookie is the browser's
// credential.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		return o == scheme+"://"+r.Host
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

// middleware is every request's, routed or not (a 404, a 405): observe
// (count and time it), refuse a Host that does not name a server without
// a token (checkHost), refuse a path no operation of the OpenAPI document
// has (strictPath), limit the body (bodyLimit), turn a panic into a 500
// (recovered), and write the error of what failed at once (so that
// observe sees the status sent). One closure, not five: Echo applies its
// middleware anew to each request.
func (s *Server) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := s.clock.Now()
		if s.traced != nil {
			nameSpan(c)
		}
		err := s.checkHost(c)
		if err == nil {
			err = strictPath(c)
		}
		if err == nil {
			err = s.bodyLimit(c)
		}
		if err == nil {
			err = s.recovered(next, c)
		}
		if err != nil {
			s.handleError(err, c)
		}
		s.observe(c, start)
		return nil
	}
}

// strictPath answers 404 for a path with an empty segment ("//", or a
// trailing slash; "/" itself aside), which the router matches to a route
// with an empty parameter, or without the slash, and for a route
// parameter holding a "/" (the router lets a route's last parameter take
// the rest of the path, "/artifacts/a/b"): the OpenAPI document has no
// operation for either, and every path the server routes is one the
// document has. The path is read as sent (echo.GetPath), as the router
// reads it.
func strictPath(c echo.Context) error {
	if p := echo.GetPath(c.Request()); p != "/" && (strings.HasSuffix(p, "/") || strings.Contains(p, "//")) {
		return echo.ErrNotFound
	}
	for _, v := range c.ParamValues() {
		if strings.Contains(v, "/") {
			return echo.ErrNotFound
		}
	}
	return nil
}

// recovered runs next on c and turns its panic into a 500, logged with
// its stack.
func (s *Server) recovered(next echo.HandlerFunc, c echo.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http compares it
				panic(r)
			}
			s.log.Error("api: panic in handler", "method", c.Request().Method, "path", c.Request().URL.Path,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
		}
	}()
	return next(c)
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

// dashboard serves GET /. With a token configured it needs the token
// like any route, or: GET /?token=T with the right T sets the session
// cookie (HttpOnly, SameSite=Strict, Secure over TLS) and redirects to /,
// so the token leaves the address bar. A browser without a session, or
// with a wrong T, gets the sign-in page (a 401 whose form sends the token
// to GET /?token=); other clients the API's JSON 401.
func (s *Server) dashboard(c echo.Context) error {
	r := c.Request()
	h := c.Response().Header()
	h.Set("Referrer-Policy", "no-referrer") // the ?token= URL must not leak
	if s.cfg.Token != "" {
		if tok, ok := r.URL.Query()["token"]; ok {
			if len(tok) != 1 || !s.tokenOK(tok[0]) {
				return s.signIn(c, true)
			}
			//nolint:gosec // G124: Secure exactly when the request came over TLS; a loopback server speaks plain HTTP
			http.SetCookie(c.Response(), &http.Cookie{Name: SessionCookie, Value: sessionValue(s.cfg.Token), Path: "/",
				HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			h.Set("Cache-Control", "no-store")
			return c.Redirect(http.StatusSeeOther, "/")
		}
		next := func(echo.Context) error { return nil }
		if err := s.auth(next)(c); err != nil {
			if errors.Is(err, errUnauthenticated) {
				return s.signIn(c, false)
			}
			return err
		}
	}
	s.cfg.Dashboard.ServeHTTP(c.Response(), r)
	return nil
}

// signIn answers a request to / that is not signed in: the sign-in page
// for a browser (one that accepts HTML), the JSON 401 for any other
// client. wrong says a token was given and was not the server's.
func (s *Server) signIn(c echo.Context, wrong bool) error {
	if !strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/html") {
		return errUnauthenticated
	}
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="chronoq"`)
	dashboard.SignIn(c.Response(), c.Request(), wrong)
	return nil
}

// storeFail records one failure at a time, in a call of its own.
func storeFail(st failStore) func(context.Context, string, queue.Failed) (queue.FailResult, error) {
	return func(ctx context.Context, q string, f queue.Failed) (queue.FailResult, error) {
		f.ReturnJob = true
		res, errs, err := st.FailMany(ctx, q, []queue.Failed{f})
		if err != nil {
			return queue.FailResult{}, err
		}
		return res[0], errs[0]
	}
}

// storeComplete completes one job at a time, in a call of its own.
func storeComplete(st acker) func(context.Context, string, queue.Ack) (*queue.Job, error) {
	return func(ctx context.Context, q string, a queue.Ack) (*queue.Job, error) {
		a.ReturnJob = true
		jobs, errs, err := st.CompleteMany(ctx, q, []queue.Ack{a})
		if err != nil {
			return nil, err
		}
		return jobs[0], errs[0]
	}
}
