package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// contractPromote holds the contract of promotion: a scheduled job becomes
// pending when it is due by Redis's clock, never before, promoted once
// however many promoters race, and a promoter is woken when an earlier job
// is scheduled.
func contractPromote(t *testing.T, setup setupFunc) {
	t.Run("DelayedJobNeverClaimableBeforeRunAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Delay: 10 * time.Second})
		require.Equal(t, queue.StatusScheduled, j.Status)
		requireSoonAfter(t, b.clock.Now().Add(10*time.Second), j.RunAt, "a delay counts from Redis's now")
		// A second short of due (Redis's now runs a little ahead of the fake
		// clock: the time a script takes to arrive), promotion moves nothing.
		b.clock.Advance(9 * time.Second)
		moved, next, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Zero(t, moved)
		require.Equal(t, j.RunAt, next.Truncate(time.Millisecond))
		b.claimNone(t)
		b.clock.Advance(2 * time.Second) // and past the distance to Redis's clock at enqueue
		moved, next, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.True(t, next.IsZero())
		c := b.claimOne(t)
		require.Equal(t, j.ID, c.ID)
		require.False(t, c.ClaimedAt.Before(j.RunAt), "never early by Redis's clock")
	})

	// An entry of the scheduled set whose job is gone (a stale entry)
	// leaves the set; the due jobs around it are promoted all the same.
	t.Run("AStaleEntryAmongDueJobsLeavesTheSet", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.enqueue(t, queue.NewJob{Delay: time.Second})
		c := b.enqueue(t, queue.NewJob{Delay: 3 * time.Second})
		score, err := b.rdb.ZScore(b.ctx, b.key(queue.KeySched), a.ID).Result()
		require.NoError(t, err)
		require.NoError(t, b.rdb.ZAdd(b.ctx, b.key(queue.KeySched), redis.Z{Score: score + 1, Member: "gone"}).Err())
		b.clock.Advance(5 * time.Second)
		moved, _, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 2, moved)
		got := b.running(t, 2)
		require.ElementsMatch(t, []string{a.ID, c.ID}, []string{got[0].ID, got[1].ID})
		_, err = b.rdb.ZScore(b.ctx, b.key(queue.KeySched), "gone").Result()
		require.ErrorIs(t, err, redis.Nil)
	})

	t.Run("PromoterLoopPromotesExactlyAtRunAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(10 * time.Second)})
		p, err := delayed.NewPromoter(delayed.Config{Source: b.client.Source(), Queues: []string{b.queue}, Clock: b.clock, MaxSleep: time.Hour})
		require.NoError(t, err)
		promoting := lifecycle.Start(b.ctx, p)
		t.Cleanup(func() { require.NoError(t, promoting.Stop(context.Background())) })
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1)) // asleep until run-at
		b.clock.Advance(9 * time.Second)
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
		b.claimNone(t)
		b.clock.Advance(time.Second)
		require.Eventually(t, func() bool { return b.stats(t).Pending == 1 }, 5*time.Second, time.Millisecond)
		require.Equal(t, j.ID, b.claimOne(t).ID)
	})

	t.Run("EnqueueOnAnotherInstanceWakesThePromoter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := delayed.NewPromoter(delayed.Config{Source: b.client.Source(), Queues: []string{b.queue}, Clock: b.clock, MaxSleep: time.Hour})
		require.NoError(t, err)
		promoting := lifecycle.Start(b.ctx, p)
		t.Cleanup(func() { require.NoError(t, promoting.Stop(context.Background())) })
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1)) // asleep for an hour
		other, err := queue.NewClient(queue.Config{Redis: b.newRDB(t), Namespace: b.ns, Clock: b.clock, FollowClock: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = other.Close() })
		_, err = other.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", Delay: 5 * time.Second})
		require.NoError(t, err)
		// Only a nudge through Redis pub/sub can make this loop promote
		// before its hour is up.
		require.Eventually(t, func() bool {
			if b.clock.Since(testutil.FakeClock().Now()) < 6*time.Second {
				b.clock.Advance(6 * time.Second) // past the delay, counted from Redis's now
			}
			return b.stats(t).Pending == 1
		}, 10*time.Second, 2*time.Millisecond)
	})

	t.Run("SubMillisecondRunAtIsKeptToTheMicrosecond", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		at := b.clock.Now().Add(5*time.Second + 300*time.Microsecond + 400*time.Nanosecond)
		j := b.enqueue(t, queue.NewJob{RunAt: at})
		require.Equal(t, b.clock.Now().Add(5*time.Second), j.RunAt, "run_at is the millisecond it falls in")
		due := at.Truncate(time.Microsecond).Add(time.Microsecond) // the schedule rounds up to the µs
		moved, next, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Zero(t, moved, "never before it asked")
		require.Equal(t, due, next, "the next due time keeps its microseconds")
		require.Equal(t, due, b.stats(t).NextRunAt)
		b.clock.Advance(due.Sub(b.clock.Now()))
		moved, _, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 1, moved, "due at its microsecond, not at the next millisecond")

		// A retry at a time with microseconds, the same way.
		c := b.claimOne(t)
		retry := b.clock.Now().Add(10*time.Second + 250*time.Microsecond)
		res, err := b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "later", RetryAt: retry.Add(-600 * time.Nanosecond)})
		require.NoError(t, err)
		require.Equal(t, retry, res.Due, "the due time as the schedule keeps it: rounded up to the microsecond")
		require.Equal(t, retry.Truncate(time.Millisecond), res.RunAt)
		require.Equal(t, res.RunAt, b.get(t, j.ID).RunAt)
		moved, _, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Zero(t, moved)
		b.clock.Advance(retry.Sub(b.clock.Now()))
		moved, _, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
	})

	t.Run("PromotionInRunAtOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var want []string
		jobs := make([]queue.NewJob, 0, 20)
		for i := range 20 {
			jobs = append(jobs, queue.NewJob{Queue: b.queue, Kind: "k", Delay: time.Duration(20-i) * time.Second})
		}
		out, err := b.client.EnqueueBatch(b.ctx, jobs)
		require.NoError(t, err)
		for i := range out {
			want = append([]string{out[i].Job.ID}, want...)
		}
		b.clock.Advance(time.Minute)
		moved, _, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 20, moved)
		claimed, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 100})
		require.NoError(t, err)
		var got []string
		for _, j := range claimed {
			got = append(got, j.ID)
		}
		require.Equal(t, want, got, "earliest due is claimed first")
	})

	t.Run("TwoPromotersRacing10000DueJobsPromoteEachOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.DisableEvents = true })
		const n = 10_000
		batch := make([]queue.NewJob, 0, queue.MaxBatch)
		for i := range n {
			batch = append(batch, queue.NewJob{Queue: b.queue, Kind: "k", Delay: time.Duration(1+i%500) * time.Millisecond})
			if len(batch) == queue.MaxBatch {
				_, err := b.client.EnqueueBatch(b.ctx, batch)
				require.NoError(t, err)
				batch = batch[:0]
			}
		}
		b.clock.Advance(time.Second)
		second, err := queue.NewClient(queue.Config{Redis: b.newRDB(t), Namespace: b.ns, Clock: b.clock, FollowClock: true, DisableEvents: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = second.Close() })
		var wg sync.WaitGroup
		counts := make([]int, 2)
		for i, c := range []*queue.Client{b.client, second} {
			wg.Go(func() {
				for range 100 {
					moved, next, err := c.Promote(b.ctx, b.queue, 0)
					if err != nil {
						t.Error(err)
						return
					}
					counts[i] += moved
					if next.IsZero() {
						return
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, n, counts[0]+counts[1])
		require.Equal(t, int64(n+1), b.rdb.LLen(b.ctx, b.key(queue.KeyPending)).Val(), "the jobs and the sentinel")
		ids := b.rdb.LRange(b.ctx, b.key(queue.KeyPending), 0, -2).Val()
		uniq := map[string]bool{}
		for _, id := range ids {
			uniq[id] = true
		}
		require.Len(t, uniq, n, "no job promoted twice")
		require.Equal(t, int64(n), b.stats(t).PromotedTotal)
	})

	t.Run("NudgeOnNewEarliestJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(b.ctx)
		defer cancel()
		nudges := b.client.Source().Nudges(ctx)
		b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Minute)})
		n := <-nudges
		require.Equal(t, b.queue, n.Queue)
		require.Equal(t, b.clock.Now().Add(time.Minute), n.At)
		b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(2 * time.Minute)}) // later than the head: no nudge
		b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(30 * time.Second)})
		for n = range nudges {
			if n.At.Equal(b.clock.Now().Add(30 * time.Second)) {
				break
			}
			require.Equal(t, b.clock.Now().Add(time.Minute), n.At, "only new heads nudge")
		}
		cancel()
		for range nudges { // closed once ctx ends
		}
	})
}
