package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/dashboard"
	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/demo"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/internal/alarm"
	"github.com/chronoq/chronoq/internal/clockskew"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/internal/localredis"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/workflow"
)

// serveConfig is everything `chronoq serve` is told.
type serveConfig struct {
	listen       string
	redisURL     string
	redisCluster []string
	// dataDir and localRedis: the Redis serve runs itself when given none
	// (package internal/localredis): where it keeps its data, and which
	// ("" redis-server from the PATH else embedded, "embedded", "memory",
	// or a redis-server binary).
	dataDir     string
	localRedis  string
	token       string
	namespace   string
	insecure    bool
	metricsAuth bool
	// allowedHosts are the names (and addresses) a server without a token
	// answers to besides loopback ones, the address it is reached at and
	// the --listen host (api.Config.AllowedHosts).
	allowedHosts []string

	bodyLimit        int64
	maxCronEntries   int
	maxPayloadBytes  int
	maxQueues        int
	retention        time.Duration
	completedHistory int
	deadMaxJobs      int
	deadMaxAge       time.Duration
	idleQueueTTL     time.Duration
	idempotencyTTL   time.Duration
	reclaimInterval  time.Duration
	promoteMaxSleep  time.Duration
	reconcileEvery   time.Duration
	shutdownTimeout  time.Duration
	readTimeout      time.Duration

	workerTTL time.Duration // the registry's TTL of a worker that names none

	logFormat string
	logLevel  slog.Level

	noDispatch    bool   // run no dispatchers (push queues are served by other instances)
	dispatchAllow string // the SSRF guard's allow-list: CIDRs, IPs, host names

	demo        bool // `chronoq demo`: the simulated worker pool and /v1/demo
	demoWorkers int  // workers the demo starts with
}

// envFlags defines flags whose default comes from an environment variable
// when it is set: a flag given on the command line wins over it.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

// env reads variable env, and adds its name to usage.
func (e *envFlags) env(env, usage string) (string, string, bool) {
	v := e.getenv(env)
	return v, fmt.Sprintf("%s (env %s)", usage, env), v != ""
}

func (e *envFlags) String(p *string, name, env, def, usage string) {
	v, u, ok := e.env(env, usage)
	if !ok {
		v = def
	}
	e.fs.StringVar(p, name, v, u)
}

func (e *envFlags) Bool(p *bool, name, env string, usage string) {
	v, u, ok := e.env(env, usage)
	def := false
	if ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q: want true or false", env, v))
		}
		def = b
	}
	e.fs.BoolVar(p, name, def, u)
}

func (e *envFlags) Int(p *int, name, env string, def int, usage string) {
	v, u, ok := e.env(env, usage)
	if ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q: want an integer", env, v))
		}
		def = n
	}
	e.fs.IntVar(p, name, def, u)
}

func (e *envFlags) Int64(p *int64, name, env string, def int64, usage string) {
	v, u, ok := e.env(env, usage)
	if ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q: want an integer", env, v))
		}
		def = n
	}
	e.fs.Int64Var(p, name, def, u)
}

func (e *envFlags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	v, u, ok := e.env(env, usage)
	if ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q: want a duration such as 30s or 1h", env, v))
		}
		def = d
	}
	e.fs.DurationVar(p, name, def, u)
}

// parseServe reads the flags and the environment of `chronoq serve`.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	return parseServeFlags("serve", args, getenv, stderr)
}

