package queue_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// waitResult is what a WaitEnded call answered.
type waitResult struct {
	job *queue.Job
	err error
}

// waitEnded starts WaitEnded on job id of the bundle's queue and answers
// once the call waits in the client's hub (the bundle's client has no
// other waiter).
func (b *testBundle) waitEnded(t *testing.T, id string, wait time.Duration) <-chan waitResult {
	t.Helper()
	got := make(chan waitResult, 1)
	go func() {
		j, err := b.client.WaitEnded(b.ctx, b.queue, id, wait)
		got <- waitResult{j, err}
	}()
	require.Eventually(t, func() bool { return plumbing.Of(b.client).JobWaiters() == 1 }, 10*time.Second, time.Millisecond,
		"the call waits")
	return got
}

// contractWait holds the contract of WaitEnded: it answers a job once it
// has ended, or as it is when the wait runs out; a retry is no end.
func contractWait(t *testing.T, setup setupFunc) {
	t.Run("WaitEndedAnswersACompletedJobWithItsResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		got := b.waitEnded(t, c.ID, time.Hour) // the fake clock: it never runs out by itself
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{Result: json.RawMessage(`{"n":42}`)}))
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, queue.StatusCompleted, r.job.Status)
		require.JSONEq(t, `{"n":42}`, string(r.job.Result))
		require.Zero(t, plumbing.Of(b.client).JobWaiters())
	})

	t.Run("WaitEndedAnswersADeadJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{MaxAttempts: 1})
		c := b.claimOne(t)
		got := b.waitEnded(t, c.ID, time.Hour)
		_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "boom"})
		require.NoError(t, err)
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, queue.StatusDead, r.job.Status)
		require.Equal(t, "boom", r.job.LastError)
	})

	t.Run("WaitEndedGoesOnThroughARetryUntilTheJobEnds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{MaxAttempts: 3})
		c := b.claimOne(t)
		got := b.waitEnded(t, c.ID, time.Hour)
		res, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "again"})
		require.NoError(t, err)
		require.NotEqual(t, queue.StatusDead, res.Status, "attempts are left: retried")
		// The retry published its event; the job is canceled only now.
		canceled, err := b.client.Cancel(b.ctx, b.queue, c.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusCanceled, canceled.Status)
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, queue.StatusCanceled, r.job.Status, "the retry did not end the wait")
		require.Equal(t, 1, r.job.Attempts)
	})

	t.Run("WaitEndedAnswersACanceledJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{})
		got := b.waitEnded(t, j.ID, time.Hour)
		_, err := b.client.Cancel(b.ctx, b.queue, j.ID)
		require.NoError(t, err)
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, queue.StatusCanceled, r.job.Status)
	})

	t.Run("WaitEndedAnswersTheJobAsItIsWhenTheWaitRunsOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{})
		got := b.waitEnded(t, j.ID, 5*time.Second)
		b.clock.Advance(5 * time.Second)
		r := <-got
		require.NoError(t, r.err, "a wait that runs out is no error")
		require.Equal(t, queue.StatusPending, r.job.Status)
		require.Equal(t, j.ID, r.job.ID)
	})

	t.Run("WaitEndedAnswersAnEndedJobAtOnceAndChecksItsArguments", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{Result: json.RawMessage(`1`)}))
		j, err := b.client.WaitEnded(b.ctx, b.queue, c.ID, time.Hour)
		require.NoError(t, err)
		require.Equal(t, queue.StatusCompleted, j.Status)
		require.JSONEq(t, `1`, string(j.Result))

		_, err = b.client.WaitEnded(b.ctx, b.queue, "nosuchjob", time.Hour)
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = b.client.WaitEnded(b.ctx, b.queue, c.ID, -time.Second)
		var fe *queue.FieldError
		require.True(t, errors.As(err, &fe), "got %v", err)
		require.Equal(t, "wait", fe.Field)
		_, err = b.client.WaitEnded(b.ctx, b.queue, "bad id!", time.Second)
		require.ErrorIs(t, err, queue.ErrInvalidID)
		j, err = b.client.WaitEnded(b.ctx, b.queue, c.ID, 0)
		require.NoError(t, err, "wait 0 reads the job")
		require.Equal(t, queue.StatusCompleted, j.Status)
		require.Zero(t, plumbing.Of(b.client).JobWaiters())
	})
}
