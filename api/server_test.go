package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/queue"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"

	t.Run("token configured", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withToken(token), func(sc *setupConfig) { sc.noAuth = true })
		for _, hdr := range []string{"", "Bearer", "Bearer wrong", "Basic " + token, "Bearer " + token + "x", "Bearer " + token[:5]} {
			for _, path := range []string{"/v1/queues", "/v1/openapi.json", "/v1/status", "/", "/v1/events"} {
				r := b.do(t, http.MethodGet, path, nil, "Authorization", hdr)
				requireError(t, r, http.StatusUnauthorized, "unauthenticated", "")
				require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
			}
			r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k"}, "Authorization", hdr)
			requireError(t, r, http.StatusUnauthorized, "unauthenticated", "")
		}
		// Rejected before anything was enqueued.
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Empty(t, qs)

		for _, hdr := range []string{"Bearer " + token, "bearer " + token} {
			r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k"}, "Authorization", hdr)
			require.Equal(t, http.StatusCreated, r.status)
			r = b.do(t, http.MethodGet, "/", nil, "Authorization", hdr)
			require.Equal(t, http.StatusOK, r.status)
		}
		// Open: health, readiness, and metrics by default.
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, path, nil).status, path)
		}
	})

	t.Run("metrics behind the token", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withToken(token), func(sc *setupConfig) { sc.api.MetricsAuth = true; sc.noAuth = true })
		requireError(t, b.do(t, http.MethodGet, "/metrics", nil), 401, "unauthenticated", "")
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/metrics", nil, "Authorization", "Bearer "+token).status)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", nil).status)
	})

	t.Run("no token: open", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/queues", nil).status)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/queues", nil, "Authorization", "Bearer anything").status)
	})
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.api.BodyLimit = 1024 })
	big := `{"kind":"k","payload":"` + strings.Repeat("x", 2000) + `"}`
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", big), 413, "payload_too_large", "")

	// Without a Content-Length (chunked), the limit holds while reading.
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.http.URL+"/v1/jobs", io.MultiReader(strings.NewReader(big)))
	require.NoError(t, err)
	req.ContentLength = -1
	res, err := b.http.Client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	requireError(t, response{status: res.StatusCode, header: res.Header, body: body}, 413, "payload_too_large", "")

	// Within it: fine.
	r := b.do(t, http.MethodPost, "/v1/jobs", `{"kind":"k","payload":"`+strings.Repeat("x", 900)+`"}`)
	require.Equal(t, http.StatusCreated, r.status)
}

// TestBodyLimitEveryRoute: every route that reads a body answers 413 for
// one over the limit, whether its Content-Length says so at once or it
// comes chunked, and the document says so for each.
func TestBodyLimitEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, withCron, func(sc *setupConfig) { sc.api.BodyLimit = 64 })
	big := `{"kind":"` + strings.Repeat("x", 100) + `"}`
	doc := parseDoc(t, b.srv.OpenAPI())
	n := 0
	for _, op := range doc.operations() {
		method, path, _ := strings.Cut(op, " ")
		if method != "post" && method != "put" && method != "patch" {
			continue
		}
		n++
		path = strings.NewReplacer("{queue}", "q", "{id}", "abc", "{name}", "n", "{key}", "k").Replace(path)
		method = strings.ToUpper(method)
		requireError(t, b.do(t, method, path, big), http.StatusRequestEntityTooLarge, "payload_too_large", "")
		req, err := http.NewRequestWithContext(b.ctx, method, b.http.URL+path, io.MultiReader(strings.NewReader(big)))
		require.NoError(t, err)
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		res, err := b.http.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		requireError(t, response{status: res.StatusCode, header: res.Header, body: body}, http.StatusRequestEntityTooLarge, "payload_too_large", "")
	}
	require.Equal(t, 22, n) // 17, PUT /v1/workers/{id}, PUT .../artifacts/{name}, POST .../logs, PUT .../flow and PUT .../flow/overrides/{key}
}

func TestDefaultBodyLimitIsOneMiB(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"kind":"k","payload":"` + strings.Repeat("x", 1<<20) + `"}`
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", body), 413, "payload_too_large", "")
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireError(t, b.do(t, http.MethodGet, "/v1/nothing", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/nothing", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodPut, "/v1/jobs", `{}`), 405, "method_not_allowed", "")
	// No cron store: no cron routes.
	requireError(t, b.do(t, http.MethodGet, "/v1/cron", nil), 404, "not_found", "")
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/healthz", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"status":"ok"}`, string(r.body))
	r = b.do(t, http.MethodGet, "/readyz", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"status":"ok"}`, string(r.body))

	nr := setup(t, func(sc *setupConfig) {
		sc.api.Ready = func(context.Context) error { return errors.New("dial tcp 10.0.0.1:6379: refused") }
	})
	r = nr.do(t, http.MethodGet, "/readyz", nil)
	e := requireError(t, r, http.StatusServiceUnavailable, "unavailable", "")
	require.NotContains(t, e.Message, "10.0.0.1")
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), "/v1/openapi.json")

	b = setup(t, func(sc *setupConfig) {
		sc.api.Dashboard = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<p>my dashboard")
		})
	})
	r = b.do(t, http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "<p>my dashboard", string(r.body))
}

// brokenStore fails in the ways a store must never make the API fail.
type brokenStore struct {
	api.Store // nil: any other method panics
	err       error
}

func (s brokenStore) Enqueue(context.Context, queue.NewJob) (queue.Enqueued, error) {
	if s.err != nil {
		return queue.Enqueued{}, s.err
	}
	panic("store bug")
}

func (s brokenStore) EnqueueBatch(ctx context.Context, njs []queue.NewJob) ([]queue.Enqueued, error) {
	e, err := s.Enqueue(ctx, njs[0])
	return []queue.Enqueued{e}, err
}

// brokenEngine is an engine whose every method panics.
type brokenEngine struct {
	api.Engine // nil
}

func TestInternalErrors(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for _, store := range []brokenStore{{}, {err: errors.New("secret detail: password=hunter2")}} {
		b := setup(t, func(sc *setupConfig) {
			// Its clock and readiness are given: the store has neither,
			// and no engine beside it (any call to one panics).
			sc.api.Store, sc.api.Logger, sc.api.Clock = store, log, clockwork.NewRealClock()
			sc.api.Engine = brokenEngine{}
			sc.api.Ready = func(context.Context) error { return nil }
		})
		r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k"})
		e := requireError(t, r, http.StatusInternalServerError, "internal", "")
		require.Equal(t, "internal error", e.Message)
		require.NotContains(t, string(r.body), "hunter2")
		// The server lives on: a nil method (another panic) answers too.
		requireError(t, b.do(t, http.MethodGet, "/v1/queues", nil), 500, "internal", "")
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", nil).status)
	}
	require.Contains(t, logs.String(), "store bug")
	require.Contains(t, logs.String(), "hunter2") // the detail is in the log
}