// parseServeFlags reads the flags of `chronoq serve` or, for name "demo",
// of `chronoq demo`: the same, and the demo's own.
func parseServeFlags(name string, args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	var t serveFlagText
	fs := flag.NewFlagSet("chronoq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := &envFlags{fs: fs, getenv: getenv}
	defineServeFlags(e, name, &c, &t)
	if err := errors.Join(e.errs...); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return c, checkServeConfig(&c, t, getenv)
}

// serveFlagText holds the flags read as text that checkServeConfig turns
// into serveConfig's fields.
type serveFlagText struct {
	cluster, level, hosts string
}

// defineServeFlags defines serve's flags (and, for name "demo", the
// demo's own) on e, each writing to its field of c or t.
func defineServeFlags(e *envFlags, name string, c *serveConfig, t *serveFlagText) {
	e.String(&c.listen, "listen", "CHRONOQ_LISTEN", "127.0.0.1:8080", "address to listen on; other than loopback only with --token (or --insecure)")
	e.String(&c.redisURL, "redis-url", "REDIS_URL", "", "Redis to use: redis://[user:password@]host:port[/db] or rediss:// for TLS; with --redis-cluster only its credentials and TLS are used. Empty: a Redis of serve's own that keeps its data in --data-dir (see --local-redis)")
	defaultLocal := ""
	if name == "demo" {
		defaultLocal = localredis.FormMemory // a demo's jobs are not worth keeping
	}
	e.String(&c.localRedis, "local-redis", "CHRONOQ_LOCAL_REDIS", defaultLocal, "without --redis-url: the Redis to run. Empty: redis-server from the PATH, started as a child with an append-only file (fsync always) in --data-dir, else the embedded in-memory Redis saved to a snapshot there on stop; \"embedded\" for the latter; \"memory\" for the embedded one keeping nothing; or the path of a redis-server binary")
	e.String(&c.dataDir, "data-dir", "CHRONOQ_DATA_DIR", "", "without --redis-url: where the local Redis keeps its data (default $XDG_STATE_HOME/chronoq, or ~/.local/state/chronoq); one chronoq a directory")
	e.String(&t.cluster, "redis-cluster", "CHRONOQ_REDIS_CLUSTER", "", "Redis Cluster seed addresses, comma-separated host:port")
	e.String(&c.token, "token", "CHRONOQ_TOKEN", "", "API token: /v1 and the dashboard need \"Authorization: Bearer <token>\" (the dashboard: open /?token=<token> once)")
	e.String(&c.namespace, "namespace", "CHRONOQ_NAMESPACE", queue.DefaultNamespace, "prefix of every Redis key")
	e.Bool(&c.insecure, "insecure", "CHRONOQ_INSECURE", "allow listening beyond loopback without a token")
	e.String(&t.hosts, "allowed-hosts", "CHRONOQ_ALLOWED_HOSTS", "", "without --token, the Host names (and addresses) the server answers to besides loopback ones, the --listen host and the address a request reaches it at, comma-separated; another Host is a 421 (against DNS rebinding). Ignored with --token")
	e.Bool(&c.metricsAuth, "metrics-auth", "CHRONOQ_METRICS_AUTH", "make /metrics need the token too")
	e.Int64(&c.bodyLimit, "body-limit", "CHRONOQ_BODY_LIMIT", api.DefaultBodyLimit, "largest request body in bytes")
	e.Int(&c.maxCronEntries, "max-cron-entries", "CHRONOQ_MAX_CRON_ENTRIES", cron.DefaultMaxEntries, "most cron entries (past it creating one is a 409)")
	e.Duration(&c.workerTTL, "worker-ttl", "CHRONOQ_WORKER_TTL", registry.DefaultTTL, "how long an HTTP worker that names no ttl (and a simulated worker of chronoq demo) stays in the registry after its last call (1s to 1h)")
	storeFlags(e, c)
	e.Duration(&c.readTimeout, "read-timeout", "CHRONOQ_READ_TIMEOUT", 30*time.Second, "longest time to receive a request, headers and body")
	e.Duration(&c.shutdownTimeout, "shutdown-timeout", "CHRONOQ_SHUTDOWN_TIMEOUT", 30*time.Second, "longest wait for requests under way at shutdown")
	e.String(&c.logFormat, "log-format", "CHRONOQ_LOG_FORMAT", "text", "log format: text or json")
	e.String(&t.level, "log-level", "CHRONOQ_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	e.Bool(&c.noDispatch, "no-dispatch", "CHRONOQ_NO_DISPATCH", "run no push dispatchers here (run 'chronoq dispatch' elsewhere)")
	e.String(&c.dispatchAllow, "dispatch-allow", "CHRONOQ_DISPATCH_ALLOW", "", "push targets the SSRF guard lets through although internal: CIDRs, IPs and host names, comma-separated (\"127.0.0.1,10.0.0.0/8,api.internal\")")
	if name == "demo" {
		c.demo = true
		e.Int(&c.demoWorkers, "workers", "CHRONOQ_DEMO_WORKERS", 0, "simulated workers to start with (the page changes it)")
	}
}

// checkServeConfig checks c's values and fills the fields read as text:
// the numbers in their ranges, the lists, the local Redis's directory, the
// log settings and the listen address.
func checkServeConfig(c *serveConfig, t serveFlagText, getenv func(string) string) error {
	if c.maxCronEntries < 1 {
		return fmt.Errorf("--max-cron-entries %d: want at least 1", c.maxCronEntries)
	}
	if c.demoWorkers < 0 || c.demoWorkers > demo.MaxSize {
		return fmt.Errorf("--workers %d: want 0 to %d", c.demoWorkers, demo.MaxSize)
	}
	for a := range strings.SplitSeq(t.cluster, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.redisCluster = append(c.redisCluster, a)
		}
	}
	for h := range strings.SplitSeq(t.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if err := api.CheckHost(h); err != nil {
				return fmt.Errorf("--allowed-hosts: %w", err)
			}
			c.allowedHosts = append(c.allowedHosts, h)
		}
	}
	if c.redisURL == "" && len(c.redisCluster) == 0 && c.localRedis != localredis.FormMemory && c.dataDir == "" {
		c.dataDir, _ = localredis.DefaultDir(getenv) // none (no HOME): connect says to name one
	}
	if err := c.logLevel.UnmarshalText([]byte(t.level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", t.level)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", c.logFormat)
	}
	return checkListen(c)
}

