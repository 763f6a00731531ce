package queue_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// contractFail holds the contract of failure: retries on the backoff
// policy or at a given time, death when the attempts are spent, reclaim of
// lapsed leases, and the capped dead set.
func contractFail(t *testing.T, setup setupFunc) {
	t.Run("BackoffMatchesPolicyWithinBounds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bo := queue.Backoff{Initial: time.Second, Factor: 3, Max: time.Minute, Jitter: 0.25}
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 6, Backoff: &bo})
		prev := time.Duration(0)
		for attempt := 1; attempt <= 5; attempt++ {
			c := b.claimOne(t)
			require.Equal(t, attempt, c.Attempts)
			res, err := b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "boom"})
			require.NoError(t, err)
			require.Equal(t, queue.StatusScheduled, res.Status)
			// The backoff counts from Redis's now, a little after the fake
			// clock's.
			d := res.RunAt.Sub(b.clock.Now())
			lo, hi := bo.Bounds(attempt)
			require.GreaterOrEqual(t, d, lo-time.Millisecond, "attempt %d", attempt)
			require.LessOrEqual(t, d, hi+time.Second, "attempt %d", attempt)
			if attempt <= 3 { // until the cap, every delay is longer than the last
				require.Greater(t, d, prev)
			}
			prev = d
			require.Equal(t, res.RunAt, b.get(t, j.ID).RunAt)
			b.clock.Advance(res.Due.Sub(b.clock.Now()))
			moved, _, err := b.client.Promote(b.ctx, b.queue, 0)
			require.NoError(t, err)
			require.Equal(t, 1, moved)
		}
		require.Equal(t, int64(5), b.stats(t).RetriedTotal)
	})

	t.Run("PoisonJobDiesWithMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bo := queue.Backoff{Initial: time.Second, Factor: 2, Max: time.Minute}
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 4, Backoff: &bo})
		for attempt := 1; ; attempt++ {
			c := b.claimOne(t)
			res, err := b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: fmt.Sprintf("boom %d", attempt)})
			require.NoError(t, err)
			if res.Status == queue.StatusDead {
				break
			}
			require.Less(t, attempt, 4)
			b.clock.Advance(time.Minute)
			_, _, err = b.client.Promote(b.ctx, b.queue, 0)
			require.NoError(t, err)
		}
		dead := b.get(t, j.ID)
		require.Equal(t, queue.StatusDead, dead.Status)
		require.Equal(t, 4, dead.Attempts)
		require.Equal(t, "boom 4", dead.LastError)
		requireSoonAfter(t, b.clock.Now(), dead.DiedAt)
		s := b.stats(t)
		require.Equal(t, int64(1), s.Dead)
		require.Equal(t, int64(4), s.FailedTotal)
		require.Equal(t, int64(3), s.RetriedTotal)
		require.Equal(t, int64(1), s.DeadTotal)
		require.Zero(t, s.Pending+s.Scheduled+s.Processing)
	})

	t.Run("FailDeadAndRetryAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 10})
		c := b.claimOne(t)
		at := b.clock.Now().Add(1500 * time.Millisecond)
		res, err := b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "rate limited", RetryAt: at})
		require.NoError(t, err)
		require.Equal(t, queue.FailResult{Status: queue.StatusScheduled, RunAt: at, Due: at}, res)
		// Repeating the same failure (a retried command) changes nothing.
		res2, err := b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "rate limited", RetryAt: at})
		require.NoError(t, err)
		require.Equal(t, res, res2)
		require.Equal(t, int64(1), b.stats(t).FailedTotal)
		b.clock.Advance(1500 * time.Millisecond)
		_, _, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		c = b.claimOne(t)
		res, err = b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "bad input", Dead: true})
		require.NoError(t, err)
		require.Equal(t, queue.StatusDead, res.Status)
		require.Equal(t, 2, b.get(t, j.ID).Attempts)
	})

	// One call records several failures, each with its own answer: a
	// retry at a time, one after a delay, one to the dead set, a stale
	// token, a job named twice (the second reads it as the first left it:
	// recorded already), and a failure refused before the call.
	t.Run("FailManyAnswersEachFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			b.enqueue(t, queue.NewJob{MaxAttempts: 10})
		}
		cs := b.running(t, 3)
		at := b.clock.Now().Add(1500 * time.Millisecond)
		fails := []queue.Failed{
			{ID: cs[0].ID, Token: cs[0].Token, FailOptions: queue.FailOptions{Error: "later", RetryAt: at}},
			{ID: cs[1].ID, Token: cs[1].Token, FailOptions: queue.FailOptions{Error: "soon", RetryIn: time.Minute}},
			{ID: cs[2].ID, Token: "stale", FailOptions: queue.FailOptions{Error: "x"}},
			{ID: cs[2].ID, Token: cs[2].Token, FailOptions: queue.FailOptions{Error: "fatal", Dead: true}},
			{ID: cs[0].ID, Token: cs[0].Token, FailOptions: queue.FailOptions{Error: "later", RetryAt: at}},
			{ID: cs[1].ID, Token: cs[1].Token, FailOptions: queue.FailOptions{RetryAt: at, RetryIn: time.Second}},
		}
		res, errs, err := b.client.FailMany(b.ctx, b.queue, fails)
		require.NoError(t, err)
		require.NoError(t, errs[0])
		require.Equal(t, queue.FailResult{Status: queue.StatusScheduled, RunAt: at, Due: at}, res[0])
		require.NoError(t, errs[1])
		require.Equal(t, queue.StatusScheduled, res[1].Status)
		// a minute after Redis's now, which runs on a little past the fake clock
		require.False(t, res[1].Due.Before(b.clock.Now().Add(time.Minute)))
		require.Less(t, res[1].Due.Sub(b.clock.Now().Add(time.Minute)), time.Second)
		require.ErrorIs(t, errs[2], queue.ErrLeaseLost)
		require.NoError(t, errs[3])
		require.Equal(t, queue.StatusDead, res[3].Status)
		require.NoError(t, errs[4], "the same failure again: recorded already")
		require.Equal(t, res[0], res[4])
		require.ErrorIs(t, errs[5], queue.ErrInvalid, "RetryAt and RetryIn together")
		require.Equal(t, int64(3), b.stats(t).FailedTotal)
		require.Equal(t, "later", b.get(t, cs[0].ID).LastError)
		require.Equal(t, queue.StatusDead, b.get(t, cs[2].ID).Status)

		// The whole call again (a retried command) changes nothing.
		again, errs2, err := b.client.FailMany(b.ctx, b.queue, fails)
		require.NoError(t, err)
		require.Equal(t, res[:2], again[:2])
		require.Equal(t, res[3].Status, again[3].Status)
		require.NoError(t, errs2[3])
		require.Equal(t, int64(3), b.stats(t).FailedTotal)

		_, _, err = b.client.FailMany(b.ctx, b.queue, nil)
		require.ErrorIs(t, err, queue.ErrInvalid)
	})

	// One call ends jobs every way a failure can, and names each of them
	// again: a retry due at once (pending again, in its list or its label
	// set's), one later, one to the dead set, and one whose cancellation
	// was requested. Each lease ends, and each job named again answers
	// the end the call gave it.
	t.Run("FailManyEndsEveryKindInOneCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{MaxAttempts: 5})
		b.enqueue(t, queue.NewJob{MaxAttempts: 5})
		b.enqueue(t, queue.NewJob{MaxAttempts: 5})
		b.enqueue(t, queue.NewJob{MaxAttempts: 5})
		gpu := b.enqueue(t, queue.NewJob{MaxAttempts: 5, Labels: []string{"gpu"}})
		cs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 4})
		require.NoError(t, err)
		require.Len(t, cs, 4)
		gs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 1, Labels: []string{"gpu"}})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		require.Equal(t, gpu.ID, gs[0].ID)
		_, err = b.client.Cancel(b.ctx, b.queue, cs[3].ID) // running: a cancel request
		require.NoError(t, err)
		fails := []queue.Failed{
			{ID: cs[0].ID, Token: cs[0].Token, FailOptions: queue.FailOptions{Error: "now", RetryIn: -1}},
			{ID: cs[1].ID, Token: cs[1].Token, FailOptions: queue.FailOptions{Error: "later", RetryIn: time.Hour}},
			{ID: cs[2].ID, Token: cs[2].Token, FailOptions: queue.FailOptions{Error: "fatal", Dead: true}},
			{ID: cs[3].ID, Token: cs[3].Token, FailOptions: queue.FailOptions{Error: "stop"}},
			{ID: gs[0].ID, Token: gs[0].Token, FailOptions: queue.FailOptions{Error: "gpu now", RetryIn: -1}},
		}
		res, errs, err := b.client.FailMany(b.ctx, b.queue, append(fails, fails...))
		require.NoError(t, err)
		for i, want := range []queue.Status{queue.StatusPending, queue.StatusScheduled, queue.StatusDead, queue.StatusCanceled, queue.StatusPending} {
			require.NoError(t, errs[i])
			require.Equal(t, want, res[i].Status, "failure %d", i)
			require.NoError(t, errs[len(fails)+i], "named again: recorded already")
			require.Equal(t, want, b.get(t, fails[i].ID).Status)
			_, err := b.client.Heartbeat(b.ctx, b.queue, fails[i].ID, fails[i].Token, queue.HeartbeatOptions{})
			require.ErrorIs(t, err, queue.ErrLeaseLost, "failure %d: its lease ended", i)
		}
		require.Equal(t, res[1], res[len(fails)+1], "the later retry named again answers its due time")
		s := b.stats(t)
		require.Equal(t, int64(5), s.FailedTotal)
		require.Equal(t, int64(3), s.RetriedTotal)
		require.Equal(t, int64(0), s.Processing)
		require.Equal(t, int64(1), s.Dead)
		// the retries due at once are claimable again, each from its list
		again, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 4})
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Equal(t, cs[0].ID, again[0].ID)
		require.Equal(t, 2, again[0].Attempts)
		again, err = b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 4, Labels: []string{"gpu"}})
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Equal(t, gpu.ID, again[0].ID)
	})

	// A failure that asks for its job (Failed.ReturnJob) gets it as Get
	// reads it right after, from the same script call: retried, dead,
	// recorded before (a repeated call), and not when its lease is lost or
	// the job is no longer kept.
	t.Run("FailManyAnswersTheJobAsGetReadsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		dropping := b.dropping(t)
		// one payload kept in the record, one in the data hash
		small := json.RawMessage(`{"n":1}`)
		large := json.RawMessage(`{"s":"` + strings.Repeat("x", 300) + `"}`)
		b.enqueue(t, queue.NewJob{Payload: small, MaxAttempts: 5})
		b.enqueue(t, queue.NewJob{Payload: large, MaxAttempts: 5})
		b.enqueue(t, queue.NewJob{})
		cs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 3})
		require.NoError(t, err)
		require.Len(t, cs, 3)
		require.NoError(t, b.client.AttachArtifacts(b.ctx, b.queue, cs[0].ID, cs[0].Token,
			map[string]json.RawMessage{"report": json.RawMessage(`"r.txt"`)}))
		_, err = b.client.Cancel(b.ctx, b.queue, cs[2].ID) // running: a cancel request
		require.NoError(t, err)
		fails := []queue.Failed{
			{ID: cs[0].ID, Token: cs[0].Token, FailOptions: queue.FailOptions{Error: "again", RetryIn: time.Minute}, ReturnJob: true},
			{ID: cs[1].ID, Token: cs[1].Token, FailOptions: queue.FailOptions{Error: "fatal", Dead: true}, ReturnJob: true},
			{ID: cs[1].ID, Token: "stale", FailOptions: queue.FailOptions{Error: "x"}, ReturnJob: true},
			{ID: "nosuchjob", Token: "t", ReturnJob: true},
		}
		res, errs, err := b.client.FailMany(b.ctx, b.queue, fails)
		require.NoError(t, err)
		for i, want := range []json.RawMessage{small, large} {
			require.NoError(t, errs[i])
			j := res[i].Job
			require.NotNil(t, j)
			require.Equal(t, b.get(t, cs[i].ID), j)
			require.JSONEq(t, string(want), string(j.Payload))
			require.Empty(t, j.Token)
		}
		require.Equal(t, queue.StatusScheduled, res[0].Job.Status)
		require.Equal(t, "again", res[0].Job.LastError)
		require.Equal(t, res[0].RunAt, res[0].Job.RunAt)
		require.JSONEq(t, `{"report":"r.txt"}`, string(res[0].Job.Artifacts))
		require.Equal(t, queue.StatusDead, res[1].Job.Status)
		require.ErrorIs(t, errs[2], queue.ErrLeaseLost)
		require.Nil(t, res[2].Job)
		require.ErrorIs(t, errs[3], queue.ErrNotFound)
		require.Nil(t, res[3].Job)

		// The call again (a retried command) answers the same jobs, and a
		// failure that does not ask gets none.
		fails[1].ReturnJob = false
		again, errs, err := b.client.FailMany(b.ctx, b.queue, fails[:2])
		require.NoError(t, err)
		require.NoError(t, errs[0])
		require.Equal(t, res[0].Job, again[0].Job)
		require.NoError(t, errs[1])
		require.Nil(t, again[1].Job)
		require.Equal(t, int64(2), b.stats(t).FailedTotal)

		// A job whose cancellation was requested ends canceled; a client
		// that keeps no finished job drops it, and answers none.
		gone, errs, err := dropping.FailMany(b.ctx, b.queue, []queue.Failed{{ID: cs[2].ID, Token: cs[2].Token, ReturnJob: true}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		require.Equal(t, queue.StatusCanceled, gone[0].Status)
		require.Nil(t, gone[0].Job)
		_, err = b.client.Get(b.ctx, b.queue, cs[2].ID)
		require.ErrorIs(t, err, queue.ErrNotFound)
	})

	t.Run("ReclaimSpentAttemptsGoesDead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 1, Visibility: time.Second})
		b.claimOne(t)
		b.clock.Advance(2 * time.Second)
		ids, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, []string{j.ID}, ids)
		dead := b.get(t, j.ID)
		require.Equal(t, queue.StatusDead, dead.Status)
		require.Contains(t, dead.LastError, "lease expired")
		b.claimNone(t)
	})

	t.Run("DeadSetCappedByCountAndAge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.DeadMaxJobs = 3; c.DeadMaxAge = time.Hour })
		kill := func() string {
			j := b.enqueue(t, queue.NewJob{})
			c := b.claimOne(t)
			_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
			require.NoError(t, err)
			b.clock.Advance(time.Second)
			return j.ID
		}
		var ids []string
		for range 5 {
			ids = append(ids, kill())
		}
		require.Equal(t, int64(3), b.stats(t).Dead)
		_, err := b.client.Get(b.ctx, b.queue, ids[0])
		require.ErrorIs(t, err, queue.ErrNotFound, "the oldest dead job was trimmed, hash and all")
		b.clock.Advance(2 * time.Hour)
		kill()
		require.Equal(t, int64(1), b.stats(t).Dead, "dead jobs past the age cap are trimmed")
	})
}
