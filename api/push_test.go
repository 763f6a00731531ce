package api_test

import (
	"encoding/json"
	"github.com/chronoq/chronoq/internal/plumbing"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
)

func withPush(g dispatch.Guard) func(*setupConfig) {
	return func(sc *setupConfig) { sc.push = &g }
}

// PUT, GET and DELETE /v1/queues/{queue}/config; the config shows (without
// its secrets) in GET /v1/queues/{queue}; bad fields are 400s naming them.
func TestPushConfigRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, withPush(dispatch.Guard{}))

	r := b.do(t, http.MethodGet, "/v1/queues/hooks/config", nil)
	requireError(t, r, http.StatusNotFound, "not_found", "")

	r = b.do(t, http.MethodPut, "/v1/queues/hooks/config", map[string]any{
		"target": map[string]any{"url": "https://example.com/hook", "headers": map[string]string{"X-Team": "a"}, "timeout": "10s"}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	cfg := r.object(t)
	target := cfg["target"].(map[string]any)
	require.Equal(t, "https://example.com/hook", target["url"])
	require.Equal(t, "POST", target["method"])
	require.Equal(t, "10s", target["timeout"])
	secrets := cfg["secrets"].([]any)
	require.Len(t, secrets, 1)
	require.EqualValues(t, dispatch.DefaultConcurrency, cfg["concurrency"])

	r = b.do(t, http.MethodGet, "/v1/queues/hooks/config", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, secrets, r.object(t)["secrets"])

	r = b.do(t, http.MethodGet, "/v1/queues/hooks", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	push := r.object(t)["push"].(map[string]any)
	require.Equal(t, "https://example.com/hook", push["target"].(map[string]any)["url"])
	require.NotContains(t, push, "secrets", "the queue view shows no secrets")

	// The endpoint's labels: kept canonical, answered, shown with the queue.
	r = b.do(t, http.MethodPut, "/v1/queues/hooks/config", map[string]any{
		"target": map[string]any{"url": "https://example.com/hook"}, "labels": []string{"linux", "gpu", "gpu"}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, []any{"gpu", "linux"}, r.object(t)["labels"])
	require.Equal(t, secrets, r.object(t)["secrets"], "the secrets kept")
	r = b.do(t, http.MethodGet, "/v1/queues/hooks", nil)
	require.Equal(t, []any{"gpu", "linux"}, r.object(t)["push"].(map[string]any)["labels"])
	r = b.do(t, http.MethodPut, "/v1/queues/hooks/config", map[string]any{"target": map[string]any{"url": "https://example.com/hook"}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, []any{}, r.object(t)["labels"], "left out: none")

	manyLabels := make([]string, queue.MaxClaimLabels+1)
	for i := range manyLabels {
		manyLabels[i] = "l" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"target": map[string]any{"url": "ftp://example.com/"}}, "target.url"},
		{map[string]any{"target": map[string]any{"url": "http://127.0.0.1:6379/"}}, "target.url"},
		{map[string]any{"target": map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}}, "target.url"},
		{map[string]any{"target": map[string]any{"url": "https://example.com", "timeout": "500ms"}}, "target.timeout"},
		{map[string]any{"target": map[string]any{"url": "https://example.com", "timeout": "31m"}}, "target.timeout"},
		{map[string]any{"target": map[string]any{"url": "https://example.com", "method": "TRACE"}}, "target.method"},
		{map[string]any{"target": map[string]any{"url": "https://example.com", "headers": map[string]string{"Host": "x"}}}, "target.headers"},
		{map[string]any{"target": map[string]any{"url": "https://example.com"}, "secrets": []string{"nope!"}}, "secrets[0]"},
		{map[string]any{"target": map[string]any{"url": "https://example.com"}, "concurrency": 0}, "concurrency"},
		{map[string]any{"target": map[string]any{"url": "https://example.com"}, "labels": []string{""}}, "labels"},
		{map[string]any{"target": map[string]any{"url": "https://example.com"}, "labels": []string{"a b"}}, "labels"},
		{map[string]any{"target": map[string]any{"url": "https://example.com"}, "labels": []string{strings.Repeat("l", queue.MaxLabelBytes+1)}}, "labels"},
		{map[string]any{"target": map[string]any{"url": "https://example.com"}, "labels": manyLabels}, "labels"},
		{map[string]any{"target": map[string]any{"url": "https://example.com"}, "labels": "gpu"}, "labels"},
	} {
		r = b.do(t, http.MethodPut, "/v1/queues/hooks/config", tc.body)
		requireError(t, r, http.StatusBadRequest, "invalid_argument", tc.field)
	}

	r = b.do(t, http.MethodDelete, "/v1/queues/hooks/config", nil)
	require.Equal(t, http.StatusNoContent, r.status)
	r = b.do(t, http.MethodDelete, "/v1/queues/hooks/config", nil)
	requireError(t, r, http.StatusNotFound, "not_found", "")
	r = b.do(t, http.MethodGet, "/v1/queues/hooks", nil)
	require.NotContains(t, r.object(t), "push")
}

// An enqueue may give a job its own target and callbacks: the job is
// stored as a push envelope; a bad URL is a 400 naming the field. The
// queue must be a push queue, or nothing would ever send the job.
func TestEnqueueWithTarget(t *testing.T) {
	t.Parallel()
	b := setup(t, withPush(dispatch.Guard{}), func(sc *setupConfig) { sc.workflows = true })
	own := map[string]any{"queue": "hooks", "kind": "ping", "payload": map[string]int{"n": 1},
		"target": map[string]any{"url": "https://example.com/own", "method": "PUT"}, "callback_url": "https://example.com/cb"}
	cbOnly := map[string]any{"queue": "hooks", "kind": "ping", "failure_callback_url": "https://example.com/cb"}
	for _, probe := range []struct {
		path  string
		body  any
		field string
	}{
		{"/v1/jobs", own, "queue"},
		{"/v1/jobs", cbOnly, "queue"},
		{"/v1/queues/hooks/jobs", own, "queue"},
		{"/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"queue": "hooks", "kind": "ok"}, own}}, "jobs[1].queue"},
		{"/v1/workflows", map[string]any{"nodes": []any{map[string]any{"name": "a", "job": own}}}, "nodes[0].job.queue"},
	} {
		r := b.do(t, http.MethodPost, probe.path, probe.body)
		requireError(t, r, http.StatusBadRequest, "invalid_argument", probe.field)
		require.Contains(t, string(r.body), "PUT /v1/queues/hooks/config", "the message says how")
	}
	r := b.do(t, http.MethodGet, "/v1/queues/hooks", nil)
	requireError(t, r, http.StatusNotFound, "not_found", "") // nothing was enqueued

	// A push config without a target makes hooks a push queue whose
	// jobs bring their own.
	r = b.do(t, http.MethodPut, "/v1/queues/hooks/config", map[string]any{})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	r = b.do(t, http.MethodPost, "/v1/jobs", own)
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	j := r.object(t)
	require.Equal(t, "ping", j["kind"], "shown with the kind it was given, though stored as %s", dispatch.EnvelopeKind)
	// In the lists (and so the dashboard) and a single read alike.
	r = b.do(t, http.MethodGet, "/v1/queues/hooks/jobs/"+j["id"].(string), nil)
	require.Equal(t, "ping", r.object(t)["kind"])
	r = b.do(t, http.MethodGet, "/v1/queues/hooks/jobs?status=pending", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Contains(t, string(r.body), `"kind":"ping"`)
	require.NotContains(t, string(r.body), `"kind":"chronoq.push"`)
	var env dispatch.Envelope
	raw, _ := json.Marshal(j["payload"])
	require.NoError(t, json.Unmarshal(raw, &env))
	require.JSONEq(t, `{"n":1}`, string(env.Body))
	require.Equal(t, "ping", env.Kind)
	require.Equal(t, "https://example.com/cb", env.CallbackURL)
	require.Equal(t, "https://example.com/own", env.TargetOf().URL)

	r = b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "hooks", "kind": "ping",
		"target": map[string]any{"url": "http://10.0.0.1/"}})
	requireError(t, r, http.StatusBadRequest, "invalid_argument", "target.url")
	r = b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "hooks", "kind": "ping", "failure_callback_url": "gopher://x"})
	requireError(t, r, http.StatusBadRequest, "invalid_argument", "failure_callback_url")
	r = b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []any{
		map[string]any{"queue": "hooks", "kind": "ok"},
		map[string]any{"queue": "hooks", "kind": "ping", "target": map[string]any{"url": "http://localhost/"}}}})
	requireError(t, r, http.StatusBadRequest, "invalid_argument", "jobs[1].target.url")
}

