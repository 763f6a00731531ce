package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

// A handler's ctx carries the span of its run: on the first attempt a
// child of the job's enqueue, on a retry a root linked to it; its fail
// and complete are children of that span.
func TestTracingHandlerRunsInTheJobsTrace(t *testing.T) {
	rec := testutil.RecordSpans(t)
	b := setup(t)
	ctx, root := otel.Tracer("test").Start(b.ctx, "caller")
	e, err := b.client.Enqueue(ctx, queue.NewJob{Queue: "q1", Kind: "test", MaxAttempts: 2,
		Backoff: &queue.Backoff{Initial: time.Millisecond, Factor: 1, Max: time.Millisecond}})
	require.NoError(t, err)
	root.End()
	enq, ok := tracing.Parse(e.Job.TraceParent)
	require.True(t, ok)

	seen := make(chan trace.SpanContext, 2)
	b.mux.HandleFunc("test", func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
		seen <- trace.SpanContextFromContext(ctx)
		if j.Attempts == 1 {
			return nil, errors.New("first attempt fails")
		}
		return json.RawMessage(`{}`), nil
	})
	b.start(t, worker.Config{})
	// Each wait is bounded, so that a run that goes wrong fails here
	// rather than holding the package until its timeout.
	next := func(what string) trace.SpanContext {
		t.Helper()
		select {
		case sc := <-seen:
			return sc
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not run", what)
			return trace.SpanContext{}
		}
	}
	outcome := func() {
		t.Helper()
		select {
		case <-b.outcomes:
		case <-time.After(10 * time.Second):
			t.Fatal("no outcome reported")
		}
	}
	first := next("the first attempt")
	require.Equal(t, enq.TraceID(), first.TraceID())
	// The first attempt's fail recorded (its retry due 1 ms after the
	// fake clock's now), then its backoff passes. Advancing before the
	// fail would put the retry 1 ms past the advanced clock, which no
	// one moves again.
	outcome()
	b.clock.Advance(time.Second)
	second := next("the retry")
	require.NotEqual(t, enq.TraceID(), second.TraceID(), "a retry is a trace of its own")
	outcome()

	var spans []string
	require.Eventually(t, func() bool { return len(rec.Ended()) > 0 && hasSpan(rec.Ended(), second.SpanID()) }, 5*time.Second, time.Millisecond)
	for _, s := range rec.Ended() {
		spans = append(spans, s.Name())
		switch s.SpanContext().SpanID() {
		case first.SpanID():
			require.Equal(t, "process q1", s.Name())
			require.Equal(t, enq.SpanID(), s.Parent().SpanID())
			require.Equal(t, codes.Error, s.Status().Code)
		case second.SpanID():
			require.Equal(t, "process q1", s.Name())
			require.False(t, s.Parent().IsValid())
			require.Len(t, s.Links(), 1)
			require.Equal(t, enq.SpanID(), s.Links()[0].SpanContext.SpanID())
		}
	}
	// The attempt's fail is a child of its run: the span of its wait for
	// the batched call (which has a span of its own, outside the run's).
	var failed bool
	for _, s := range rec.Ended() {
		failed = failed || s.Name() == "fail q1" && s.Parent().SpanID() == first.SpanID()
	}
	require.True(t, failed, "no fail span of the first run among %v", spans)
}

func hasSpan[S interface{ SpanContext() trace.SpanContext }](spans []S, id trace.SpanID) bool {
	for _, s := range spans {
		if s.SpanContext().SpanID() == id {
			return true
		}
	}
	return false
}