// checkListen refuses a listen address beyond loopback without a token
// (unless --insecure), and adds the address's host to the names the server
// answers to.
func checkListen(c *serveConfig) error {
	host, _, err := net.SplitHostPort(c.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", c.listen, err)
	}
	if !isLoopback(host) && c.token == "" && !c.insecure {
		return fmt.Errorf("refusing to listen on %s without an API token: anyone who reaches it could run and delete jobs. "+
			"Set --token (or CHRONOQ_TOKEN), listen on 127.0.0.1, or pass --insecure", c.listen)
	}
	if host != "" {
		c.allowedHosts = append(c.allowedHosts, host) // the listen address names this server
	}
	return nil
}

// isLoopback reports whether host (of a listen address) is loopback only.
// An empty host listens on every interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newLogger(c serveConfig, w io.Writer) *slog.Logger {
	o := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

func runServe(ctx context.Context, args []string, env func(string) string, _, stderr io.Writer) int {
	return runServeAs(ctx, "serve", args, env, stderr)
}

func runDemo(ctx context.Context, args []string, env func(string) string, _, stderr io.Writer) int {
	return runServeAs(ctx, "demo", args, env, stderr)
}

func runServeAs(ctx context.Context, name string, args []string, env func(string) string, stderr io.Writer) int {
	return runServeHooked(ctx, name, args, env, stderr, serveHooks{})
}

// runServeHooked is runServeAs with hooks (tests: onListen).
func runServeHooked(ctx context.Context, name string, args []string, env func(string) string, stderr io.Writer, hooks serveHooks) int {
	c, err := parseServeFlags(name, args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "chronoq %s: %v\n", name, err)
		return 2
	}
	log := newLogger(c, stderr)
	// A clock wrong on purpose, for the chaos battery's skew scenario; not
	// among the documented settings.
	clock, skew, err := clockskew.FromEnv(env)
	if err != nil {
		fmt.Fprintf(stderr, "chronoq %s: %v\n", name, err)
		return 2
	}
	if clock != nil {
		hooks.clock = clock
		log.Warn("this instance's clock is skewed on purpose ("+clockskew.Env+"): for tests only", "skew", skew)
	}
	// Before the parts are made: the API server instruments itself when
	// tracing is on as it is built.
	stopTracing, err := setupTracing(ctx, env)
	if err != nil {
		fmt.Fprintf(stderr, "chronoq %s: %v\n", name, err)
		return 2
	}
	if stopTracing != nil {
		log.Info("tracing on: spans are exported over OTLP/HTTP (OTEL_* environment)")
		defer func() {
			// Once every part has stopped: the spans they ended are flushed.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
			defer cancel()
			if err := stopTracing(fctx); err != nil {
				log.Warn("flushing the last spans", "err", err)
			}
		}()
	}
	if err := serve(ctx, c, log, hooks); err != nil {
		log.Error("chronoq "+name+": stopped", "err", err)
		return 1
	}
	return 0
}

// serveHooks let tests drive serve.
type serveHooks struct {
	clock       clockwork.Clock   // defaults to alarm.Real()
	followClock bool              // Redis's clock follows clock, a test's fake (queue.Config.FollowClock)
	onListen    func(addr string) // called once the listener is open
}

