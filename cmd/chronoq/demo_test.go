package main

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/demo"
)

// TestDemo: `chronoq demo` needs no set-up (the embedded Redis), serves
// the dashboard and the /v1/demo routes, starts a sample workflow, and its
// workers run the batches (and the workflow's jobs);
// `serve` has no demo routes, and its OpenAPI document lists none.
func TestDemo(t *testing.T) {
	t.Parallel()
	s := startServeAs(t, "demo", []string{"--workers", "2"}, nil)
	require.Contains(t, s.logs.String(), "embedded in-memory Redis")
	require.Contains(t, s.logs.String(), "demo: open the dashboard")
	status, started := s.do(t, http.MethodPost, "/v1/demo/workflow", `{}`)
	require.Equal(t, http.StatusCreated, status, "%v", started)
	status, list := s.do(t, http.MethodGet, "/v1/workflows", "")
	require.Equal(t, http.StatusOK, status, "%v", list)
	require.Len(t, list["workflows"], 1)
	require.EqualValues(t, 9, list["workflows"].([]any)[0].(map[string]any)["nodes"], "the sample fan-out/fan-in")
	require.Equal(t, started["id"], list["workflows"].([]any)[0].(map[string]any)["id"])

	status, body := s.do(t, http.MethodGet, "/v1/demo", "")
	require.Equal(t, http.StatusOK, status)
	require.EqualValues(t, 2, body["size"])
	status, body = s.do(t, http.MethodPost, "/v1/demo/pool", `{"fail_rate":0,"latency":"10ms"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = s.do(t, http.MethodPost, "/v1/demo/batch", `{"count":5}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Eventually(t, func() bool {
		_, q := s.do(t, http.MethodGet, "/v1/queues/demo", "")
		return q["completed_total"] == float64(5+9)
	}, 20*time.Second, 20*time.Millisecond)
	metrics := s.text(t, "/metrics")
	require.Contains(t, metrics, `chronoq_workflow_steps_total{step="release"} 9`, "every node released once")
	// Each job left a log (a line when claimed, one a step, one at its
	// end), its progress and the artifact "summary".
	for _, id := range body["ids"].([]any) {
		path := "/v1/queues/demo/jobs/" + id.(string)
		status, logs := s.do(t, http.MethodGet, path+"/logs", "")
		require.Equal(t, http.StatusOK, status, "%v", logs)
		lines := logs["lines"].([]any)
		require.GreaterOrEqual(t, len(lines), 2+demo.MinSteps)
		require.Contains(t, lines[0].(map[string]any)["line"], "claimed by demo-")
		require.Contains(t, lines[len(lines)-1].(map[string]any)["line"], "done in")
		status, j := s.do(t, http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, status, "%v", j)
		require.EqualValues(t, 100, j["progress"].(map[string]any)["percent"])
		require.Contains(t, j["artifacts"], demo.ArtifactName)
	}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+"/", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(page), `id="demo-panel"`)
	require.NotEmpty(t, res.Header.Get("Content-Security-Policy"))

	_, doc := s.do(t, http.MethodGet, "/v1/openapi.json", "")
	require.Contains(t, doc["paths"], "/v1/demo/batch")

	plain := startServe(t, nil, nil)
	status, _ = plain.do(t, http.MethodGet, "/v1/demo", "")
	require.Equal(t, http.StatusNotFound, status)
	status, doc = plain.do(t, http.MethodGet, "/v1/openapi.json", "")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, doc["paths"], "/v1/demo")
	require.NotContains(t, doc["paths"], "/v1/demo/batch")

	for _, args := range [][]string{{"--workers", "-1"}, {"--workers", "33"}} {
		_, err := parseServeFlags("demo", args, env(), io.Discard)
		require.Error(t, err, "%v", args)
	}
	_, err = parseServe([]string{"--workers", "1"}, env(), io.Discard) // a demo flag only
	require.Error(t, err)
}

// text GETs path and answers its body.
func (s *served) text(t *testing.T, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+path, nil)
	require.NoError(t, err)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", data)
	return string(data)
}

// TestDemoDeadJobsRetry: `chronoq demo` on its embedded Redis keeps its
// dead jobs, and requeues and purges them: they are listed, counted,
// retried by POST .../dead/retry and done after it, and a purge empties
// the set (the embedded Redis's Lua once failed both, leaving the jobs
// in no list).
func TestDemoDeadJobsRetry(t *testing.T) {
	t.Parallel()
	s := startServeAs(t, "demo", []string{"--workers", "2"}, nil)
	status, body := s.do(t, http.MethodPost, "/v1/demo/pool", `{"fail_rate":1,"latency":"0s"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	dead := func() float64 {
		_, q := s.do(t, http.MethodGet, "/v1/queues/demo", "")
		n, _ := q["dead"].(float64)
		return n
	}
	status, body = s.do(t, http.MethodPost, "/v1/demo/batch", `{"count":3,"max_attempts":1}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Eventually(t, func() bool { return dead() == 3 }, 20*time.Second, 20*time.Millisecond)

	status, body = s.do(t, http.MethodPost, "/v1/demo/pool", `{"fail_rate":0}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = s.do(t, http.MethodPost, "/v1/queues/demo/dead/retry", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Eventually(t, func() bool {
		_, q := s.do(t, http.MethodGet, "/v1/queues/demo", "")
		return q["completed_total"] == float64(3) && q["dead"] == float64(0)
	}, 20*time.Second, 20*time.Millisecond)

	status, body = s.do(t, http.MethodPost, "/v1/demo/pool", `{"fail_rate":1}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = s.do(t, http.MethodPost, "/v1/demo/batch", `{"count":2,"max_attempts":1}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Eventually(t, func() bool { return dead() == 2 }, 20*time.Second, 20*time.Millisecond)
	status, body = s.do(t, http.MethodDelete, "/v1/queues/demo/dead", "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Zero(t, dead())
}
