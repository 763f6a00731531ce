package queue_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// contractComplete holds the contract of completion: idempotent for its
// token, kept for its retention, in a capped history.
func contractComplete(t *testing.T, setup setupFunc) {
	t.Run("CompleteIsIdempotentForItsToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		require.Equal(t, int64(1), b.stats(t).CompletedTotal)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, "other", queue.CompleteOptions{}), queue.ErrLeaseLost)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, "nosuchjob", "t", queue.CompleteOptions{}), queue.ErrNotFound)
	})

	// One call that names a job twice completes it once: the second ack
	// reads the job as the first left it (complete.lua reads every record
	// of the call at its start), for a job kept and one deleted at once.
	t.Run("CompleteManyNamingAJobTwiceCompletesItOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		dropping := b.dropping(t)
		b.enqueue(t, queue.NewJob{})
		b.enqueue(t, queue.NewJob{})
		cs := b.running(t, 2)
		for i, c := range cs {
			client := b.client
			if i == 1 {
				client = dropping
			}
			jobs, errs, err := client.CompleteMany(b.ctx, b.queue, []queue.Ack{
				{ID: c.ID, Token: c.Token, Result: json.RawMessage(`1`), ReturnJob: true},
				{ID: c.ID, Token: c.Token, Result: json.RawMessage(`2`), ReturnJob: true},
				{ID: c.ID, Token: "stale", ReturnJob: true},
			})
			require.NoError(t, err)
			require.NoError(t, errs[0])
			require.NoError(t, errs[1], "the same ack again: done already")
			require.ErrorIs(t, errs[2], queue.ErrLeaseLost)
			require.Equal(t, int64(i+1), b.stats(t).CompletedTotal)
			if i == 0 {
				require.JSONEq(t, `1`, string(jobs[0].Result), "the first ack's result is kept")
				require.JSONEq(t, `1`, string(jobs[1].Result))
			} else {
				require.Nil(t, jobs[0], "deleted at once")
				require.Nil(t, jobs[1])
				_, err := b.client.Get(b.ctx, b.queue, c.ID)
				require.ErrorIs(t, err, queue.ErrNotFound)
			}
		}
	})

	t.Run("CompleteManyAnswersTheJobAsGetReadsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// one payload kept in the record, one in the data hash
		small := json.RawMessage(`{"n":1}`)
		large := json.RawMessage(`{"s":"` + strings.Repeat("x", 300) + `"}`)
		b.enqueue(t, queue.NewJob{Payload: small})
		b.enqueue(t, queue.NewJob{Payload: large})
		for _, want := range []json.RawMessage{small, large} {
			c := b.claimOne(t)
			o := queue.CompleteOptions{Result: json.RawMessage(`{"ok":true}`),
				Artifacts: map[string]json.RawMessage{"report": json.RawMessage(`"r.txt"`)}}
			j, err := completeJob(b, c.ID, c.Token, o)
			require.NoError(t, err)
			require.NotNil(t, j)
			require.Equal(t, b.get(t, c.ID), j)
			require.Equal(t, queue.StatusCompleted, j.Status)
			require.JSONEq(t, string(want), string(j.Payload))
			require.JSONEq(t, `{"ok":true}`, string(j.Result))
			require.JSONEq(t, `{"report":"r.txt"}`, string(j.Artifacts))
			require.Empty(t, j.Token)
			// a repeated call answers the same job; another token, nothing
			again, err := completeJob(b, c.ID, c.Token, queue.CompleteOptions{})
			require.NoError(t, err)
			require.Equal(t, j, again)
			lost, err := completeJob(b, c.ID, "other", queue.CompleteOptions{})
			require.ErrorIs(t, err, queue.ErrLeaseLost)
			require.Nil(t, lost)
		}
		gone, err := completeJob(b, "nosuchjob", "t", queue.CompleteOptions{})
		require.ErrorIs(t, err, queue.ErrNotFound)
		require.Nil(t, gone)
		require.Equal(t, int64(2), b.stats(t).CompletedTotal)
	})

	t.Run("CompleteManyAnswersNoJobWhenNoneIsKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.Retention = -1 })
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		for range 2 { // and the repeated call, answered from the tombstone
			j, err := completeJob(b, c.ID, c.Token, queue.CompleteOptions{})
			require.NoError(t, err)
			require.Nil(t, j)
		}
		_, err := b.client.Get(b.ctx, b.queue, c.ID)
		require.ErrorIs(t, err, queue.ErrNotFound)
		require.Equal(t, int64(1), b.stats(t).CompletedTotal)
	})

	t.Run("CompletedJobExpiresAfterRetention", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j1 := b.enqueue(t, queue.NewJob{})
		j2 := b.enqueue(t, queue.NewJob{ResultTTL: 90 * time.Second})
		for range 2 {
			c := b.claimOne(t)
			require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		}
		ttl1 := b.expiresIn(t, j1.ID)
		ttl2 := b.expiresIn(t, j2.ID)
		require.InDelta(t, queue.DefaultRetention.Seconds(), ttl1.Seconds(), 5)
		require.InDelta(t, 90, ttl2.Seconds(), 5)
	})

	t.Run("CompleteManyAnswersARefusedAckInItsPlace", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.MaxPayloadBytes = 100 })
		jobs := b.running(t, 5)
		acks := []queue.Ack{
			{ID: jobs[0].ID, Token: jobs[0].Token, Result: json.RawMessage(`{"ok":1}`)},
			{ID: jobs[1].ID, Token: jobs[1].Token, Result: json.RawMessage(`not json`)},
			{ID: jobs[2].ID, Token: jobs[2].Token, Result: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)},
			{ID: jobs[3].ID, Token: jobs[3].Token, Artifacts: map[string]json.RawMessage{"a": json.RawMessage(`{`)}},
			{ID: jobs[4].ID, Token: jobs[4].Token, Result: json.RawMessage(`{"ok":4}`)},
		}
		for i := range acks {
			acks[i].ReturnJob = true
		}
		got, errs, err := b.client.CompleteMany(b.ctx, b.queue, acks)
		require.NoError(t, err)
		require.Len(t, errs, 5)
		require.Len(t, got, 5)
		var fe *queue.FieldError
		require.ErrorIs(t, errs[1], queue.ErrInvalid)
		require.ErrorAs(t, errs[1], &fe)
		require.Equal(t, "result", fe.Field)
		require.ErrorIs(t, errs[2], queue.ErrPayloadTooLarge)
		require.ErrorIs(t, errs[3], queue.ErrInvalid)
		for _, i := range []int{0, 4} { // the others went, each in its place
			require.NoError(t, errs[i])
			require.Equal(t, jobs[i].ID, got[i].ID)
			require.Equal(t, queue.StatusCompleted, b.get(t, jobs[i].ID).Status)
		}
		require.JSONEq(t, `{"ok":4}`, string(got[4].Result))
		for _, i := range []int{1, 2, 3} { // refused: no job, and left processing
			require.Nil(t, got[i])
			require.Equal(t, queue.StatusProcessing, b.get(t, jobs[i].ID).Status)
		}
		require.Equal(t, int64(2), b.stats(t).CompletedTotal)

		// Every ack refused: nothing is sent, and the jobs can still be
		// completed with acks that are valid.
		_, errs, err = b.client.CompleteMany(b.ctx, b.queue, acks[1:4])
		require.NoError(t, err)
		for _, e := range errs {
			require.Error(t, e)
		}
		require.Equal(t, int64(2), b.stats(t).CompletedTotal)
		for _, j := range jobs[1:4] {
			require.NoError(t, b.client.Complete(b.ctx, b.queue, j.ID, j.Token, queue.CompleteOptions{}))
		}
		require.Equal(t, int64(5), b.stats(t).CompletedTotal)
		// What is wrong with the call itself is still its error.
		_, _, err = b.client.CompleteMany(b.ctx, b.queue, nil)
		require.ErrorIs(t, err, queue.ErrInvalid)
	})

	t.Run("CompletedHistoryIsCapped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.CompletedHistory = 3 })
		jobs := b.running(t, 5)
		acks := make([]queue.Ack, len(jobs))
		for i, j := range jobs {
			acks[i] = queue.Ack{ID: j.ID, Token: j.Token}
		}
		_, errs, err := b.client.CompleteMany(b.ctx, b.queue, acks)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
		s := b.stats(t)
		require.Equal(t, int64(3), s.CompletedHistory)
		require.Equal(t, int64(5), s.CompletedTotal)
	})
}

// completeJob completes one claimed job of b's queue and answers the job
// as the completion left it (Ack.ReturnJob).
func completeJob(b *testBundle, id, token string, o queue.CompleteOptions) (*queue.Job, error) {
	jobs, errs, err := b.client.CompleteMany(b.ctx, b.queue, []queue.Ack{{ID: id, Token: token, Result: o.Result, Artifacts: o.Artifacts, ReturnJob: true}})
	if err != nil {
		return nil, err
	}
	return jobs[0], errs[0]
}
