package queue_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// contractRetried holds the contract of retried calls: an idempotency key
// replays the first job, and every script run twice with the same
// arguments gives the same outcome.
func contractRetried(t *testing.T, setup setupFunc) {
	t.Run("IdempotencyKeyReplaysFirstJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.enqueue(t, queue.NewJob{IdempotencyKey: "order-42", Delay: time.Minute})
		again, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "other", IdempotencyKey: "order-42"})
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, first.ID, again.Job.ID)
		require.Equal(t, "test", again.Job.Kind)
		s := b.stats(t)
		require.Equal(t, int64(1), s.EnqueuedTotal)
		require.Equal(t, int64(1), s.Scheduled)
		require.Zero(t, s.Pending)
		// Within one batch too.
		out, err := b.client.EnqueueBatch(b.ctx, []queue.NewJob{
			{Queue: b.queue, Kind: "a", IdempotencyKey: "k2"}, {Queue: b.queue, Kind: "b", IdempotencyKey: "k2"}})
		require.NoError(t, err)
		require.False(t, out[0].Replayed)
		require.True(t, out[1].Replayed)
		require.Equal(t, out[0].Job.ID, out[1].Job.ID)
	})

	t.Run("IdempotentJobOutlivesNoRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.Retention = time.Second; c.IdempotencyTTL = time.Hour })
		j := b.enqueue(t, queue.NewJob{IdempotencyKey: "once"})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		ttl := b.expiresIn(t, j.ID)
		require.Greater(t, ttl, 59*time.Minute, "the job is kept as long as its idempotency record")
	})

	t.Run("ScriptsAreSafeToRunTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A claim's reply lost and the command retried: the retry answers the
		// same jobs instead of claiming more.
		for range 4 {
			b.enqueue(t, queue.NewJob{})
		}
		later := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		args := []any{2, "tok", 0, "1", 0, 0, ""} // max, token base, visibility, want next, wait, ahead, eligible label sets
		r1, err := b.client.RunScript(b.ctx, "claim", b.queue, args...)
		require.NoError(t, err)
		r2, err := b.client.RunScript(b.ctx, "claim", b.queue, args...)
		require.NoError(t, err)
		read := func(r any) []*queue.Job {
			var jobs []*queue.Job
			for _, packed := range r.([]any)[4:] {
				j, err := queue.ParsePacked(b.queue, packed.(string))
				require.NoError(t, err)
				jobs = append(jobs, j)
			}
			return jobs
		}
		require.Len(t, read(r1), 2)
		require.Equal(t, read(r1), read(r2))
		require.Empty(t, r1.([]any)[1], "a claim that took its max is handed no due time")
		require.Empty(t, r2.([]any)[1], "nor is its rerun")
		require.Equal(t, queue.StatusProcessing, read(r1)[0].Status)
		require.Equal(t, 1, read(r1)[0].Attempts)
		require.Equal(t, int64(2), b.stats(t).Processing)
		require.Equal(t, int64(2), b.stats(t).Pending)
		// One with room is handed the next due time, and so is its rerun.
		args = []any{10, "tok2", 0, "1", 0, 0, ""}
		r1, err = b.client.RunScript(b.ctx, "claim", b.queue, args...)
		require.NoError(t, err)
		r2, err = b.client.RunScript(b.ctx, "claim", b.queue, args...)
		require.NoError(t, err)
		require.Len(t, read(r1), 2)
		require.Equal(t, read(r1), read(r2))
		next, err := strconv.ParseFloat(r1.([]any)[1].(string), 64)
		require.NoError(t, err)
		require.Equal(t, float64(later.RunAt.UnixMilli()), math.Floor(next), "the next due time")
		require.Equal(t, r1.([]any)[1], r2.([]any)[1], "the rerun answers the next due time too")

		// An enqueue sent twice makes one job, and a job claimed between the
		// two runs is left alone.
		spec := queue.EncodeSpec(3, 30*time.Second, queue.DefaultBackoff.Encode())
		job := []any{"0192f3c4a1b27c9e8d1f0a3b4c5d6e7f", "k", "{}", spec, "d0", "", "", "", "", "", ""}
		enq := append([]any{60000, 64, 0, 0, 1}, job...)
		_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		claimed, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		s := b.stats(t)
		require.Zero(t, s.Pending)
		require.Equal(t, int64(5), s.Processing)
		require.Equal(t, int64(6), s.EnqueuedTotal) // and the scheduled one
		require.Equal(t, queue.StatusProcessing, b.get(t, "0192f3c4a1b27c9e8d1f0a3b4c5d6e7f").Status)

		// A call of several jobs, sent twice, makes them once.
		two := []any{60000, 64, 0, 0, 2,
			"0192f3c4a1b27c9e8d1f0a3b4c5d6e80", "k", "{}", spec, "d0", "", "", "", "", "", "",
			"0192f3c4a1b27c9e8d1f0a3b4c5d6e81", "k", "{}", spec, "d3600000000", "", "", "", "", "", ""}
		for range 2 {
			_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, two...)
			require.NoError(t, err)
		}
		s = b.stats(t)
		require.Equal(t, int64(1), s.Pending)
		require.Equal(t, int64(2), s.Scheduled) // with the one due in a minute
		require.Equal(t, int64(8), s.EnqueuedTotal)
	})
}
