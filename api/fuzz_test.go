package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/api/apitest"
)

// The fuzz tests feed arbitrary requests to a server over a real Redis and
// hold it to its contract: never a 5xx for anything a client sends, never a
// panic (a recovered one would be a 500), every error in the API's shape.
// Without -fuzz they run over their seeds as unit tests. To fuzz:
//
//	go test -run '^$' -fuzz FuzzEnqueueRequest -fuzztime 200000x ./api/

var errorCodes = []string{"invalid_argument", "unauthenticated", "not_found", "method_not_allowed", "conflict",
	"lease_lost", "payload_too_large"}

// checkAnswer holds one answer to the contract: to the served OpenAPI
// document, and to the rules below.
func checkAnswer(t *testing.T, b *testBundle, req *http.Request, body string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if err := b.contract.Check(t.Context(), apitest.Exchange{Request: req, RequestBody: []byte(body),
		Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}); err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	if rec.Code >= 500 {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body)
	}
	if rec.Code == http.StatusNoContent || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		return
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s %s: %d, not JSON: %q", req.Method, req.URL, rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !slices.Contains(errorCodes, e.Error.Code) || e.Error.Message == "" {
			t.Fatalf("%s %s: %d, not an API error: %s", req.Method, req.URL, rec.Code, rec.Body)
		}
	}
}

