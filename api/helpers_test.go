package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/api/apitest"
	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/workflow"
)

// testBundle is one API server over a real queue client, on a real
// loopback listener, in a namespace of its own.
type testBundle struct {
	ctx    context.Context
	client *queue.Client
	clock  *clockwork.FakeClock
	srv    *api.Server
	http   *httptest.Server
	token  string
	// contract is the served OpenAPI document: http's client checks every
	// exchange against it.
	contract *apitest.Contract
	// workflows and releaser, with setupConfig.workflows.
	workflows *workflow.Client
	releaser  *workflow.Releaser
}

type setupConfig struct {
	rdb    redis.UniversalClient
	queue  queue.Config
	api    api.Config
	noAuth bool // send no token even when the server has one
	// realCron serves the cron routes from a cron.Store over the
	// bundle's queue client.
	realCron bool
	// cronOpts are the options of that cron.Store.
	cronOpts []cron.StoreOption
	// push, when set, serves the push config routes from a dispatch.Store
	// over the bundle's queue client, with this guard.
	push *dispatch.Guard
	// hooks, when set, serves the /v1/webhooks routes from a
	// dispatch.Hooks over the bundle's queue client, with this guard.
	hooks *dispatch.Guard
	// clock, when set, is the queue client's clock instead of the fake
	// one (b.clock is then not the client's).
	clock clockwork.Clock
	// workers, when set, configures the worker registry over the
	// bundle's queue client; by default one with registry.Config{} when
	// the server's store is the bundle's client, else none.
	workers *registry.Config
	// workflows serves the /v1/workflows routes from a workflow.Client
	// over the bundle's queue client (b.workflows, with b.releaser).
	workflows bool
}

func setup(t testing.TB, opts ...func(*setupConfig)) *testBundle {
	t.Helper()
	var sc setupConfig
	for _, o := range opts {
		o(&sc)
	}
	if sc.rdb == nil {
		sc.rdb = testutil.Redis(t)
	}
	clock := testutil.FakeClock()
	qc := sc.queue
	qc.Redis, qc.Namespace, qc.Clock, qc.FollowClock = sc.rdb, testutil.Namespace(t), clock, true
	if sc.clock != nil {
		qc.Clock, qc.FollowClock = sc.clock, false // a real or skewed clock: Redis keeps its own
	}
	client, err := queue.NewClient(qc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	ac := sc.api
	if ac.Logger == nil {
		ac.Logger = slog.New(slog.DiscardHandler)
	}
	if ac.Store == nil {
		ac.Store = client
		if sc.workers == nil {
			sc.workers = &registry.Config{} // the registry serve gives its server
		}
	}
	if sc.realCron {
		ac.Cron = cron.NewStore(client, sc.cronOpts...)
	}
	if sc.push != nil {
		ac.Push = dispatch.NewStore(client, *sc.push)
	}
	if sc.hooks != nil {
		ac.Hooks = dispatch.NewHooks(client, *sc.hooks)
	}
	if sc.workers != nil {
		ac.Workers, err = registry.New(client, *sc.workers)
		require.NoError(t, err)
	}
	var wf *workflow.Client
	var rel *workflow.Releaser
	if sc.workflows {
		wf, err = workflow.New(workflow.Config{Queue: client})
		require.NoError(t, err)
		rel, err = workflow.NewReleaser(workflow.ReleaserConfig{Client: wf, Logger: ac.Logger})
		require.NoError(t, err)
		ac.Workflows = wf
	}
	srv, err := api.New(ac)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Drain) // before hs.Close: open streams end
	// Every exchange of the tests is held to the document the server
	// serves: a test fails on an answer it does not describe.
	contract, err := apitest.Load(srv.OpenAPI())
	require.NoError(t, err)
	hs.Client().Transport = &apitest.Transport{T: t, Contract: contract, Base: hs.Client().Transport}
	b := &testBundle{ctx: t.Context(), client: client, clock: clock, srv: srv, http: hs, contract: contract, workflows: wf, releaser: rel}
	if !sc.noAuth {
		b.token = ac.Token
	}
	return b
}

func withToken(tok string) func(*setupConfig) {
	return func(sc *setupConfig) { sc.api.Token = tok }
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a fresh value of type T.
func decodeAs[T any](t testing.TB, r response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

func (r response) object(t *testing.T) map[string]any { return decodeAs[map[string]any](t, r) }

// apiErr is the error body.
type apiErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (r response) err(t *testing.T) apiErr {
	t.Helper()
	return decodeAs[struct {
		Error apiErr `json:"error"`
	}](t, r).Error
}

// requireError checks an error answer: its status, code and field.
func requireError(t *testing.T, r response, status int, code, field string) apiErr {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	e := r.err(t)
	require.Equal(t, code, e.Code, "body: %s", r.body)
	require.Equal(t, field, e.Field, "body: %s", r.body)
	require.NotEmpty(t, e.Message)
	return e
}

// do sends a request; body is nil, a string (sent as is) or a value sent as
// JSON. hdr is name, value pairs ("Host" sets the request's Host).
func (b *testBundle) do(t testing.TB, method, path string, body any, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		data, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.http.URL+path, rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" { // net/http sends req.Host, not the header
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.http.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// jobView is the Job resource as a client reads it.
type jobView struct {
	ID             string          `json:"id"`
	Queue          string          `json:"queue"`
	Kind           string          `json:"kind"`
	Payload        json.RawMessage `json:"payload"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	Fence          int64           `json:"fence"`
	MaxAttempts    int             `json:"max_attempts"`
	Visibility     string          `json:"visibility"`
	EnqueuedAt     *string         `json:"enqueued_at"`
	RunAt          *string         `json:"run_at"`
	ClaimedAt      *string         `json:"claimed_at"`
	LeaseUntil     *string         `json:"lease_until"`
	CompletedAt    *string         `json:"completed_at"`
	Result         json.RawMessage `json:"result"`
	LastError      *string         `json:"last_error"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Token          string          `json:"token"`
}

type jobsView struct {
	Jobs []jobView `json:"jobs"`
}

// enqueue posts one job and checks it was created.
func (b *testBundle) enqueue(t testing.TB, body map[string]any) jobView {
	t.Helper()
	if body["kind"] == nil {
		body["kind"] = "test"
	}
	r := b.do(t, http.MethodPost, "/v1/jobs", body)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	return decodeAs[jobView](t, r)
}

// claim claims up to n jobs of q at once.
func (b *testBundle) claim(t *testing.T, q string, n int) []jobView {
	t.Helper()
	r := b.do(t, http.MethodPost, "/v1/queues/"+q+"/claim", map[string]any{"max": n})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	return decodeAs[jobsView](t, r).Jobs
}

func ptr[T any](v T) *T { return &v }

// requireSoonAfter checks that got, a time as the API writes it and as
// Redis's clock decided it, is want or a little after: under the tests'
// fake clock Redis's clock reads as the fake one plus the real time the
// test has taken (see queue.Config.Clock).
func requireSoonAfter(t *testing.T, want string, got any, msgAndArgs ...any) {
	t.Helper()
	s, ok := got.(string)
	if p, isPtr := got.(*string); isPtr && p != nil {
		s, ok = *p, true
	}
	require.True(t, ok, "want a time, got %v", got)
	w, err := time.Parse(time.RFC3339Nano, want)
	require.NoError(t, err)
	g, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	require.False(t, g.Before(w), msgAndArgs...)
	require.Less(t, g.Sub(w), time.Second, msgAndArgs...)
}
