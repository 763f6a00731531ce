package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
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
	// begin's contexts, without its claim loop and watchers
	w.bg = context.WithoutCancel(ctx)
	w.runCtx, w.cancelRun = context.WithCancel(w.bg)
	w.jobCtx, w.cancelJobs = context.WithCancelCause(w.bg)

	for range 3 {
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q1", Kind: "k"})
		require.NoError(t, err)
	}
	jobs, err := c.Claim(ctx, "q1", queue.ClaimOptions{Max: 3})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	status := func(j *queue.Job) queue.Status {
		got, err := c.Get(ctx, "q1", j.ID)
		require.NoError(t, err)
		return got.Status
	}
	now := clock.Now()
	w.start(q, jobs[0], now.Add(10*time.Millisecond))
	w.start(q, jobs[1], now.Add(20*time.Millisecond))
	require.NoError(t, clock.BlockUntilContext(ctx, 2)) // both held on their timers
	require.Empty(t, started, "no handler before its time")

	clock.Advance(10 * time.Millisecond)
	require.Equal(t, jobs[0].ID, <-started)
	// Its complete waits at the gate while the other run is held.
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return q.gate != nil
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, queue.StatusProcessing, status(jobs[0]))
	require.Empty(t, started)

	clock.Advance(10 * time.Millisecond)
	require.Equal(t, jobs[1].ID, <-started)
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
