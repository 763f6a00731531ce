package demo_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/api/apitest"
	"github.com/chronoq/chronoq/demo"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/workflow"
)

// POST /v1/demo/workflow starts the sample fan-out/fan-in, and the pool
// works it to its end.
func TestSampleWorkflow(t *testing.T) {
	t.Parallel()
	client, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), Clock: testutil.FakeClock(), FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	wf, err := workflow.New(workflow.Config{Queue: client})
	require.NoError(t, err)
	rel, err := workflow.NewReleaser(workflow.ReleaserConfig{Client: wf, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	releasing := lifecycle.Start(t.Context(), rel)
	t.Cleanup(func() { require.NoError(t, releasing.Stop(context.Background())) })
	pool, err := demo.New(demo.Config{Client: client, ClaimWait: 100 * time.Millisecond, Seed: 1, Workflows: wf,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, pool.Start(t.Context()))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, pool.Stop(sctx))
	})
	require.NoError(t, pool.Configure(demo.Settings{Size: 4}))

	srv, err := api.New(api.Config{Store: client, Workflows: wf, Routes: pool.Routes(), RoutesOpenAPI: demo.OpenAPI(),
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	apitest.Wrap(t, hs.Client(), srv.OpenAPI())
	post := func(body string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, hs.URL+"/v1/demo/workflow", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res, err := hs.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m), "%s", data)
		return res.StatusCode, m
	}
	status, body := post(`{"width":99}`)
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	status, body = post(`{"width":3}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.EqualValues(t, 6, body["nodes"])
	id := body["id"].(string)
	require.Eventually(t, func() bool {
		w, err := wf.Get(t.Context(), id)
		require.NoError(t, err)
		return w.Status == workflow.StatusCompleted
	}, 20*time.Second, 10*time.Millisecond)
}