// connect opens the Redis connection serve uses, starting a local Redis
// (package internal/localredis) when none is configured; its first log
// line says which Redis it is, and where the data is. release releases it
// all, stopping the local Redis.
func connect(ctx context.Context, c serveConfig, log *slog.Logger) (rdb redis.UniversalClient, release func(), err error) {
	switch {
	case len(c.redisCluster) > 0:
		o := &redis.ClusterOptions{Addrs: c.redisCluster, DialerRetries: 2}
		if c.redisURL != "" {
			u, err := redis.ParseURL(c.redisURL)
			if err != nil {
				return nil, nil, fmt.Errorf("--redis-url: %w", err)
			}
			o.Username, o.Password, o.TLSConfig = u.Username, u.Password, u.TLSConfig
		}
		cl := redis.NewClusterClient(o)
		log.Info("using Redis Cluster", "seeds", c.redisCluster, "tls", o.TLSConfig != nil)
		return cl, func() { _ = cl.Close() }, nil
	case c.redisURL != "":
		o, err := redis.ParseURL(c.redisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("--redis-url: %w", err)
		}
		o.DialerRetries = 2 // answer 503 quickly while Redis is away
		cl := redis.NewClient(o)
		log.Info("using Redis", "addr", o.Addr, "db", o.DB, "tls", o.TLSConfig != nil)
		return cl, func() { _ = cl.Close() }, nil
	}
	if c.dataDir == "" && c.localRedis != localredis.FormMemory {
		return nil, nil, errors.New("neither XDG_STATE_HOME nor HOME is set: name a data directory (--data-dir or CHRONOQ_DATA_DIR), or give a Redis (--redis-url)")
	}
	local, err := localredis.Start(ctx, localredis.Config{Dir: c.dataDir, Server: c.localRedis})
	if err != nil {
		return nil, nil, err
	}
	switch local.Form {
	case localredis.FormServer:
		log.Info("no --redis-url or REDIS_URL: running a redis-server of its own; every acknowledged job is kept in its append-only file (fsync always) in the data directory",
			"data_dir", local.Dir, "redis_server", local.Binary, "addr", local.Addr())
	case localredis.FormEmbedded:
		log.Warn("no --redis-url or REDIS_URL, and no redis-server on the PATH: using an embedded in-memory Redis, "+
			"saved to the data directory when chronoq stops and loaded when it starts. A crash or kill -9 loses what changed since the start. "+
			"Install redis-server (it is then run with an append-only file there) or set REDIS_URL (or --redis-url) to keep every job.",
			"data_dir", local.Dir, "snapshot", local.DataPath)
	default:
		log.Warn("no --redis-url or REDIS_URL: using an embedded in-memory Redis (--local-redis memory). " +
			"Jobs live only as long as this process: everything is lost when it stops. " +
			"Set REDIS_URL (or --redis-url) or leave --local-redis empty to keep them.")
	}
	for _, n := range local.Notes {
		log.Warn(n, "data_dir", local.Dir)
	}
	o := local.Options()
	o.DialerRetries = 2
	cl := redis.NewClient(o)
	exited := local.Exited()
	stopWatch := make(chan struct{})
	if exited != nil {
		go func() {
			select {
			case <-exited:
				log.Error("the redis-server of this chronoq exited: requests answer 503; restart chronoq", "log", local.Dir+"/redis/redis.log")
			case <-stopWatch:
			}
		}()
	}
	return cl, func() {
		close(stopWatch)
		_ = cl.Close()
		if err := local.Close(); err != nil {
			log.Error("stopping the local Redis", "err", err)
		} else if local.Form != localredis.FormMemory {
			log.Info("local Redis stopped, its data kept", "data_dir", local.Dir, "form", local.Form)
		}
	}, nil
}