// Without a push store, a target is refused and the config routes are
// not served.
func TestNoPushStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "ping", "target": map[string]any{"url": "https://example.com/"}})
	requireError(t, r, http.StatusBadRequest, "invalid_argument", "target")
	require.NotContains(t, string(b.srv.OpenAPI()), "/config\"")
}

// GET of a push job shows its deliveries (the attempts the dispatcher
// noted).
func TestJobDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t, withPush(dispatch.Guard{}))
	e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "hooks", Kind: "k"})
	require.NoError(t, err)
	jobs, err := b.client.Claim(b.ctx, "hooks", queue.ClaimOptions{})
	require.NoError(t, err)
	line := `{"attempt":1,"fence":1,"at":"2030-01-02T03:04:05Z","url":"https://example.com/","status":503,"duration_ms":12.5,"error":"HTTP 503","outcome":"retry"}`
	require.NoError(t, plumbing.Of(b.client).Note(b.ctx, "hooks", e.Job.ID, jobs[0].Token, line))
	r := b.do(t, http.MethodGet, "/v1/queues/hooks/jobs/"+e.Job.ID, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	ds := r.object(t)["deliveries"].([]any)
	require.Len(t, ds, 1)
	d := ds[0].(map[string]any)
	require.EqualValues(t, 503, d["status"])
	require.Equal(t, "retry", d["outcome"])
	require.EqualValues(t, 12.5, d["duration_ms"])
}

