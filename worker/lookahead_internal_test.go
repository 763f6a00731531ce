package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Runs of jobs claimed ahead of their due time, driven by hand on a worker
// whose claim loop does not run: each starts at its time, and the
// completes of a queue wait while one of its runs is held.
func TestHeldRunsStartAtTheirTimeAndCompleteTogether(t *testing.T) {
	t.Parallel()
	started := make(chan string, 10)
	w, q, clock, ctx := idleWorkerOf(t, HandlerFunc(func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
		started <- j.ID
		return nil, nil
	}))
	c := w.client
	jobs := claimedBy(t, ctx, w, 3)
	next := func() string { // the next handler to start, within ctx
		t.Helper()
		select {
		case id := <-started:
			return id
		case <-ctx.Done():
			t.Fatal("no handler started")
			return ""
		}
	}
	status := func(j *queue.Job) queue.Status {
		got, err := c.Get(ctx, "q1", j.ID)
		require.NoError(t, err)
		return got.Status
	}
	now := clock.Now()
	w.start(q, jobs[0], now.Add(10*time.Millisecond))
	w.start(q, jobs[1], now.Add(20*time.Millisecond))
	require.NoError(t, clock.BlockUntilContext(ctx, 1)) // both held on one alarm, for the first
	require.Eventually(t, func() bool {
		w.holds.mu.Lock()
		defer w.holds.mu.Unlock()
		return len(w.holds.q) == 2
	}, 10*time.Second, time.Millisecond)
	require.Empty(t, started, "no handler before its time")

	clock.Advance(10 * time.Millisecond)
	require.Equal(t, jobs[0].ID, next())
	// Its complete waits at the gate while the other run is held.
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return q.gate != nil
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, queue.StatusProcessing, status(jobs[0]))
	require.Empty(t, started)

	clock.Advance(10 * time.Millisecond)
	require.Equal(t, jobs[1].ID, next())
	w.live.Wait() // both settled: the last held run's start opened the gate
	require.Equal(t, queue.StatusCompleted, status(jobs[0]))
	require.Equal(t, queue.StatusCompleted, status(jobs[1]))

	// A run held at the stop is handed back, its handler never called.
	w.start(q, jobs[2], clock.Now().Add(time.Hour))
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	require.Equal(t, 1, w.handBack())
	w.live.Wait()
	w.wg.Wait()
	require.Empty(t, started)
	require.Equal(t, queue.StatusPending, status(jobs[2]))
}

// claimedBy gives w begin's contexts, without its claim loop and
// watchers, and answers n jobs of q1 claimed (due now) for it to start
// by hand.
func claimedBy(t *testing.T, ctx context.Context, w *Worker, n int) []*queue.Job {
	t.Helper()
	w.bg = context.WithoutCancel(ctx)
	w.runCtx, w.cancelRun = context.WithCancel(w.bg)
	w.jobCtx, w.cancelJobs = context.WithCancelCause(w.bg)
	for range n {
		_, err := w.client.Enqueue(ctx, queue.NewJob{Queue: "q1", Kind: "k"})
		require.NoError(t, err)
	}
	jobs, err := w.client.Claim(ctx, "q1", queue.ClaimOptions{Max: n})
	require.NoError(t, err)
	require.Len(t, jobs, n)
	return jobs
}

// A held run's span ("process q1") starts with its handler, not with its
// claim: its length is the run's. (Not parallel: it sets the process's
// tracer provider.)
func TestAHeldRunsSpanStartsWhenItStarts(t *testing.T) {
	rec := testutil.RecordSpans(t)
	spans := make(chan trace.SpanContext, 1)
	w, q, clock, ctx := idleWorkerOf(t, HandlerFunc(func(ctx context.Context, _ *queue.Job) (json.RawMessage, error) {
		spans <- trace.SpanContextFromContext(ctx)
		return nil, nil
	}))
	jobs := claimedBy(t, ctx, w, 1)
	w.start(q, jobs[0], clock.Now().Add(10*time.Millisecond))
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	held := time.Now() // the spans' clock is the real one
	clock.Advance(10 * time.Millisecond)
	var sc trace.SpanContext
	select {
	case sc = <-spans:
	case <-ctx.Done():
		t.Fatal("the handler did not start")
	}
	require.True(t, sc.IsValid(), "the handler runs in its span")
	w.live.Wait()
	found := false
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == sc.SpanID() {
			found = true
			require.Equal(t, "process q1", s.Name())
			require.False(t, s.StartTime().Before(held), "started while the job was held")
		}
	}
	require.True(t, found, "the run's span ended")
}
