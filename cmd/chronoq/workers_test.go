package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// TestCLIWorkers: chronoq workers lists the registry, and shows one
// worker with the jobs it holds; on a redis-server, and on the embedded
// Redis (its Lua runs the registry's scripts too).
func TestCLIWorkers(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		testCLIWorkers(t, startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
			"--namespace", testutil.Namespace(t), "--token", "tok", "--reclaim-interval", "1h"}, testutil.FakeClock()), true)
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		testCLIWorkers(t, startServe(t, []string{"--token", "tok"}, testutil.FakeClock()), false)
	})
}

// testCLIWorkers runs the commands against s; fake says Redis's clock is
// serve's fake clock (not so on the embedded Redis, whose clock is the
// host's).
func testCLIWorkers(t *testing.T, s *served, fake bool) {
	code, out, errOut := s.cli(t, "workers")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "live: 0")

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, s.base+"/v1/workers/http-1",
		strings.NewReader(`{"host":"box-1","queues":["mail"],"labels":["eu"],"version":"1.0","jobs":[{"queue":"mail","id":"j1"}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)

	code, out, errOut = s.cli(t, "workers")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^http-1\s+box-1\s+mail\s+eu\s+1\.0\s+1\s+`, out)
	if fake {
		require.Regexp(t, `(?m)^http-1\s.*\s2030-01-02T03:04:05\.`, out, "started on Redis's clock, the fake one")
	}
	require.Contains(t, out, "live: 1")
	code, out, errOut = s.cli(t, "workers", "http-1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "  mail j1\n")
	code, _, errOut = s.cli(t, "workers", "nosuch")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "404 not_found")
	code, _, errOut = s.cli(t, "workers", "a", "b")
	require.Equal(t, 2, code, errOut)
}

// TestServeWorkerTTL: --worker-ttl is the TTL of an HTTP worker that
// names none; out of range, serve refuses to start.
func TestServeWorkerTTL(t *testing.T) {
	t.Parallel()
	clock := testutil.FakeClock()
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
		"--namespace", testutil.Namespace(t), "--worker-ttl", "5s"}, clock)
	status, body := s.do(t, http.MethodPost, "/v1/queues/q/claim", `{"worker_id":"w"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = s.do(t, http.MethodGet, "/v1/workers/w", "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	seen, err := time.Parse(time.RFC3339Nano, body["last_seen_at"].(string))
	require.NoError(t, err)
	exp, err := time.Parse(time.RFC3339Nano, body["expires_at"].(string))
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, exp.Sub(seen))
	clock.Advance(6 * time.Second)
	status, _ = s.do(t, http.MethodGet, "/v1/workers/w", "")
	require.Equal(t, http.StatusNotFound, status)

	c, err := parseServeFlags("serve", []string{"--listen", "127.0.0.1:0", "--local-redis", "memory", "--worker-ttl", "10ms"}, env(), io.Discard)
	require.NoError(t, err)
	err = serve(t.Context(), c, newLogger(c, io.Discard), serveHooks{clock: clock, followClock: true})
	require.ErrorContains(t, err, "--worker-ttl")
}
