package demo_test

import (
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
)

func TestRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv, err := api.New(api.Config{Store: b.client, Routes: b.pool.Routes(), RoutesOpenAPI: demo.OpenAPI(),
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	// Every answer is held to the document the server serves.
	apitest.Wrap(t, hs.Client(), srv.OpenAPI())
	do := func(method, path, body string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(t.Context(), method, hs.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := hs.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m), "%s", data)
		return res.StatusCode, m
	}

	status, st := do(http.MethodGet, "/v1/demo", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "demo", st["queue"])
	require.Equal(t, "200ms", st["latency"])
	require.Len(t, st["kinds"], 4)

	status, body := do(http.MethodPost, "/v1/demo/batch", `{"count":4,"delay":"10s","spread":"1m","kinds":["email","invoice"]}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.EqualValues(t, 4, body["enqueued"])
	require.Len(t, body["ids"], 4)
	first, err := time.Parse(time.RFC3339, body["first_run_at"].(string))
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(10*time.Second).UTC(), first)

	status, st = do(http.MethodPost, "/v1/demo/pool", `{"size":2,"latency":"0s","fail_rate":0.5}`)
	require.Equal(t, http.StatusOK, status, "%v", st)
	require.EqualValues(t, 2, st["size"])
	require.Equal(t, 0.5, st["fail_rate"])
	status, st = do(http.MethodPost, "/v1/demo/pool", `{"hang_rate":0.25}`) // the rest kept
	require.Equal(t, http.StatusOK, status, "%v", st)
	require.EqualValues(t, 2, st["size"])
	require.Equal(t, 0.25, st["hang_rate"])

	for _, tt := range []struct{ path, body, field string }{
		{"/v1/demo/pool", `{"size":99}`, "size"},
		{"/v1/demo/pool", `{"latency":"soon"}`, "latency"},
		{"/v1/demo/pool", `{"fail_rate":2}`, "fail_rate"},
		{"/v1/demo/pool", `{"size":"two"}`, "size"},
		{"/v1/demo/pool", `{"workers":2}`, ""},
		{"/v1/demo/batch", `{"count":5000}`, "count"},
		{"/v1/demo/batch", `{"kinds":["fax"]}`, "kinds"},
		{"/v1/demo/batch", `{"spread":"-1s"}`, "spread"},
		{"/v1/demo/batch", `{} {}`, ""},
		{"/v1/demo/batch", "{\"kinds\":[\"\xff\"]}", ""}, // not valid UTF-8
	} {
		status, body := do(http.MethodPost, tt.path, tt.body)
		require.Equal(t, http.StatusBadRequest, status, "%s %v", tt.body, body)
		e := body["error"].(map[string]any)
		require.Equal(t, "invalid_argument", e["code"])
		if tt.field != "" {
			require.Equal(t, tt.field, e["field"], tt.body)
		}
	}
}
