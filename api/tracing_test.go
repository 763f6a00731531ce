package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/testutil"
)

// While tracing is on as the server is built, a request's span is a child
// of its traceparent and named after its route; the job answers, in the
// enqueue's, a GET's and a claim's Job resource (each held to the served
// document), the traceparent of that span (a single enqueue) or of the
// batch's enqueue into its queue, a child of it. The probes make no span.
func TestTracingRequestsAndTheJobResource(t *testing.T) {
	rec := testutil.RecordSpans(t)
	b := setup(t)
	tid := trace.TraceID{0x7a, 0x11}
	tp := "00-" + tid.String() + "-" + trace.SpanID{0x3}.String() + "-01"
	r := b.do(t, http.MethodPost, "/v1/queues/tq/jobs", map[string]any{"kind": "k"}, "traceparent", tp)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	one := r.object(t)
	sc, ok := tracing.Parse(one["traceparent"].(string))
	require.True(t, ok, "%v", one)
	require.Equal(t, tid, sc.TraceID())

	r = b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"queue": "tq", "kind": "k"}}}, "traceparent", tp)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	batch := r.object(t)["jobs"].([]any)[0].(map[string]any)

	got := b.do(t, http.MethodGet, "/v1/queues/tq/jobs/"+one["id"].(string), nil).object(t)
	require.Equal(t, one["traceparent"], got["traceparent"])
	claimed := b.do(t, http.MethodPost, "/v1/queues/tq/claim", map[string]any{"max": 2}).object(t)["jobs"].([]any)
	require.Len(t, claimed, 2)
	require.Equal(t, one["traceparent"], claimed[0].(map[string]any)["traceparent"])
	require.Equal(t, batch["traceparent"], claimed[1].(map[string]any)["traceparent"])
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", nil).status)

	spans := map[trace.SpanID]string{}
	parents := map[trace.SpanID]trace.SpanID{}
	for _, s := range testutil.SpansOf(rec, tid) {
		spans[s.SpanContext().SpanID()] = s.Name()
		parents[s.SpanContext().SpanID()] = s.Parent().SpanID()
	}
	require.Equal(t, "POST /v1/queues/:queue/jobs", spans[sc.SpanID()])
	require.Equal(t, trace.SpanID{0x3}, parents[sc.SpanID()])
	bsc, ok := tracing.Parse(batch["traceparent"].(string))
	require.True(t, ok)
	require.Equal(t, "send tq", spans[bsc.SpanID()])
	require.Equal(t, "POST /v1/jobs/batch", spans[parents[bsc.SpanID()]])
	for _, s := range rec.Ended() {
		require.NotEqual(t, "GET /healthz", s.Name())
	}
}