// serveOne sends one request to b's server in process, as JSON.
func serveOne(t *testing.T, b *testBundle, method, target, body string, hdr ...string) {
	t.Helper()
	if !strings.HasPrefix(target, "/") {
		target = "/" + target
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://localhost"+target, strings.NewReader(body))
	if err != nil {
		return // not a request a client could send
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	b.srv.ServeHTTP(rec, req)
	checkAnswer(t, b, req, body, rec)
}

func FuzzEnqueueRequest(f *testing.F) {
	b := setup(f)
	for _, seed := range []struct{ body, key, queue string }{
		{`{"kind":"email","payload":{"to":"a@example.com"},"delay":"5m"}`, "", ""},
		{`{"queue":"q","kind":"k","run_at":"2030-01-02T03:04:05.000Z","max_attempts":5,"backoff":{"initial":"1s","factor":2,"max":"1h","jitter":0.2},"visibility":"30s","idempotency_key":"x","result_ttl":"1h"}`, "", ""},
		{`{"kind":"k"}`, "order-1", ""},
		{`{"kind":"k"}`, "", "pathq"},
		{`{"kind":"k","queue":"other"}`, "", "pathq"},
		{`{"kind":"k","delay":"-1s"}`, "", ""},
		{`{"kind":"k","delay":"9999999h"}`, "", ""},
		{`{"kind":"k","run_at":"9999-12-31T23:59:59Z"}`, "", ""},
		{`{"kind":"k","run_at":"0001-01-01T00:00:00Z"}`, "", ""},
		{`{"kind":"k","max_attempts":1e300}`, "", ""},
		{`{"kind":"k","backoff":{"factor":1e308,"max":"1h"}}`, "", ""},
		{`{"kind":"k","backoff":{"jitter":-0}}`, "", ""},
		{`{"kind":"k","backoff":null,"payload":null}`, "", ""},
		{`{"kind":"k","backoff":"x"}`, "", ""},
		{`{"kind":"k","payload":"\ud800"}`, "", ""},
		{`{"kind":"k","idempotency_key":"` + strings.Repeat("é", 200) + `"}`, "", ""},
		{`{"kind":"k","unknown":1}`, "", ""},
		{`{"kind":["k"]}`, "", ""},
		{`{"kind":"k"}{`, "", ""},
		{`[]`, "", ""},
		{`null`, "", ""},
		{``, "", ""},
		{`{"kind":"k","queue":"{q}"}`, "", ""},
		{`{"kind":"k"}`, "a\x00b", ""},
		{`{"kind":"k"}`, "", "Q%7B"},
	} {
		f.Add(seed.body, seed.key, seed.queue)
	}
	f.Fuzz(func(t *testing.T, body, key, queue string) {
		path := "/v1/jobs"
		if queue != "" {
			path = "/v1/queues/" + queue + "/jobs"
		}
		var hdr []string
		if key != "" {
			hdr = []string{"Idempotency-Key", key}
		}
		serveOne(t, b, http.MethodPost, path, body, hdr...)
	})
}

func FuzzBatchRequest(f *testing.F) {
	b := setup(f)
	for _, seed := range []string{
		`{"jobs":[{"kind":"a"},{"kind":"b","queue":"q2","delay":"1s"}]}`,
		`{"jobs":[{"kind":"a","idempotency_key":"k"},{"kind":"a","idempotency_key":"k"}]}`,
		`{"jobs":[{"kind":"a"},{"kind":""}]}`,
		`{"jobs":[{"kind":"a"},{"kind":"b","max_attempts":"3"}]}`,
		`{"jobs":[null]}`,
		`{"jobs":[1,"x",true]}`,
		`{"jobs":[]}`,
		`{"jobs":null}`,
		`{"jobs":{}}`,
		`{"job":[]}`,
		`{"jobs":[{"kind":"a","backoff":{"initial":"0s"}}]}`,
		`{"jobs":[{"kind":"a"}]} x`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		serveOne(t, b, http.MethodPost, "/v1/jobs/batch", body)
	})
}

// FuzzRequest sends any method, path and body to any route but the event
// streams (/v1/events and a job's /stream: text/event-stream, held to the
// document by their own tests). The server is drained,
// so a claim answers at once instead of long-polling.
func FuzzRequest(f *testing.F) {
	b := setupCron(f)
	b.srv.Drain()
	j := b.enqueue(f, map[string]any{"queue": "fz"})
	for _, seed := range []struct{ method, path, body string }{
		{"GET", "/v1/queues", ``},
		{"GET", "/v1/status?verbose=1", ``},
		{"GET", "/v1/queues/fz", ``},
		{"GET", "/v1/queues/fz/jobs?status=pending&limit=2&cursor=abc", ``},
		{"GET", "/v1/queues/fz/jobs?status=dead&cursor=%00", ``},
		{"GET", "/v1/queues/fz/jobs/" + j.ID, ``},
		{"PATCH", "/v1/queues/fz/jobs/" + j.ID, `{"delay":"1m"}`},
		{"PATCH", "/v1/queues/fz/jobs/" + j.ID, `{"run_at":"2030-01-01T00:00:00Z","delay":"1s"}`},
		{"DELETE", "/v1/queues/fz/jobs/nosuch", ``},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/retry", `{}`},
		{"POST", "/v1/queues/fz/pause", ``},
		{"POST", "/v1/queues/fz/resume", `{"x":1}`},
		{"POST", "/v1/queues/fz/reclaim", ``},
		{"POST", "/v1/queues/fz/dead/retry", `{"kind":"a"}`},
		{"DELETE", "/v1/queues/fz/dead?kind=%20", ``},
		{"POST", "/v1/queues/fz/claim", `{"wait":"1s","max":3,"visibility":"10s"}`},
		{"POST", "/v1/queues/fz/claim", `{"wait":"1h"}`},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/complete", `{"token":"t","result":[1]}`},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/fail", `{"token":"t","error":"e","retry_after":"1s"}`},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/heartbeat", `{"token":"t","extend":"1m"}`},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/cancel", `{"token":"t"}`},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/heartbeat", `{"token":"t","progress":{"percent":50.5,"message":"m"}}`},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/complete", `{"token":"t","artifacts":{"a.b":{"x":[1,"}"]}}}`},
		{"PUT", "/v1/queues/fz/jobs/" + j.ID + "/artifacts/report", `{"token":"t","value":"v"}`},
		{"GET", "/v1/queues/fz/jobs/" + j.ID + "/artifacts", ``},
		{"POST", "/v1/queues/fz/jobs/" + j.ID + "/logs", `{"token":"t","lines":["a","b"]}`},
		{"GET", "/v1/queues/fz/jobs/" + j.ID + "/logs?after=1&limit=5", ``},
		{"PUT", "/v1/cron/nightly", `{"schedule":"@hourly","kind":"k","timezone":"Europe/Berlin"}`},
		{"GET", "/v1/cron", ``},
		{"POST", "/v1/cron/nightly/trigger", ``},
		{"DELETE", "/v1/cron/nightly", ``},
		{"GET", "/healthz", ``},
		{"GET", "/metrics", ``},
		{"BREW", "/v1/jobs", `{}`},
		{"GET", "/v1/queues/%7Bx%7D", ``},
		{"GET", "/../../etc/passwd", ``},
	} {
		f.Add(seed.method, seed.path, seed.body)
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		// The stream runs until the client leaves.
		if p, err := url.PathUnescape(path); err != nil || strings.Contains(strings.ToLower(p), "events") ||
			strings.Contains(strings.ToLower(p), "stream") {
			return
		}
		serveOne(t, b, method, path, body)
	})
}
