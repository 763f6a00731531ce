package queue_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

func tracingClient(t *testing.T) (*queue.Client, *redis.Client, string) {
	t.Helper()
	rdb, ns := testutil.Redis(t), testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, rdb, ns
}

// Tracing off (no TracerProvider installed), a job stores no trace
// context, even when the caller's ctx holds a span, and its record is
// what it was without tracing.
func TestTracingOffStoresNothing(t *testing.T) {
	t.Parallel()
	c, rdb, ns := tracingClient(t)
	ctx := context.Background()
	parent := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	if tracing.On() {
		t.Skip("a test of this package has tracing on") // RecordSpans's tests are not parallel: not met
	}
	e, err := c.Enqueue(parent, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	require.Empty(t, e.Job.TraceParent)
	jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Empty(t, jobs[0].TraceParent)
	rec, err := rdb.HGet(ctx, ns+":{q}:jobs", e.Job.ID).Result()
	require.NoError(t, err)
	require.NotContains(t, rec, "00-", "no traceparent in the record")
}

// Tracing on, the enqueue's span ("send <queue>", a child of the caller's)
// is stored with the job, claims answer it, and claim, complete, fail and
// promote have spans: the claim's links to the job's enqueue.
func TestTracingStoresTheEnqueuesSpan(t *testing.T) {
	rec := testutil.RecordSpans(t)
	c, _, _ := tracingClient(t)
	ctx, root := otel.Tracer("test").Start(context.Background(), "caller")
	tid := root.SpanContext().TraceID()

	e, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", MaxAttempts: 2})
	require.NoError(t, err)
	sc, ok := tracing.Parse(e.Job.TraceParent)
	require.True(t, ok, "traceparent %q", e.Job.TraceParent)
	require.Equal(t, tid, sc.TraceID())
	got, err := c.Get(ctx, "q", e.Job.ID)
	require.NoError(t, err)
	require.Equal(t, e.Job.TraceParent, got.TraceParent)

	jobs, err := c.Claim(context.Background(), "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, e.Job.TraceParent, jobs[0].TraceParent)
	_, err = c.Fail(ctx, "q", jobs[0].ID, jobs[0].Token, queue.FailOptions{Error: "boom", RetryAt: time.Now()})
	require.NoError(t, err)
	jobs, err = c.Claim(context.Background(), "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.NoError(t, c.Complete(ctx, "q", jobs[0].ID, jobs[0].Token, queue.CompleteOptions{Result: json.RawMessage(`1`)}))

	// A batch: its jobs store its span, and one given a traceparent keeps it.
	given := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	out, err := c.EnqueueBatch(ctx, []queue.NewJob{{Queue: "b", Kind: "k"}, {Queue: "b", Kind: "k", TraceParent: given},
		{Queue: "b", Kind: "k", Delay: time.Millisecond}})
	require.NoError(t, err)
	require.Equal(t, given, out[1].Job.TraceParent)
	require.Equal(t, out[0].Job.TraceParent, out[2].Job.TraceParent)
	require.NotEqual(t, given, out[0].Job.TraceParent)
	require.Eventually(t, func() bool {
		n, _, err := c.Promote(ctx, "b", 0)
		return err == nil && n == 1
	}, 5*time.Second, 5*time.Millisecond)
	root.End()

	names := map[string]trace.SpanContext{}
	for _, s := range testutil.SpansOf(rec, tid) {
		names[s.Name()] = s.Parent()
	}
	for _, n := range []string{"send q", "fail q", "complete q", "send b", "promote b"} {
		require.Contains(t, names, n)
	}
	require.Equal(t, root.SpanContext().SpanID(), names["send q"].SpanID())
	// Claims are made without the caller's ctx: roots of their own, linked to the job's enqueue.
	var linked int
	for _, s := range rec.Ended() {
		if s.Name() == "claim q" {
			require.Len(t, s.Links(), 1)
			require.Equal(t, sc.SpanID(), s.Links()[0].SpanContext.SpanID())
			linked++
		}
	}
	require.Equal(t, 2, linked)

	// A later version's traceparent is read by its first four fields and
	// stored as version 00.
	e, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", TraceParent: "01" + given[2:] + "-\x00more"})
	require.NoError(t, err)
	require.Equal(t, given, e.Job.TraceParent)
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", TraceParent: "00-nothex"})
	require.ErrorIs(t, err, queue.ErrInvalid)
	require.True(t, strings.Contains(err.Error(), "trace_parent"), err.Error())
}
