package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Instances whose clocks are off by ±30 s and ±5 min share one queue: a
// producer on a true clock, promoters and workers on skewed ones, and a
// reclaimer on the clock that runs furthest ahead. Redis's clock decides:
// no job starts before it is due, every job starts within a second of it
// (a skewed promoter still wakes on time: it sleeps until the Redis-time
// instant less its estimate of the skew), and a lease that its worker
// (on the clock furthest behind) keeps heartbeating is never taken.
func TestSkewedInstancesAreNeverEarlyAndNeverStealALease(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{30 * time.Second, 5 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			rdb := testutil.Redis(t)
			ns := testutil.Namespace(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			newClient := func(clockSkew time.Duration) *queue.Client {
				c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, Clock: testutil.SkewedClock(clockSkew)})
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			producer, ahead, behind := newClient(0), newClient(skew), newClient(-skew)
			const q = "skew"

			// A job the worker behind keeps alive with heartbeats, on a
			// short lease, while the reclaimer ahead sweeps.
			_, err := producer.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "held", Visibility: time.Second})
			require.NoError(t, err)
			held, err := behind.Claim(ctx, q, queue.ClaimOptions{})
			require.NoError(t, err)
			require.Len(t, held, 1)
			r, err := queue.NewReclaimer(queue.ReclaimerConfig{Client: ahead, Queues: []string{q}, Interval: 100 * time.Millisecond})
			require.NoError(t, err)
			reclaiming := lifecycle.Start(ctx, r)
			defer func() { require.NoError(t, reclaiming.Stop(context.Background())) }()
			beats := make(chan error, 1)
			go func() {
				for range 15 {
					if _, err := behind.Heartbeat(ctx, q, held[0].ID, held[0].Token, queue.HeartbeatOptions{}); err != nil {
						beats <- err
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
				beats <- nil
			}()

			// The promoter is the instance behind: sleeping by its own clock
			// until a due time it would wake half a minute late. (One ahead
			// would wake early, find nothing due by Redis's clock, and go
			// round again: never early either way.)
			p, err := delayed.NewPromoter(delayed.Config{Source: behind.Source(), Clock: plumbing.Of(behind).Clock(), Queues: []string{q},
				MaxSleep: time.Hour})
			require.NoError(t, err)
			promoting := lifecycle.Start(ctx, p)
			defer func() { require.NoError(t, promoting.Stop(context.Background())) }()
			const n = 20
			due := map[string]time.Time{}
			for i := range n {
				e, err := producer.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k", Delay: 700*time.Millisecond + time.Duration(i)*40*time.Millisecond})
				require.NoError(t, err)
				due[e.Job.ID] = e.Job.RunAt
			}
			// The skewed promoter alone, no claim (a claim promotes too):
			// nothing is pending before it is due, and all of it a second
			// after the last is due, not half a minute off.
			st, err := producer.Stats(ctx, q)
			require.NoError(t, err)
			require.Zero(t, st.Pending, "nothing promoted early")
			require.Eventually(t, func() bool {
				st, err := producer.Stats(ctx, q)
				return err == nil && st.Pending == n
			}, 700*time.Millisecond+n*40*time.Millisecond+time.Second, 10*time.Millisecond, "the skewed promoter promotes on time")
			// Workers on both skewed clocks claim as jobs arrive.
			var mu sync.Mutex
			claimed := map[string]time.Time{}
			var wg sync.WaitGroup
			for _, c := range []*queue.Client{ahead, behind} {
				wg.Go(func() {
					for ctx.Err() == nil {
						mu.Lock()
						left := n - len(claimed)
						mu.Unlock()
						if left == 0 {
							return
						}
						jobs, err := c.Claim(ctx, q, queue.ClaimOptions{Max: 5, Wait: 500 * time.Millisecond})
						if err != nil {
							t.Error(err)
							return
						}
						for _, j := range jobs {
							mu.Lock()
							claimed[j.ID] = j.ClaimedAt
							mu.Unlock()
							if err := c.Complete(ctx, q, j.ID, j.Token, queue.CompleteOptions{}); err != nil {
								t.Error(err)
							}
						}
					}
				})
			}
			wg.Wait()
			require.Len(t, claimed, n)
			for id, at := range claimed {
				require.False(t, at.Before(due[id]), "job %s claimed at %s, due %s: early", id, at, due[id])
				require.Less(t, at.Sub(due[id]), time.Second, "job %s claimed %s after it was due", id, at.Sub(due[id]))
			}
			require.NoError(t, <-beats, "no heartbeat lost its lease")
			require.NoError(t, behind.Complete(ctx, q, held[0].ID, held[0].Token, queue.CompleteOptions{}), "the lease was never taken")
			require.InDelta(t, skew.Seconds(), plumbing.Of(behind).RedisClock().Offset.Seconds(), 0.5, "the instance behind knows how far")
			require.InDelta(t, -skew.Seconds(), plumbing.Of(ahead).RedisClock().Offset.Seconds(), 0.5)
		})
	}
}

