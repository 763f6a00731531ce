package dispatch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/worker"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a [Dispatcher]. Client is required.
type Config struct {
	// Client is the queue store. Required.
	Client *queue.Client
	// Guard is the SSRF guard: which addresses may be dialled. The zero
	// Guard refuses every special address.
	Guard Guard
	// RefreshInterval is how often the push configs are read again (a new
	// push queue is served, a removed one dropped, a changed target used,
	// within it). Defaults to 2 s.
	RefreshInterval time.Duration
	// HeartbeatInterval is how often a job's lease is extended while its
	// request is under way. Defaults to a third of the job's visibility.
	HeartbeatInterval time.Duration
	// ShutdownTimeout is how long, once Run's ctx has ended, the requests
	// under way may finish before their jobs go back to pending. Defaults
	// to worker.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Registerer, when set, registers the dispatch metrics.
	Registerer prometheus.Registerer
	// Logger receives errors. Defaults to slog.Default().
	Logger *slog.Logger
	// OnAttempt, when set, is called after each request with what it did
	// (tests, metrics); keep it quick.
	OnAttempt func(Attempt)
	// HookInterval is how often the event webhook outboxes are read and
	// the due deliveries sent (see Hooks). Defaults to
	// DefaultHookInterval.
	HookInterval time.Duration
	// OnHookAttempt, when set, is called after each event webhook request
	// with what it did; keep it quick.
	OnHookAttempt func(HookAttempt)
}

// Attempt is one request of a job, as its note records it.
type Attempt struct {
	Queue    string    `json:"-"`
	JobID    string    `json:"-"`
	Attempt  int       `json:"attempt"`
	Fence    int64     `json:"fence"`
	At       time.Time `json:"at"`
	URL      string    `json:"url"`
	Status   int       `json:"status,omitempty"` // 0: no response
	Duration float64   `json:"duration_ms"`
	Error    string    `json:"error,omitempty"`
	// Outcome is where the attempt sends the job: "completed", "retry",
	// "retry_after" or "dead".
	Outcome string `json:"outcome"`
	// respBody is a failed attempt's response body as JSON (as bodyJSON
	// makes it), for the failure callback's response.body; not noted.
	respBody json.RawMessage
}

// Caps of the dispatcher.
const (
	// MaxResultBytes caps the response body kept as a completed job's result.
	MaxResultBytes = 64 << 10
	// MaxRetryAfter caps a receiver's Retry-After.
	MaxRetryAfter = time.Hour
	// errorBodyBytes is how much of a failed response's body its error quotes.
	errorBodyBytes = 512
	defaultRefresh = 2 * time.Second
	dialTimeout    = 10 * time.Second
)

// Dispatcher sends the jobs of every push queue to their targets: one
// worker (package worker) per push queue, whose handler is the request.
// Run it (it runs once).
type Dispatcher struct {
	cfg     Config
	client  *queue.Client
	store   *Store
	http    *http.Client
	log     *slog.Logger
	clock   clockwork.Clock
	metrics *metrics
	notes   *notes
	hooks   *Hooks
	// hooksOn are the queues the last Sync of the hooks left on.
	hooksOn atomic.Pointer[[]string]
	// hookBusy holds the ids of the subscriptions whose deliveries are
	// being sent (see hookPass).
	hookBusy sync.Map

	configs atomic.Pointer[map[string]QueueConfig]
	// deadSeen is, per push queue, the newest death sweepDead has seen
	// (Run's goroutine only).
	deadSeen map[string]time.Time

	// refreshSeq numbers the Refresh calls in the order they begin their
	// read of the configs; applied is the number of the last one applied
	// (under mu). A Refresh whose read began before the one applied last
	// holds an older view and applies nothing: two calls at once (the
	// periodic one and a caller's) must not let the older view stop the
	// worker of a queue the newer one started, handing its running jobs
	// back for another attempt.
	refreshSeq atomic.Uint64
	applied    uint64

	mu       sync.Mutex
	workers  map[string]*served
	ctx      context.Context // Run's; nil before Run
	dropping sync.WaitGroup  // the stops of workers whose queue was dropped
}

