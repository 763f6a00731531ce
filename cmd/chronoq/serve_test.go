package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/clockskew"
	"github.com/chronoq/chronoq/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParseServe(t *testing.T) {
	t.Parallel()
	c, err := parseServe(nil, env(), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", c.listen)
	require.Empty(t, c.redisURL)
	require.Empty(t, c.redisCluster)
	require.Equal(t, "chronoq", c.namespace)
	require.EqualValues(t, 1<<20, c.bodyLimit)
	require.Equal(t, time.Hour, c.retention)
	require.Equal(t, slog.LevelInfo, c.logLevel)

	// The environment, and a flag over it.
	e := env("CHRONOQ_LISTEN", "127.0.0.1:9000", "REDIS_URL", "rediss://u:p@redis:6380/2", "CHRONOQ_TOKEN", "t",
		"CHRONOQ_NAMESPACE", "ns", "CHRONOQ_REDIS_CLUSTER", "a:1, b:2,", "CHRONOQ_RETENTION", "2h",
		"CHRONOQ_BODY_LIMIT", "2048", "CHRONOQ_METRICS_AUTH", "true", "CHRONOQ_LOG_LEVEL", "debug")
	c, err = parseServe(nil, e, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9000", c.listen)
	require.Equal(t, "rediss://u:p@redis:6380/2", c.redisURL)
	require.Equal(t, []string{"a:1", "b:2"}, c.redisCluster)
	require.Equal(t, "t", c.token)
	require.Equal(t, "ns", c.namespace)
	require.Equal(t, 2*time.Hour, c.retention)
	require.EqualValues(t, 2048, c.bodyLimit)
	require.True(t, c.metricsAuth)
	require.Equal(t, slog.LevelDebug, c.logLevel)
	c, err = parseServe([]string{"--listen", "127.0.0.1:9100", "--namespace", "flag", "--retention", "1m", "--metrics-auth=false"}, e, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9100", c.listen)
	require.Equal(t, "flag", c.namespace)
	require.Equal(t, time.Minute, c.retention)
	require.False(t, c.metricsAuth)

	for _, tt := range []struct {
		args []string
		env  func(string) string
		ok   bool
	}{
		{[]string{"--listen", "0.0.0.0:8080"}, env(), false},
		{[]string{"--listen", ":8080"}, env(), false},
		{[]string{"--listen", "example.com:8080"}, env(), false},
		{[]string{"--listen", "0.0.0.0:8080", "--token", "t"}, env(), true},
		{[]string{"--listen", "0.0.0.0:8080"}, env("CHRONOQ_TOKEN", "t"), true},
		{[]string{"--listen", "0.0.0.0:8080", "--insecure"}, env(), true},
		{[]string{"--listen", "[::1]:8080"}, env(), true},
		{[]string{"--listen", "localhost:8080"}, env(), true},
		{[]string{"--listen", "nonsense"}, env(), false},
		{nil, env("CHRONOQ_RETENTION", "forever"), false},
		{nil, env("CHRONOQ_MAX_QUEUES", "many"), false},
		{nil, env("CHRONOQ_MAX_CRON_ENTRIES", "0"), false},
		{[]string{"--max-cron-entries", "-1"}, env(), false},
		{[]string{"--max-cron-entries", "1"}, env(), true},
		{nil, env("CHRONOQ_INSECURE", "maybe"), false},
		{[]string{"--log-level", "loud"}, env(), false},
		{[]string{"--log-format", "xml"}, env(), false},
		{[]string{"--no-such-flag"}, env(), false},
		{[]string{"extra"}, env(), false},
		{[]string{"--allowed-hosts", "http://chronoq.lan"}, env(), false},
		{[]string{"--allowed-hosts", "chronoq.lan:8080"}, env(), false},
		{nil, env("CHRONOQ_ALLOWED_HOSTS", "a.lan,b/c"), false},
	} {
		_, err := parseServe(tt.args, tt.env, io.Discard)
		require.Equal(t, tt.ok, err == nil, "%v: %v", tt.args, err)
	}

	// The allowed hosts: the flag's (or the environment's), and the
	// --listen host.
	c, err = parseServe([]string{"--allowed-hosts", " chronoq.lan, 10.1.2.3 ,"}, env(), io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"chronoq.lan", "10.1.2.3", "127.0.0.1"}, c.allowedHosts)
	c, err = parseServe([]string{"--listen", "box.lan:8080", "--insecure"}, env("CHRONOQ_ALLOWED_HOSTS", "a.lan"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"a.lan", "box.lan"}, c.allowedHosts)
	c, err = parseServe([]string{"--listen", ":8080", "--insecure"}, env(), io.Discard)
	require.NoError(t, err)
	require.Empty(t, c.allowedHosts)
}

// TestServeHostCheck: serve without a token answers 421 to a Host that
// does not name it (a rebinding page's), and serves the dashboard, the
// API and /metrics to its own Host and to those of --allowed-hosts; on
// every interface (--insecure), reached through this host's own address,
// it answers to that address.
func TestServeHostCheck(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"--listen", ":0", "--insecure", "--allowed-hosts", "chronoq.lan"}, testutil.FakeClock())
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	bases := []string{"http://127.0.0.1:" + port}
	for _, a := range testutil.HostAddrs(t) {
		bases = append(bases, "http://"+net.JoinHostPort(a.String(), port))
	}
	get := func(base, path, host string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		require.NoError(t, err)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	for _, base := range bases {
		own := strings.TrimPrefix(base, "http://")
		for _, path := range []string{"/", "/v1/queues", "/metrics"} {
			for _, host := range []string{own, "localhost:" + port, "chronoq.lan:" + port} {
				status, body := get(base, path, host)
				require.Equal(t, http.StatusOK, status, "%s%s Host %s: %s", base, path, host, body)
			}
			status, body := get(base, path, "rebind.example:"+port)
			require.Equal(t, http.StatusMisdirectedRequest, status, "%s%s: %s", base, path, body)
			require.Contains(t, body, `"code":"misdirected_request"`)
			require.Contains(t, body, "--allowed-hosts")
		}
		status, _ := get(base, "/healthz", "rebind.example")
		require.Equal(t, http.StatusOK, status)
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.Equal(t, 2, run(t.Context(), nil, env(), &out, &out))
	require.Contains(t, out.String(), "serve")
	out.Reset()
	require.Equal(t, 0, run(t.Context(), []string{"help"}, env(), &out, &out))
	require.Equal(t, 2, run(t.Context(), []string{"nope"}, env(), &out, &out))
	out.Reset()
	require.Equal(t, 0, run(t.Context(), []string{"serve", "-h"}, env(), &out, &out))
	require.Contains(t, out.String(), "CHRONOQ_TOKEN")
	out.Reset()
	require.Equal(t, 2, run(t.Context(), []string{"serve", "--listen", "0.0.0.0:0"}, env(), &out, &out))
	require.Contains(t, out.String(), "refusing to listen")
}

type served struct {
	base  string
	token string
	logs  *testutil.LogBuffer
	stop  func() // ends serve and waits for it
}

// startServe runs serve until the test ends (or stop).
func startServe(t *testing.T, args []string, clock clockwork.Clock) *served {
	t.Helper()
	return startServeAs(t, "serve", args, clock)
}

// startServeAs runs `chronoq <name>` (serve or demo) until the test ends.
func startServeAs(t *testing.T, name string, args []string, clock clockwork.Clock) *served {
	t.Helper()
	if !slices.ContainsFunc(args, func(a string) bool {
		return a == "--redis-url" || a == "--redis-cluster" || a == "--local-redis" || a == "--data-dir"
	}) {
		// No Redis named: the embedded one keeping nothing, not one in
		// this user's data directory.
		args = append([]string{"--local-redis", "memory"}, args...)
	}
	c, err := parseServeFlags(name, append([]string{"--listen", "127.0.0.1:0"}, args...), env(), io.Discard)
	require.NoError(t, err)
	logs := &testutil.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	_, follow := clock.(*clockwork.FakeClock) // Redis's clock follows a fake one
	go func() {
		done <- serve(ctx, c, newLogger(c, logs), serveHooks{clock: clock, followClock: follow, onListen: func(a string) { addr <- a }})
	}()
	s := &served{token: c.token, logs: logs}
	select {
	case a := <-addr:
		s.base = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("serve ended at start: %v\n%s", err, logs)
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(15 * time.Second):
				t.Fatalf("serve did not stop\n%s", logs)
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

func (s *served) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var m map[string]any
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(data, &m), "%s", data)
	}
	return res.StatusCode, m
}