// storeFlags are the flags of the job store and of its background parts
// (promoter, reclaimer): serve's and dispatch's, so that every instance
// keeps and promotes jobs alike.
func storeFlags(e *envFlags, c *serveConfig) {
	e.Int(&c.maxPayloadBytes, "max-payload-bytes", "CHRONOQ_MAX_PAYLOAD_BYTES", queue.DefaultMaxPayloadBytes, "largest job payload or result in bytes")
	e.Int(&c.maxQueues, "max-queues", "CHRONOQ_MAX_QUEUES", queue.DefaultMaxQueues, "most queues")
	e.Duration(&c.retention, "retention", "CHRONOQ_RETENTION", queue.DefaultRetention, "how long a completed job is kept when it names no result_ttl")
	e.Int(&c.completedHistory, "completed-history", "CHRONOQ_COMPLETED_HISTORY", queue.DefaultCompletedHistory, "completed job ids listed per queue")
	e.Int(&c.deadMaxJobs, "dead-max-jobs", "CHRONOQ_DEAD_MAX_JOBS", queue.DefaultDeadMaxJobs, "most dead jobs kept per queue (the oldest go first)")
	e.Duration(&c.deadMaxAge, "dead-max-age", "CHRONOQ_DEAD_MAX_AGE", queue.DefaultDeadMaxAge, "how long a dead job is kept")
	e.Duration(&c.idleQueueTTL, "idle-queue-ttl", "CHRONOQ_IDLE_QUEUE_TTL", queue.DefaultIdleQueueTTL, "how long an empty queue nothing is enqueued into is kept")
	e.Duration(&c.idempotencyTTL, "idempotency-ttl", "CHRONOQ_IDEMPOTENCY_TTL", queue.DefaultIdempotencyTTL, "how long an idempotency key is remembered")
	e.Duration(&c.reclaimInterval, "reclaim-interval", "CHRONOQ_RECLAIM_INTERVAL", 5*time.Second, "time between reclaim sweeps")
	e.Duration(&c.promoteMaxSleep, "promote-max-sleep", "CHRONOQ_PROMOTE_MAX_SLEEP", time.Second, "longest promoter sleep over a queue with jobs scheduled (the most a lost wake-up delays a job)")
	e.Duration(&c.reconcileEvery, "reconcile-interval", "CHRONOQ_RECONCILE_INTERVAL", queue.DefaultReconcileInterval, "how often the promoter and the reclaimer look at every queue, not only those their index names")
}

// limitWaitMetric is chronoq_limit_wait_seconds_total: the time claims
// (the dispatchers', the API's) spent held back by queues' limits.
func limitWaitMetric(client *queue.Client) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chronoq_limit_wait_seconds_total",
		Help: "Time claims and waits of this instance spent held back by queues' rate and in-flight limits."},
		func() float64 { return plumbing.Of(client).LimitWait().Seconds() })
}

// storeConfig is the queue client's config from the flags of storeFlags.
func storeConfig(c serveConfig, rdb redis.UniversalClient, clock clockwork.Clock) queue.Config {
	return queue.Config{Redis: rdb, Namespace: c.namespace, Clock: clock,
		MaxPayloadBytes: c.maxPayloadBytes, MaxQueues: c.maxQueues, Retention: c.retention,
		CompletedHistory: c.completedHistory, DeadMaxJobs: c.deadMaxJobs, DeadMaxAge: c.deadMaxAge, IdleQueueTTL: c.idleQueueTTL,
		IdempotencyTTL: c.idempotencyTTL}
}

// serve runs the API, the promoter and the reclaimer until ctx ends, then
// shuts them down gracefully.
func serve(ctx context.Context, c serveConfig, log *slog.Logger, hooks serveHooks) error {
	clock := hooks.clock
	if clock == nil {
		clock = alarm.Real() // the promoter's waits end on a kernel timer
	}
	rdb, closeRedis, err := connect(ctx, c, log)
	if err != nil {
		return err
	}
	defer closeRedis()
	p, err := newServeParts(c, rdb, clock, hooks.followClock, log)
	if err != nil {
		return err
	}
	defer p.client.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		// Not fatal: the API answers 503 until Redis answers.
		log.Warn("Redis does not answer yet; serving 503s until it does", "err", err)
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	return p.run(ctx, c, ln, log, hooks)
}

// serveParts are the parts serve runs: the API server and the background
// parts, on one queue client.
type serveParts struct {
	client        *queue.Client
	srv           *api.Server
	pool          *demo.Pool // chronoq demo's simulated workers; nil for serve
	dispatcher    *dispatch.Dispatcher
	promoter      *delayed.Promoter
	reclaimer     *queue.Reclaimer
	releaser      *workflow.Releaser
	scheduler     *cron.Scheduler
	workflowSteps *prometheus.CounterVec
	workflows     *workflow.Client
	guard         dispatch.Guard
}