type served struct {
	h           *lifecycle.Handle // the worker's Run
	concurrency int
	labels      []string // the config's labels (canonical): a change starts a new worker
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Client == nil {
		return nil, errors.New("dispatch: Config.Client is required")
	}
	cfg.RefreshInterval = cmp.Or(cfg.RefreshInterval, defaultRefresh)
	cfg.HookInterval = cmp.Or(cfg.HookInterval, DefaultHookInterval)
	d := &Dispatcher{cfg: cfg, client: cfg.Client, store: NewStore(cfg.Client, cfg.Guard),
		log: cmp.Or(cfg.Logger, slog.Default()), clock: plumbing.Of(cfg.Client).Clock(), workers: map[string]*served{}}
	d.http = newHTTPClient(cfg.Guard)
	d.notes = newNotes(cfg.Client)
	d.hooks = NewHooks(cfg.Client, cfg.Guard)
	empty := map[string]QueueConfig{}
	d.configs.Store(&empty)
	var err error
	if d.metrics, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	return d, nil
}

// newHTTPClient is the dispatcher's client: the guard dials, no proxy
// from the environment (it would dial in the guard's place), and no
// redirect is followed.
func newHTTPClient(g Guard) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           g.dialer(dialTimeout),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// Store is the dispatcher's config store.
func (d *Dispatcher) Store() *Store { return d.store }

// Hooks is the dispatcher's event webhook subscriptions.
func (d *Dispatcher) Hooks() *Hooks { return d.hooks }

// Run reads the configs and serves the push queues, reading them again
// every RefreshInterval, until ctx ends. Then it stops every queue's
// worker at once: each claims no more, lets the requests under way finish
// for ShutdownTimeout and hands the rest back to pending. It answers the
// workers' stop errors (nil on a clean stop). A dispatcher runs once: a
// second Run answers an error at once. Run follows the convention of
// package internal/lifecycle.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.ctx != nil {
		d.mu.Unlock()
		return errors.New("dispatch: a dispatcher runs once")
	}
	d.ctx = ctx
	d.mu.Unlock()
	d.deadSeen = map[string]time.Time{}
	look := func() {
		if err := d.Refresh(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("dispatch: reading push configs", "err", err)
		}
		d.sweepDead(ctx, slices.Collect(maps.Keys(*d.configs.Load())))
		if err := d.syncHooks(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("dispatch: setting the queues' hooks", "err", err)
		}
	}
	look()
	var hooks sync.WaitGroup
	hooks.Go(func() { d.hookLoop(ctx) })
	t := d.clock.NewTicker(d.cfg.RefreshInterval)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.Chan():
			look()
		}
	}
	t.Stop()
	hooks.Wait()
	d.mu.Lock()
	ws := d.workers
	d.workers = map[string]*served{}
	d.mu.Unlock()
	var all []error
	for q, s := range ws {
		// Each worker's Run bounds its own stop by ShutdownTimeout.
		if err := s.h.Stop(context.Background()); err != nil {
			all = append(all, fmt.Errorf("queue %s: %w", q, err))
		}
	}
	d.dropping.Wait()
	d.http.CloseIdleConnections()
	return errors.Join(all...)
}

// testHookRefreshRead is the tests' seam into Refresh: it is called with
// the dispatcher between a Refresh's read of the configs and its apply.
// It does nothing; the package's tests set it once, before any test runs,
// to hold up the Refresh of a dispatcher of their own.
var testHookRefreshRead = func(*Dispatcher) {}

// Refresh reads the push configs now: queues that became push queues are
// served, queues that stopped being one are dropped. Before Run and after
// it ended, it only reads them.
func (d *Dispatcher) Refresh(ctx context.Context) error {
	seq := d.refreshSeq.Add(1)
	all, err := d.store.All(ctx)
	if err != nil {
		return err
	}
	testHookRefreshRead(d)
	d.mu.Lock()
	defer d.mu.Unlock()
	if seq < d.applied {
		return nil // a newer view was applied meanwhile
	}
	d.applied = seq
	d.configs.Store(&all)
	if d.ctx == nil || d.ctx.Err() != nil {
		return nil
	}
	for q, s := range d.workers {
		if c, ok := all[q]; !ok || c.Concurrency != s.concurrency || !slices.Equal(c.Labels, s.labels) {
			delete(d.workers, q)
			d.dropping.Go(func() {
				if err := s.h.Stop(context.Background()); err != nil {
					d.log.Warn("dispatch: stopping the worker of a queue", "queue", q, "err", err)
				}
			})
		}
	}
	for q, c := range all {
		if _, ok := d.workers[q]; ok {
			continue
		}
		w, err := worker.New(worker.Config{Client: d.client, Handler: worker.HandlerFunc(d.work), ID: WorkerID(q),
			Labels: c.Labels, Queues: []worker.QueueConfig{{Name: q}}, Concurrency: c.Concurrency, MaxClaim: min(c.Concurrency, 100),
			HeartbeatInterval: d.cfg.HeartbeatInterval, ShutdownTimeout: d.cfg.ShutdownTimeout, Logger: d.log})
		if err != nil {
			return err
		}
		d.workers[q] = &served{h: lifecycle.Start(d.ctx, w), concurrency: c.Concurrency, labels: c.Labels}
	}
	return nil
}