// PUT, GET and DELETE /v1/queues/{queue}/limits; the limits show in GET
// /v1/queues/{queue}; bad values are 400s naming the field.
func TestLimitsRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/v1/queues/lim/limits", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.JSONEq(t, `{"rate":0,"burst":0,"max_in_flight":0}`, string(r.body))

	r = b.do(t, http.MethodPut, "/v1/queues/lim/limits", map[string]any{"rate": 200, "max_in_flight": 5})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.JSONEq(t, `{"rate":200,"burst":20,"max_in_flight":5}`, string(r.body))
	l, err := b.client.Limits(b.ctx, "lim")
	require.NoError(t, err)
	require.Equal(t, queue.Limits{Rate: 200, Burst: 20, MaxInFlight: 5}, l)

	r = b.do(t, http.MethodGet, "/v1/queues/lim", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, map[string]any{"rate": 200.0, "burst": 20.0, "max_in_flight": 5.0}, r.object(t)["limits"])

	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"rate": -1}, "rate"},
		{map[string]any{"burst": 5}, "burst"},
		{map[string]any{"max_in_flight": -2}, "max_in_flight"},
	} {
		r = b.do(t, http.MethodPut, "/v1/queues/lim/limits", tc.body)
		requireError(t, r, http.StatusBadRequest, "invalid_argument", tc.field)
	}

	// HTTP claims honour them: 5 in flight at most, a held-back claim
	// with a wait answers empty at its end, an ack makes room.
	for range 7 {
		b.enqueue(t, map[string]any{"queue": "lim", "kind": "k"})
	}
	b.clock.Advance(time.Second)
	r = b.do(t, http.MethodPost, "/v1/queues/lim/claim", map[string]any{"max": 10, "visibility": "10s"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	got := r.object(t)["jobs"].([]any)
	require.Len(t, got, 5)
	r = b.do(t, http.MethodPost, "/v1/queues/lim/claim", map[string]any{"max": 10, "wait": "200ms"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Empty(t, r.object(t)["jobs"])
	first := got[0].(map[string]any)
	r = b.do(t, http.MethodPost, "/v1/queues/lim/jobs/"+first["id"].(string)+"/complete", map[string]any{"token": first["token"]})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	r = b.do(t, http.MethodPost, "/v1/queues/lim/claim", map[string]any{"max": 10})
	require.Len(t, r.object(t)["jobs"], 1)

	r = b.do(t, http.MethodDelete, "/v1/queues/lim/limits", nil)
	require.Equal(t, http.StatusNoContent, r.status)
	r = b.do(t, http.MethodGet, "/v1/queues/lim", nil)
	require.NotContains(t, r.object(t), "limits")

	// Taking limits from a queue never used makes none.
	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/neverused/limits", nil), http.StatusNotFound, "not_found", "")
	r = b.do(t, http.MethodGet, "/v1/queues/neverused", nil)
	require.Equal(t, http.StatusNotFound, r.status)
}

// A job of kind chronoq.push made by hand has its envelope checked exactly
// as the target and callbacks it stands for: each probe is a 400 naming
// the field, on single and batch enqueues, cron entries and workflow
// nodes, and nothing is enqueued; a good envelope is taken by all four.
func TestHandMadeEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t, withPush(dispatch.Guard{}), func(sc *setupConfig) { sc.realCron, sc.workflows = true, true })
	envelope := func(target map[string]any, more ...any) map[string]any {
		env := map[string]any{"body": map[string]int{"n": 1}, "kind": "ping"}
		if target != nil {
			t := map[string]any{"url": "https://example.com/hook"}
			for k, v := range target {
				t[k] = v
			}
			env["target"] = t
		}
		for i := 0; i+1 < len(more); i += 2 {
			env[more[i].(string)] = more[i+1]
		}
		return env
	}
	const years31 = int64(31 * 365 * 24 * time.Hour / time.Millisecond)
	r := b.do(t, http.MethodPut, "/v1/queues/hooks/config", map[string]any{}) // a push queue, jobs bring their targets
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	for _, tc := range []struct {
		name    string
		payload any
		field   string
	}{
		{"a file: URL", envelope(map[string]any{"url": "file:///etc/passwd"}), "payload.target.url"},
		{"a gopher: URL", envelope(map[string]any{"url": "gopher://example.com/"}), "payload.target.url"},
		{"a loopback URL", envelope(map[string]any{"url": "http://127.0.0.1:6379/"}), "payload.target.url"},
		{"a documentation address", envelope(map[string]any{"url": "http://192.0.2.2:8080/"}), "payload.target.url"},
		{"no URL", envelope(map[string]any{"url": ""}), "payload.target.url"},
		{"TRACE", envelope(map[string]any{"method": "TRACE"}), "payload.target.method"},
		{"a Host header", envelope(map[string]any{"headers": map[string]string{"Host": "internal.example"}}), "payload.target.headers"},
		{"a webhook-signature header", envelope(map[string]any{"headers": map[string]string{"webhook-signature": "v1,forged"}}), "payload.target.headers"},
		{"a chronoq-* header", envelope(map[string]any{"headers": map[string]string{"Chronoq-Queue": "other"}}), "payload.target.headers"},
		{"a header with a line break", envelope(map[string]any{"headers": map[string]string{"X-A": "a\r\nX-B: b"}}), "payload.target.headers"},
		{"a 31-year timeout", envelope(map[string]any{"timeout_ms": years31}), "payload.target.timeout_ms"},
		{"a timeout that overflows a Duration into range", envelope(map[string]any{"timeout_ms": int64(1<<63-1) / 1000 * 1000}), "payload.target.timeout_ms"},
		{"a negative timeout", envelope(map[string]any{"timeout_ms": -1}), "payload.target.timeout_ms"},
		{"a timeout under a second", envelope(map[string]any{"timeout_ms": 500}), "payload.target.timeout_ms"},
		{"a file: callback", envelope(nil, "callback_url", "file:///etc/passwd"), "payload.callback_url"},
		{"a metadata failure callback", envelope(nil, "failure_callback_url", "http://169.254.169.254/latest/"), "payload.failure_callback_url"},
		{"a bad kind", envelope(nil, "kind", "a kind"), "payload.kind"},
		{"a bad callback_of", envelope(nil, "callback_of", "../x"), "payload.callback_of"},
		{"an unknown field", envelope(nil, "targets", map[string]any{"url": "http://127.0.0.1/"}), "payload"},
		{"no body", map[string]any{"target": map[string]any{"url": "https://example.com/"}}, "payload.body"},
		{"not an object", []int{1}, "payload"},
		{"none", nil, "payload.body"},
	} {
		job := map[string]any{"queue": "hooks", "kind": dispatch.EnvelopeKind, "payload": tc.payload}
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs", job), http.StatusBadRequest, "invalid_argument", tc.field)
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []any{
			map[string]any{"queue": "hooks", "kind": "ok"}, job}}), http.StatusBadRequest, "invalid_argument", "jobs[1]."+tc.field)
		requireError(t, b.do(t, http.MethodPut, "/v1/cron/raw", map[string]any{"schedule": "* * * * *", "queue": "hooks",
			"kind": dispatch.EnvelopeKind, "payload": tc.payload}), http.StatusBadRequest, "invalid_argument", tc.field)
		requireError(t, b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{
			map[string]any{"name": "a", "job": job}}}), http.StatusBadRequest, "invalid_argument", "nodes[0].job."+tc.field)
	}
	// The envelope's kind beside a target or callbacks: one or the other.
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "hooks", "kind": dispatch.EnvelopeKind,
		"payload": envelope(nil), "target": map[string]any{"url": "https://example.com/"}}), http.StatusBadRequest, "invalid_argument", "kind")
	requireError(t, b.do(t, http.MethodGet, "/v1/cron/raw", nil), http.StatusNotFound, "not_found", "")

	// A good envelope is taken everywhere: the kind is not reserved.
	good := envelope(map[string]any{"method": "put", "headers": map[string]string{"X-Team": "a"}, "timeout_ms": 5000},
		"callback_url", "https://example.com/done")
	job := map[string]any{"queue": "hooks", "kind": dispatch.EnvelopeKind, "payload": good}
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/v1/jobs", job).status)
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []any{job}}).status)
	r = b.do(t, http.MethodPut, "/v1/cron/raw", map[string]any{"schedule": "* * * * *", "queue": "hooks",
		"kind": dispatch.EnvelopeKind, "payload": good})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{map[string]any{"name": "a", "job": job}}})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	// The three good jobs, and none of the probes.
	r = b.do(t, http.MethodGet, "/v1/queues/hooks", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.EqualValues(t, 3, r.object(t)["enqueued_total"])
}