// newServeParts makes the parts serve runs from its config.
func newServeParts(c serveConfig, rdb redis.UniversalClient, clock clockwork.Clock, followClock bool, log *slog.Logger) (*serveParts, error) {
	qc := storeConfig(c, rdb, clock)
	qc.FollowClock = followClock
	client, err := queue.NewClient(qc)
	if err != nil {
		return nil, err
	}
	p := &serveParts{client: client}
	if err = p.buildAPI(c, log); err == nil {
		err = p.buildBackground(c, clock, log)
	}
	if err != nil {
		client.Close()
		return nil, err
	}
	return p, nil
}

// buildAPI makes the API server, its stores, and chronoq demo's pool.
func (p *serveParts) buildAPI(c serveConfig, log *slog.Logger) error {
	client := p.client
	workers, err := registry.New(client, registry.Config{TTL: c.workerTTL})
	if err != nil {
		return fmt.Errorf("--worker-ttl: %w", err)
	}
	p.workflowSteps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chronoq_workflow_steps_total",
		Help: "Steps this instance applied to workflow nodes' jobs that took effect: release, cancel, abort, rearm."}, []string{"step"})
	p.workflows, err = workflow.New(workflow.Config{Queue: client, OnApplied: func(r workflow.Step) {
		if r.Code == 1 {
			p.workflowSteps.WithLabelValues(r.Mode).Inc()
		}
	}})
	if err != nil {
		return err
	}
	var routes []api.Route
	var routesDoc []byte
	if c.demo {
		// The simulated workers are in the registry, on --worker-ttl.
		if p.pool, err = demo.New(demo.Config{Client: client, Logger: log, Registry: workers, Workflows: p.workflows}); err != nil {
			return err
		}
		routes, routesDoc = p.pool.Routes(), demo.OpenAPI()
	}
	if p.guard, err = dispatch.ParseAllow(c.dispatchAllow); err != nil {
		return err
	}
	p.srv, err = api.New(api.Config{Store: client, Cron: cron.NewStore(client, cron.WithMaxEntries(c.maxCronEntries)), Push: dispatch.NewStore(client, p.guard),
		Hooks:     dispatch.NewHooks(client, p.guard),
		Workflows: p.workflows, Token: c.token, AllowedHosts: c.allowedHosts, MetricsAuth: c.metricsAuth, Workers: workers,
		BodyLimit: c.bodyLimit, Logger: log, Dashboard: dashboard.Handler(), Routes: routes,
		RoutesOpenAPI: routesDoc})
	return err
}

// buildBackground makes the parts that run beside the API: the
// releaser, the dispatcher (unless --no-dispatch), the promoter, the
// reclaimer and the cron scheduler.
func (p *serveParts) buildBackground(c serveConfig, clock clockwork.Clock, log *slog.Logger) error {
	client := p.client
	var err error
	if p.releaser, err = workflow.NewReleaser(workflow.ReleaserConfig{Client: p.workflows, ReconcileInterval: c.reconcileEvery, Logger: log}); err != nil {
		return err
	}
	if !c.noDispatch {
		if p.dispatcher, err = dispatch.New(dispatch.Config{Client: client, Guard: p.guard, ShutdownTimeout: c.shutdownTimeout,
			Registerer: p.srv.Registry(), Logger: log}); err != nil {
			return err
		}
	}
	if p.promoter, err = delayed.NewPromoter(delayed.Config{Source: client.Source(), Clock: clock, MaxSleep: c.promoteMaxSleep, ReconcileInterval: c.reconcileEvery,
		OnPromote: p.srv.ObservePromote, Logger: log}); err != nil {
		return err
	}
	if p.reclaimer, err = queue.NewReclaimer(queue.ReclaimerConfig{Client: client, Interval: c.reclaimInterval, ReconcileInterval: c.reconcileEvery, Logger: log}); err != nil {
		return err
	}
	p.scheduler, err = cron.NewScheduler(cron.Config{Client: client, Clock: clock, Logger: log})
	return err
}