// work is the handler: one request.
func (d *Dispatcher) work(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
	cfg, ok := (*d.configs.Load())[job.Queue]
	if !ok {
		// The config was removed since the claim: hand the job back as a
		// failure, retried (it waits for a config, or a pull worker).
		return nil, errors.New("dispatch: the queue has no push config any more")
	}
	body, target, kind := job.Payload, cfg.Target, job.Kind
	var env Envelope
	if job.Kind == EnvelopeKind {
		// Checked as the enqueue checks it, but for the address, which the
		// dialler checks after DNS: a job enqueued past that check (a Go
		// caller's, or one stored before it) is sent only if it passes.
		e, t, err := checkEnvelope(Guard{Disabled: true}, job.Payload)
		if err != nil {
			msg := "the job's push envelope is not valid: " + err.Error()
			return nil, d.finish(ctx, job, env, Attempt{Error: msg}, nil, worker.SkipRetry(errors.New("dispatch: "+msg)))
		}
		env, body, kind = e, e.Body, e.Kind
		if t != nil {
			target = *t
		}
	}
	if target.URL == "" {
		return nil, d.finish(ctx, job, env, Attempt{Error: "no target: neither the queue nor the job has a URL"}, nil,
			worker.SkipRetry(errors.New("dispatch: no target: neither the queue nor the job has a URL")))
	}
	a, res, err := d.send(ctx, job, kind, body, target, cfg.Secrets)
	return res, d.finish(ctx, job, env, a, res, err)
}

// finish notes the attempt on the job and enqueues the callback its end
// calls for, then answers err.
func (d *Dispatcher) finish(ctx context.Context, job *queue.Job, env Envelope, a Attempt, res json.RawMessage, err error) error {
	a.Queue, a.JobID, a.Attempt, a.Fence = job.Queue, job.ID, job.Attempts, job.Fence
	if a.At.IsZero() {
		a.At = d.clock.Now().UTC()
	}
	final := err == nil || job.Attempts >= job.MaxAttempts || worker.IsSkipRetry(err)
	_, after := worker.RetryAfterOf(err)
	switch {
	case err == nil:
		a.Outcome = "completed"
	case final:
		a.Outcome = "dead"
	case after:
		a.Outcome = "retry_after"
	default:
		a.Outcome = "retry"
	}
	line, _ := json.Marshal(a)
	if nerr := d.notes.note(context.WithoutCancel(ctx), job.Queue, plumbing.NoteItem{ID: job.ID, Token: job.Token, Line: string(line)}); nerr != nil {
		d.log.Debug("dispatch: noting an attempt", "queue", job.Queue, "id", job.ID, "err", nerr)
	}
	d.metrics.observe(a)
	if d.cfg.OnAttempt != nil {
		d.cfg.OnAttempt(a)
	}
	if final && env.CallbackOf == "" {
		url := env.CallbackURL
		if err != nil {
			url = env.FailureCallbackURL
		}
		if url != "" {
			d.enqueueCallback(ctx, job, a, res, url)
		}
	}
	return err
}

