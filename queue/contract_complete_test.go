package queue_test

import (
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
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, nil))
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, nil))
		require.Equal(t, int64(1), b.stats(t).CompletedTotal)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, "other", nil), queue.ErrLeaseLost)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, "nosuchjob", "t", nil), queue.ErrNotFound)
	})

	t.Run("CompletedJobExpiresAfterRetention", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j1 := b.enqueue(t, queue.NewJob{})
		j2 := b.enqueue(t, queue.NewJob{ResultTTL: 90 * time.Second})
		for range 2 {
			c := b.claimOne(t)
			require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, nil))
		}
		ttl1 := b.expiresIn(t, j1.ID)
		ttl2 := b.expiresIn(t, j2.ID)
		require.InDelta(t, queue.DefaultRetention.Seconds(), ttl1.Seconds(), 5)
		require.InDelta(t, 90, ttl2.Seconds(), 5)
	})

	t.Run("CompletedHistoryIsCapped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.CompletedHistory = 3 })
		for range 5 {
			b.enqueue(t, queue.NewJob{})
		}
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 5})
		require.NoError(t, err)
		acks := make([]queue.Ack, len(jobs))
		for i, j := range jobs {
			acks[i] = queue.Ack{ID: j.ID, Token: j.Token}
		}
		errs, err := b.client.CompleteMany(b.ctx, b.queue, acks)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
		s := b.stats(t)
		require.Equal(t, int64(3), s.CompletedHistory)
		require.Equal(t, int64(5), s.CompletedTotal)
	})
}