// run serves the API on ln and runs the background parts until ctx ends,
// then shuts them down: the HTTP server first, then the demo's pool, then
// the background parts.
func (p *serveParts) run(ctx context.Context, c serveConfig, ln net.Listener, log *slog.Logger, hooks serveHooks) error {
	// ReadTimeout bounds receiving a request (a client trickling its body
	// cannot hold a handler for ever); net/http lifts it once the body is
	// read, so event streams and long polls outlive it. No WriteTimeout:
	// they outlive any.
	hs := &http.Server{Handler: p.srv, ReadTimeout: c.readTimeout, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	hs.RegisterOnShutdown(p.srv.Drain) // event streams and long polls end at once

	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()
	background, err := p.start(bg, c, log)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("chronoq serving", "addr", ln.Addr().String(), "namespace", c.namespace, "auth", c.token != "")
	if c.demo {
		page := "http://" + ln.Addr().String() + "/"
		if c.token != "" {
			page += "?token=<your token>"
		}
		log.Info("demo: open the dashboard", "url", page, "queue", p.pool.Queue())
	}
	if hooks.onListen != nil {
		hooks.onListen(ln.Addr().String())
	}

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case serveErr = <-served:
		log.Error("http server failed", "err", serveErr)
	}
	p.shutdown(ctx, c, hs, background, log)
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// start starts the demo's pool and the background parts, each a Run(ctx)
// until shutdown, and registers the metrics they answer.
func (p *serveParts) start(bg context.Context, c serveConfig, log *slog.Logger) (*lifecycle.Group, error) {
	if p.pool != nil {
		if err := p.pool.Start(bg); err != nil {
			return nil, err
		}
		if err := p.pool.Configure(demo.Settings{Size: c.demoWorkers, Latency: 300 * time.Millisecond, FailRate: 0.1}); err != nil {
			return nil, err
		}
	}
	background := &lifecycle.Group{}
	background.Start(bg, "cron", p.scheduler)
	background.Start(bg, "promoter", p.promoter)
	background.Start(bg, "reclaimer", p.reclaimer)
	background.Start(bg, "releaser", p.releaser) // workflows: moves their graphs on (package workflow)
	if p.dispatcher != nil {
		background.Start(bg, "dispatcher", p.dispatcher)
	}
	client, reg := p.client, p.srv.Registry()
	watchClock(bg, client, reg, log)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chronoq_attention_mark_failures_total",
		Help: "Changes whose attention-index update failed (Redis unreachable then): each waits for the next reconcile or a claim."},
		func() float64 { return float64(plumbing.Of(client).MarkFailures()) }))
	reg.MustRegister(limitWaitMetric(client))
	reg.MustRegister(p.workflowSteps)
	return background, nil
}

// shutdown stops the HTTP server (its requests under way get
// --shutdown-timeout), the demo's pool and the background parts.
func (p *serveParts) shutdown(ctx context.Context, c serveConfig, hs *http.Server, background *lifecycle.Group, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if err := p.srv.Close(sctx); err != nil {
		log.Warn("recording the HTTP workers' last sightings", "err", err)
	}
	if p.pool != nil {
		if err := p.pool.Stop(sctx); err != nil {
			log.Warn("demo pool stop", "err", err)
		}
	}
	// The dispatcher's requests under way get --shutdown-timeout of their
	// own (the HTTP shutdown may have used sctx's); then a little longer
	// for it to hand back the rest.
	bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout+5*time.Second)
	defer bcancel()
	if err := background.Stop(bctx); err != nil {
		log.Warn("background stop", "err", err)
	}
	log.Info("stopped")
}

// watchClock exposes the distance between this instance's clock and
// Redis's (chronoq_redis_clock_offset_seconds: how far Redis's is ahead)
// and logs a warning, at most once a minute, while it is over
// api.ClockOffsetWarning (a second; GET /v1/status and the dashboard flag
// it from the same threshold).
// chronoq decides nothing by this instance's clock (the scripts read
// Redis's), but a clock that far off is a host to fix: logs and metrics
// carry its times.
func watchClock(ctx context.Context, client *queue.Client, reg *prometheus.Registry, log *slog.Logger) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chronoq_redis_clock_offset_seconds",
		Help: "How far Redis's clock is ahead of this instance's (negative: behind), estimated from script round trips."},
		func() float64 { return plumbing.Of(client).RedisClock().Offset.Seconds() }))
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			// Measured here too: an instance that claims and promotes
			// nothing still knows its clock.
			_, _ = plumbing.Of(client).MeasureRedisClock(ctx)
			if d := plumbing.Of(client).RedisClock().Offset; d > api.ClockOffsetWarning || d < -api.ClockOffsetWarning {
				log.Warn("this instance's clock is off from Redis's; chronoq keeps time by Redis's, fix the host's clock (NTP)",
					"redis_ahead_by", d)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}
