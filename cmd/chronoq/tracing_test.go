package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

func TestTracingWanted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		on   bool
		fail string
	}{
		{env: nil, on: false},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, on: true},
		{env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"}, on: true},
		{env: []string{"OTEL_TRACES_EXPORTER", "otlp"}, on: true},
		{env: []string{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, on: false},
		{env: []string{"OTEL_SDK_DISABLED", "true", "OTEL_TRACES_EXPORTER", "otlp"}, on: false},
		{env: []string{"OTEL_TRACES_EXPORTER", "zipkin"}, fail: `OTEL_TRACES_EXPORTER="zipkin"`},
	} {
		on, err := tracingWanted(env(c.env...))
		if c.fail != "" {
			require.ErrorContains(t, err, c.fail)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.on, on, "%v", c.env)
	}
	_, err := setupTracing(context.Background(), env("OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"))
	require.ErrorContains(t, err, "http/protobuf")
}

// pushTarget is a push queue's receiver that keeps the traceparent of
// each request it gets.
func pushTarget(t *testing.T) (*httptest.Server, chan string) {
	t.Helper()
	got := make(chan string, 10)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(rc.Close)
	return rc, got
}

// enqueueTraced posts a job of kind to queue q with a traceparent of
// trace tid, and answers the job as the API answered it.
func enqueueTraced(t *testing.T, s *served, q, kind string, tid trace.TraceID, parent trace.SpanID) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.base+"/v1/jobs", strings.NewReader(`{"queue":"`+q+`","kind":"`+kind+`"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+tid.String()+"-"+parent.String()+"-01")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var j map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&j))
	require.Equal(t, http.StatusCreated, res.StatusCode, "%v", j)
	return j
}

// One trace, recorded in memory, from an HTTP enqueue (carrying a
// traceparent) through a Go worker, whose handler enqueues a push job,
// to the push target's request: the server's span is a child of the
// request's traceparent, the worker's run a child of the server's span,
// the push job's enqueue a child of the run, the dispatcher's run a child
// of that enqueue, and the target receives the span of its request.
func TestTracingOneTraceFromHTTPToPushTarget(t *testing.T) {
	rec := testutil.RecordSpans(t)
	rc, got := pushTarget(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	s := startServe(t, []string{"--redis-url", redisURL, "--namespace", ns, "--dispatch-allow", "127.0.0.1"}, nil)
	code, body := s.do(t, http.MethodPut, "/v1/queues/hooks/config", `{"target":{"url":"`+rc.URL+`/hook"}}`)
	require.Equal(t, http.StatusOK, code, "%v", body)

	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	mux := worker.NewMux()
	mux.HandleFunc("step", func(ctx context.Context, _ *queue.Job) (json.RawMessage, error) {
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: "hooks", Kind: "ping"})
		return nil, err
	})
	w, err := worker.New(worker.Config{Client: c, Handler: mux, Queues: []worker.QueueConfig{{Name: "work"}}, IdleWait: 50 * time.Millisecond})
	require.NoError(t, err)
	wh := lifecycle.Start(t.Context(), w)

	tid, parent := trace.TraceID{0xc4, 1, 2, 3}, trace.SpanID{0x5e, 1}
	j := enqueueTraced(t, s, "work", "step", tid, parent)
	sc, ok := tracing.Parse(j["traceparent"].(string))
	require.True(t, ok, "the job answers its traceparent: %v", j)
	require.Equal(t, tid, sc.TraceID())

	// An HTTP worker gets the job's trace context in the claim's answer.
	pulled := enqueueTraced(t, s, "pull", "k", trace.TraceID{0xc5}, parent)
	code, body = s.do(t, http.MethodPost, "/v1/queues/pull/claim", `{"max":1}`)
	require.Equal(t, http.StatusOK, code, "%v", body)
	claimed := body["jobs"].([]any)
	require.Len(t, claimed, 1)
	require.Equal(t, pulled["traceparent"], claimed[0].(map[string]any)["traceparent"])

	var pushed string
	select {
	case pushed = <-got:
	case <-time.After(20 * time.Second):
		t.Fatalf("the push target got no request\n%s", s.logs)
	}
	require.NoError(t, wh.Stop(context.Background()))
	s.stop()

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range testutil.SpansOf(rec, tid) {
		spans[sp.Name()] = sp
	}
	names := func() []string {
		var out []string
		for n := range spans {
			out = append(out, n)
		}
		return out
	}
	chain := []string{"POST /v1/jobs", "process work", "send hooks", "process hooks", "dispatch hooks"}
	for _, n := range chain {
		require.Contains(t, spans, n, "spans of the trace: %v", names())
	}
	require.Equal(t, parent, spans["POST /v1/jobs"].Parent().SpanID())
	for i := 1; i < len(chain); i++ {
		require.Equal(t, spans[chain[i-1]].SpanContext().SpanID(), spans[chain[i]].Parent().SpanID(), "%s's parent", chain[i])
	}
	require.Equal(t, "00-"+tid.String()+"-"+spans["dispatch hooks"].SpanContext().SpanID().String()+"-01", pushed)
	require.Contains(t, spans, "complete work") // the run's outcome, under its span
}

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes each
// export request and keeps the spans, by trace id.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]string // trace id (hex) -> span names
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	var req collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP protobuf export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				id := hex.EncodeToString(sp.GetTraceId())
				o.spans[id] = append(o.spans[id], sp.GetName())
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (o *otlpReceiver) of(id trace.TraceID) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.spans[id.String()]...)
}

// chronoq serve, configured by the OTEL_* environment alone, exports one
// trace from an HTTP enqueue through its dispatcher to the push target
// over OTLP/HTTP: a real receiver on loopback decodes the export, and
// the spans it holds are flushed by serve's stop.
func TestServeExportsTracesOverOTLP(t *testing.T) {
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })
	recv := &otlpReceiver{spans: map[string][]string{}}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "chronoq-test")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	getenv := func(k string) string {
		if strings.HasPrefix(k, "OTEL_") {
			return os.Getenv(k)
		}
		return ""
	}
	rc, got := pushTarget(t)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done := make(chan string, 1), make(chan int, 1)
	var logs testutil.LogBuffer
	go func() {
		done <- runServeHooked(ctx, "serve", []string{"--listen", "127.0.0.1:0", "--redis-url", redisURL, "--namespace", ns,
			"--dispatch-allow", "127.0.0.1"}, getenv, &logs, serveHooks{onListen: func(a string) { addr <- a }})
	}()
	s := &served{logs: &logs}
	select {
	case a := <-addr:
		s.base = "http://" + a
	case code := <-done:
		t.Fatalf("serve ended at start: %d\n%s", code, &logs)
	}
	code, body := s.do(t, http.MethodPut, "/v1/queues/hooks/config", `{"target":{"url":"`+rc.URL+`/hook"}}`)
	require.Equal(t, http.StatusOK, code, "%v", body)
	tid := trace.TraceID{0x07, 0x1e, 9}
	enqueueTraced(t, s, "hooks", "ping", tid, trace.SpanID{0x0a, 1})
	select {
	case p := <-got:
		require.True(t, strings.HasPrefix(p, "00-"+tid.String()+"-"), "the push request's traceparent %q", p)
	case <-time.After(20 * time.Second):
		t.Fatalf("the push target got no request\n%s", &logs)
	}
	cancel()
	select {
	case code := <-done:
		require.Zero(t, code, "%s", &logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop\n%s", &logs)
	}
	// serve's stop flushed its spans: the receiver holds the whole trace.
	spans := recv.of(tid)
	for _, n := range []string{"POST /v1/jobs", "process hooks", "dispatch hooks", "complete hooks"} {
		require.Contains(t, spans, n, "spans the receiver got of the trace: %v", spans)
	}
	require.Contains(t, logs.String(), "tracing on")
}