// send makes the request and maps its outcome: the attempt, the result
// of a 2xx, and the error that decides where the job goes.
func (d *Dispatcher) send(ctx context.Context, job *queue.Job, kind string, body []byte, t Target, secrets []string) (a Attempt, res json.RawMessage, err error) {
	a = Attempt{URL: t.URL, At: d.clock.Now().UTC()}
	rctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, t.Method, t.URL, bytes.NewReader(body))
	if err != nil {
		a.Error = "bad request: " + err.Error()
		return a, nil, worker.SkipRetry(fmt.Errorf("dispatch: %s", a.Error))
	}
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "chronoq-dispatch")
	ts := d.clock.Now()
	sig, err := Sign(secrets, job.ID, ts, body)
	if err != nil {
		a.Error = "signing: " + err.Error()
		return a, nil, fmt.Errorf("dispatch: %s", a.Error)
	}
	req.Header.Set(HeaderID, job.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderQueue, job.Queue)
	req.Header.Set(HeaderJobID, job.ID)
	req.Header.Set(HeaderAttempt, strconv.Itoa(job.Attempts))
	req.Header.Set(HeaderFence, strconv.FormatInt(job.Fence, 10))
	if kind != "" {
		req.Header.Set(HeaderKind, kind)
	}
	var span trace.Span
	if tr, on := tracing.Tracer(); on {
		span = startSpan(tr, req, job)
		defer func() { endSpan(span, a) }()
	}
	start := time.Now()
	resp, err := d.http.Do(req)
	var respBody []byte
	truncated := false
	if err == nil {
		respBody, err = io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
		_ = resp.Body.Close()
		if len(respBody) > MaxResultBytes {
			respBody, truncated = respBody[:MaxResultBytes], true
		}
	}
	elapsed := time.Since(start)
	a.Duration = float64(elapsed.Microseconds()) / 1000
	if err != nil && resp == nil {
		return a, nil, d.transportError(ctx, rctx, &a, t, err)
	}
	a.Status = resp.StatusCode
	if err != nil { // the body broke off: a failure like a connection error
		a.Error = fmt.Sprintf("HTTP %d, then reading the body: %v", resp.StatusCode, err)
		return a, nil, errors.New("dispatch: " + a.Error)
	}
	return d.mapStatus(&a, resp, respBody, truncated, elapsed)
}

func (d *Dispatcher) transportError(ctx, rctx context.Context, a *Attempt, t Target, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRefused):
		a.Error = t.Method + " " + t.URL + ": " + unwrapRefused(err)
		return worker.SkipRetry(errors.New("dispatch: " + a.Error))
	case ctx.Err() != nil:
		a.Error = "canceled: " + context.Cause(ctx).Error()
		return fmt.Errorf("dispatch: %s", a.Error)
	case errors.Is(rctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		a.Error = fmt.Sprintf("timed out after %s (the target's timeout)", t.Timeout)
		return errors.New("dispatch: " + a.Error)
	}
	a.Error = err.Error()
	return errors.New("dispatch: " + a.Error)
}

// unwrapRefused is the guard's own message out of the url and dial errors
// around it.
func unwrapRefused(err error) string {
	s := err.Error()
	if i := strings.Index(s, ErrRefused.Error()); i >= 0 {
		return s[i:]
	}
	return s
}

// mapStatus maps a response to where the job goes.
func (d *Dispatcher) mapStatus(a *Attempt, resp *http.Response, body []byte, truncated bool, elapsed time.Duration) (Attempt, json.RawMessage, error) {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		res, _ := json.Marshal(result{Status: code, Body: bodyJSON(body, truncated), Truncated: truncated,
			DurationMs: a.Duration})
		return *a, res, nil
	}
	a.Error = fmt.Sprintf("HTTP %d %s after %s", code, http.StatusText(code), elapsed.Round(time.Millisecond))
	a.respBody = bodyJSON(body, truncated)
	if code >= 300 && code < 400 {
		a.Error += fmt.Sprintf(": redirects are not followed (Location: %q); point the target at the final URL", resp.Header.Get("Location"))
		return *a, nil, errors.New("dispatch: " + a.Error)
	}
	if len(body) > 0 {
		snippet := body
		if len(snippet) > errorBodyBytes {
			snippet = snippet[:errorBodyBytes]
		}
		a.Error += ": " + strings.ToValidUTF8(string(snippet), "?")
	}
	err := errors.New("dispatch: " + a.Error)
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		if after, ok := retryAfter(resp.Header.Get("Retry-After"), d.clock.Now()); ok {
			return *a, nil, worker.RetryAfter(after, err)
		}
		return *a, nil, err
	}
	if code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooEarly {
		return *a, nil, worker.SkipRetry(err)
	}
	return *a, nil, err
}

// result is a completed job's result.
type result struct {
	Status     int             `json:"status"`
	Body       json.RawMessage `json:"body"`
	Truncated  bool            `json:"truncated,omitempty"`
	DurationMs float64         `json:"duration_ms"`
}

// bodyJSON is a response body as JSON: itself when it is JSON, else a
// string (invalid UTF-8 replaced), null when empty.
func bodyJSON(b []byte, truncated bool) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	if !truncated && json.Valid(b) {
		return json.RawMessage(bytes.TrimSpace(b))
	}
	s, _ := json.Marshal(strings.ToValidUTF8(string(b), "\uFFFD"))
	return s
}

// retryAfter reads a Retry-After header, seconds or an HTTP date, capped
// at MaxRetryAfter.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		d = time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, MaxRetryAfter), true
}