// TestServeEmbeddedRedis: with no Redis configured serve runs on the
// embedded in-memory Redis, says so, and the engine's scripts work on it:
// enqueue, delayed promotion, claim, complete.
func TestServeEmbeddedRedis(t *testing.T) {
	t.Parallel()
	clock := testutil.FakeClock()
	s := startServe(t, nil, clock)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	require.Contains(t, s.logs.String(), "embedded in-memory Redis")
	require.Contains(t, s.logs.String(), "Jobs live only as long as this process")

	status, body := s.do(t, http.MethodPost, "/v1/jobs", `{"queue":"smoke","kind":"k","delay":"10s","payload":{"n":1}}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Equal(t, "scheduled", body["status"])
	id := body["id"].(string)
	status, body = s.do(t, http.MethodPost, "/v1/jobs", `{"queue":"smoke","kind":"k","idempotency_key":"i"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	status, _ = s.do(t, http.MethodPost, "/v1/jobs", `{"queue":"smoke","kind":"k","idempotency_key":"i"}`)
	require.Equal(t, http.StatusOK, status)
	other := body["id"].(string)

	// Take the due job first; the delayed one is not due.
	status, body = s.do(t, http.MethodPost, "/v1/queues/smoke/claim", `{"max":10}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	jobs := body["jobs"].([]any)
	require.Len(t, jobs, 1)
	require.Equal(t, other, jobs[0].(map[string]any)["id"])

	// Due: the promoter (on the fake clock) moves it; the long poll gets it.
	clock.Advance(10 * time.Second)
	status, body = s.do(t, http.MethodPost, "/v1/queues/smoke/claim", `{"wait":"10s"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	jobs = body["jobs"].([]any)
	require.Len(t, jobs, 1)
	job := jobs[0].(map[string]any)
	require.Equal(t, id, job["id"])

	status, body = s.do(t, http.MethodPost, "/v1/queues/smoke/jobs/"+id+"/heartbeat", `{"token":"`+job["token"].(string)+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = s.do(t, http.MethodPost, "/v1/queues/smoke/jobs/"+id+"/complete", `{"token":"`+job["token"].(string)+`","result":"done"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, "completed", body["status"])

	status, body = s.do(t, http.MethodGet, "/v1/queues/smoke", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, float64(1), body["completed_total"])
	require.Equal(t, float64(1), body["promoted_total"])
	require.Equal(t, float64(1), body["processing"])

	status, _ = s.do(t, http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusOK, status)
	status, _ = s.do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, status)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+"/metrics", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	metrics, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Contains(t, string(metrics), "chronoq_redis_clock_offset_seconds", "the distance to Redis's clock is exposed")
	s.stop()
	require.Contains(t, s.logs.String(), "stopped")
}

// TestServeEmbeddedRedisTime: the embedded Redis answers TIME, the
// scripts' calls included, from the host's clock (miniredis reads
// time.Now), not from serve's: an instance whose clock is 30 s ahead sees
// Redis's clock 30 s behind its own, and a delayed job becomes due when
// the host's clock reaches it, neither 30 s early nor late.
func TestServeEmbeddedRedisTime(t *testing.T) {
	t.Parallel()
	s := startServe(t, nil, clockskew.New(30*time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs)
		}
	})
	rdb, closeRedis, err := connect(t.Context(), serveConfig{localRedis: "memory"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer closeRedis()
	tm, err := rdb.Time(t.Context()).Result()
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), tm, time.Second, "TIME")
	us, err := rdb.Eval(t.Context(), "local t = redis.call('TIME') return t[1] * 1000000 + t[2]", nil).Int64()
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), time.UnixMicro(us), time.Second, "TIME in a script")

	start := time.Now()
	status, body := s.do(t, http.MethodPost, "/v1/jobs", `{"queue":"soon","kind":"k","delay":"300ms"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	status, body = s.do(t, http.MethodPost, "/v1/queues/soon/claim", `{"wait":"5s"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Len(t, body["jobs"], 1)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "not early")
	require.Less(t, time.Since(start), 3*time.Second, "not late")

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+"/metrics", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	metrics, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	var offset float64
	for line := range strings.Lines(string(metrics)) {
		if v, ok := strings.CutPrefix(line, "chronoq_redis_clock_offset_seconds "); ok {
			offset, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
		}
	}
	require.InDelta(t, -30, offset, 0.5, "Redis's clock, the host's, is 30 s behind serve's")

	// Cron ticks too come by the embedded Redis's clock: the first tick
	// after the put, a second later, not half a minute off.
	status, body = s.do(t, http.MethodPut, "/v1/cron/tick", `{"schedule":"* * * * * *","queue":"crons","kind":"tick"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	put := time.Now()
	require.Eventually(t, func() bool {
		_, q := s.do(t, http.MethodGet, "/v1/queues/crons", "")
		n, _ := q["enqueued_total"].(float64)
		return n >= 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Less(t, time.Since(put), 3*time.Second)
	status, body = s.do(t, http.MethodPost, "/v1/queues/crons/claim", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Len(t, body["jobs"], 1)
	job := body["jobs"].([]any)[0].(map[string]any)
	ms, err := strconv.ParseInt(strings.TrimPrefix(job["idempotency_key"].(string), "cron:tick:"), 10, 64)
	require.NoError(t, err)
	enqueued, err := time.Parse(time.RFC3339Nano, job["enqueued_at"].(string))
	require.NoError(t, err)
	require.False(t, enqueued.Before(time.UnixMilli(ms)), "tick %d enqueued at %s: early", ms, enqueued)
}

// TestServeRealRedis: serve on a real Redis with a token, beyond the
// default listen address rules; a graceful shutdown ends open event
// streams instead of waiting for them.
func TestServeRealRedis(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
		"--namespace", testutil.Namespace(t), "--token", "tok"}, nil)
	require.NotContains(t, s.logs.String(), "embedded")

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+"/v1/queues", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	status, body := s.do(t, http.MethodPost, "/v1/jobs", `{"queue":"real","kind":"k"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)

	// An open event stream.
	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+"/v1/events?queue=real", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ": connected\n", line)

	start := time.Now()
	s.stop()
	require.Less(t, time.Since(start), 10*time.Second)
	_, err = io.ReadAll(res.Body) // the stream ended
	require.NoError(t, err)
}

// TestServeReadTimeout: a client that trickles its body is cut off, with a
// 400, once --read-timeout has passed; the deadline does not touch a
// request whose body arrived.
func TestServeReadTimeout(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"--read-timeout", "300ms"}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"kind\":")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	data, _ := io.ReadAll(res.Body)
	require.Contains(t, string(data), "did not arrive in time")

	// A long poll's body arrived: its deadline is lifted, and the poll
	// still gets a job that comes well after it.
	got := make(chan map[string]any, 1)
	go func() {
		_, body := s.do(t, http.MethodPost, "/v1/queues/bt/claim", `{"wait":"10s"}`)
		got <- body
	}()
	<-time.After(700 * time.Millisecond) // past the read timeout
	status, job := s.do(t, http.MethodPost, "/v1/jobs", `{"queue":"bt","kind":"k"}`)
	require.Equal(t, http.StatusCreated, status)
	select {
	case body := <-got:
		jobs, _ := body["jobs"].([]any)
		require.Len(t, jobs, 1, "%v", body)
		require.Equal(t, job["id"], jobs[0].(map[string]any)["id"])
	case <-time.After(15 * time.Second):
		t.Fatal("long poll did not answer")
	}
}

// TestServeRedisPassword: the URL's user and password reach Redis; a wrong
// password leaves the service up, answering 503.
func TestServeRedisPassword(t *testing.T) {
	t.Parallel()
	rdb := testutil.Redis(t)
	ns := testutil.Namespace(t)
	user := "u" + ns // an ACL user of this test's own on the shared server
	require.NoError(t, rdb.Do(t.Context(), "ACL", "SETUSER", user, "on", ">s3cret", "~*", "&*", "+@all").Err())
	t.Cleanup(func() { _ = rdb.Do(context.Background(), "ACL", "DELUSER", user).Err() })
	addr := testutil.RedisAddr(t)

	s := startServe(t, []string{"--redis-url", "redis://" + user + ":s3cret@" + addr + "/0", "--namespace", ns}, nil)
	status, body := s.do(t, http.MethodPost, "/v1/jobs", `{"kind":"k"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)

	wrong := startServe(t, []string{"--redis-url", "redis://" + user + ":nope@" + addr + "/0", "--namespace", ns}, nil)
	require.Contains(t, wrong.logs.String(), "Redis does not answer yet")
	status, body = wrong.do(t, http.MethodPost, "/v1/jobs", `{"kind":"k"}`)
	require.Equal(t, http.StatusServiceUnavailable, status, "%v", body)
	status, _ = wrong.do(t, http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, status)
	status, _ = wrong.do(t, http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, status)
}

// TestServeRunsCron: serve exposes the cron routes and runs the scheduler
// (the scheduler's own timing is tested in package cron).
func TestServeRunsCron(t *testing.T) {
	t.Parallel()
	clock := testutil.FakeClock()
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
		"--namespace", testutil.Namespace(t)}, clock)

	status, body := s.do(t, http.MethodPut, "/v1/cron/tick", `{"schedule":"@every 1m","queue":"crons","kind":"report"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	status, body = s.do(t, http.MethodPut, "/v1/cron/bad", `{"schedule":"61 * * * *","kind":"report"}`)
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	require.Equal(t, "schedule", body["error"].(map[string]any)["field"])

	status, body = s.do(t, http.MethodPost, "/v1/cron/tick/trigger", "")
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Equal(t, "report", body["kind"])

	// The scheduler enqueues the next tick once the clock reaches it.
	require.Eventually(t, func() bool {
		_, q := s.do(t, http.MethodGet, "/v1/queues/crons", "")
		if n, _ := q["enqueued_total"].(float64); n >= 2 {
			return true
		}
		clock.Advance(time.Minute)
		return false
	}, 10*time.Second, 10*time.Millisecond)
	status, body = s.do(t, http.MethodGet, "/v1/cron/tick", "")
	require.Equal(t, http.StatusOK, status)
	require.NotNil(t, body["last_run_at"])
	require.NotNil(t, body["next_run_at"])
}