// A delay asked of a host whose clock is off is counted on Redis's clock:
// a retry RetryIn from now, and a reschedule RescheduleIn from now, fall
// due that long after Redis's now whatever the host's clock says (a run-at
// made of the host's now and the delay would be off by the skew: a job
// due at once, or minutes late).
func TestDelaysFromASkewedHostCountOnRedisClock(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-5 * time.Minute, 5 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			rdb := testutil.Redis(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: testutil.SkewedClock(skew)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			redisNow := func() time.Time { return testutil.RedisTime(t, rdb) }
			const q = "skewed"
			_, err = c.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k"})
			require.NoError(t, err)
			jobs, err := c.Claim(ctx, q, queue.ClaimOptions{})
			require.NoError(t, err)
			require.Len(t, jobs, 1)

			from := redisNow()
			res, err := c.Fail(ctx, q, jobs[0].ID, jobs[0].Token, queue.FailOptions{Error: "e", RetryIn: 2 * time.Second})
			require.NoError(t, err)
			to := redisNow()
			require.Equal(t, queue.StatusScheduled, res.Status)
			testutil.RequireDueAfter(t, res.Due, from, to, 2*time.Second)

			from = redisNow()
			j, err := c.RescheduleIn(ctx, q, jobs[0].ID, time.Minute)
			require.NoError(t, err)
			testutil.RequireDueAfter(t, j.RunAt, from, redisNow(), time.Minute)

			// At once: due now by Redis's clock, so pending.
			j, err = c.RescheduleIn(ctx, q, jobs[0].ID, 0)
			require.NoError(t, err)
			require.Equal(t, queue.StatusPending, j.Status)
			jobs, err = c.Claim(ctx, q, queue.ClaimOptions{})
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			res, err = c.Fail(ctx, q, jobs[0].ID, jobs[0].Token, queue.FailOptions{Error: "e", RetryIn: -1})
			require.NoError(t, err)
			require.Equal(t, queue.StatusPending, res.Status, "a RetryIn below zero retries at once")

			// Refused: both forms at once, and a delay past MaxDelay.
			jobs, err = c.Claim(ctx, q, queue.ClaimOptions{})
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			_, err = c.Fail(ctx, q, jobs[0].ID, jobs[0].Token, queue.FailOptions{RetryIn: time.Second, RetryAt: time.Now()})
			require.ErrorIs(t, err, queue.ErrInvalid)
			_, err = c.Fail(ctx, q, jobs[0].ID, jobs[0].Token, queue.FailOptions{RetryIn: queue.MaxDelay + time.Second})
			require.ErrorIs(t, err, queue.ErrInvalid)
			_, err = c.RescheduleIn(ctx, q, jobs[0].ID, -time.Second)
			require.ErrorIs(t, err, queue.ErrInvalid)
		})
	}
}
