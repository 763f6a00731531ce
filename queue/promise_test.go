package queue_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The promise where the happy path is not enough: a cancel is never
// forgotten, a retried call answers what happened, and a fencing number
// only grows. On one redis-server and on the Cluster.

func TestPromiseSingle(t *testing.T) {
	t.Parallel()
	runPromise(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestPromiseCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runPromise(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

func runPromise(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	setup := setupOn(newRDB)
	// cancelRequested enqueues a job, claims it and asks for it to be
	// canceled while it runs.
	cancelRequested := func(t *testing.T, b *testBundle, nj queue.NewJob) *queue.Job {
		t.Helper()
		b.enqueue(t, nj)
		c := b.claimOne(t)
		j, err := b.client.Cancel(b.ctx, b.queue, c.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusProcessing, j.Status)
		require.True(t, j.CancelRequested)
		return c
	}
	requireCanceled := func(t *testing.T, b *testBundle, id string) {
		t.Helper()
		require.Equal(t, queue.StatusCanceled, b.get(t, id).Status)
		b.clock.Advance(time.Hour)
		_, _, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		_, err = b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		b.claimNone(t) // never pending again
		s := b.stats(t)
		require.Zero(t, s.Pending+s.Scheduled+s.Processing)
		require.Equal(t, int64(1), s.CanceledTotal)
	}

	t.Run("CancelRequestedThenFailEndsCanceled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := cancelRequested(t, b, queue.NewJob{MaxAttempts: 5})
		res, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "stopped"})
		require.NoError(t, err)
		require.Equal(t, queue.StatusCanceled, res.Status)
		requireCanceled(t, b, c.ID)
	})

	t.Run("CancelRequestedThenLeaseLapseEndsCanceled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := cancelRequested(t, b, queue.NewJob{MaxAttempts: 5, Visibility: time.Second})
		b.clock.Advance(2 * time.Second)
		ids, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, []string{c.ID}, ids)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}), queue.ErrLeaseLost,
			"the lost worker's late complete changes nothing")
		requireCanceled(t, b, c.ID)
	})

	t.Run("CancelRequestedThenReleaseEndsCanceled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := cancelRequested(t, b, queue.NewJob{})
		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token))
		requireCanceled(t, b, c.ID)
	})

	t.Run("CancelRequestedThenCompleteEndsCompleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := cancelRequested(t, b, queue.NewJob{})
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{Result: json.RawMessage(`{"done":1}`)}))
		j := b.get(t, c.ID)
		require.Equal(t, queue.StatusCompleted, j.Status, "the work was done")
		require.False(t, j.CancelRequested)
		require.JSONEq(t, `{"done":1}`, string(j.Result))
	})

	// A resent enqueue answers the job as its first run stored it: the due
	// time the caller is told is the one the job has, not one a delay
	// counted from the resend would give.
	t.Run("ResentEnqueueAnswersTheStoredJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, nj := range []queue.NewJob{{Queue: b.queue, Kind: "k", Delay: time.Minute}, {Queue: b.queue, Kind: "k"}} {
			first, second, err := b.client.EnqueueTwice(b.ctx, nj, func() { b.clock.Advance(30 * time.Second) })
			require.NoError(t, err)
			require.False(t, second.Replayed, "the caller's own job")
			require.Equal(t, first.Job.ID, second.Job.ID)
			require.Equal(t, first.Job.RunAt, second.Job.RunAt, "delay %s", nj.Delay)
			require.Equal(t, first.Job.EnqueuedAt, second.Job.EnqueuedAt)
			require.Equal(t, first.Job.Status, second.Job.Status)
		}
		require.Equal(t, int64(2), b.stats(t).EnqueuedTotal, "each once")
	})

	t.Run("RetriedEnqueueNeverMakesAJobThatRanAndWentAgain", func(t *testing.T) {
		t.Parallel()
		// Finished jobs are deleted at once: a retry finds no job.
		b := setup(t, func(c *queue.Config) { c.Retention = -1 })
		spec := queue.EncodeSpec(3, 30*time.Second, queue.DefaultBackoff.Encode())
		const id = "0192f3c4a1b27c9e8d1f0a3b4c5d6e7f"
		enq := []any{60000, 64, 0, 0, 1, id, "k", "{}", spec, "d0", "", "", "", "", "", ""}
		r1, err := b.client.RunScript(b.ctx, "create", b.queue)
		require.NoError(t, err)
		require.Equal(t, int64(1), r1)
		_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		c := b.claimOne(t)
		require.Equal(t, id, c.ID)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		_, err = b.client.Get(b.ctx, b.queue, id)
		require.ErrorIs(t, err, queue.ErrNotFound, "deleted at completion")
		// The reply of the first enqueue was lost; the client sends it again.
		r2, err := b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		require.Equal(t, id, r2.([]any)[1], "the original job answers")
		require.Equal(t, int64(2), r2.([]any)[2], "it existed already")
		b.claimNone(t)
		require.Equal(t, int64(1), b.stats(t).EnqueuedTotal)
		// A retried complete answers success though the job is gone.
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, "other", queue.CompleteOptions{}), queue.ErrLeaseLost)
		// Past the retry window the tombstone goes too.
		b.clock.Advance(queue.DefaultRetryWindow + time.Second)
		_, err = b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}), queue.ErrNotFound)
	})

	t.Run("RetriedReleaseSucceeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token))
		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token), "the retry answers what the first did")
		require.Equal(t, int64(1), b.stats(t).Pending)
	})

	t.Run("LateFailOnAJobTheReclaimKilledIsLeaseLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{MaxAttempts: 1, Visibility: time.Second})
		c := b.claimOne(t)
		b.clock.Advance(2 * time.Second)
		ids, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, []string{c.ID}, ids)
		require.Equal(t, queue.StatusDead, b.get(t, c.ID).Status)
		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "late"})
		require.ErrorIs(t, err, queue.ErrLeaseLost, "the death was the reclaim's, not this fail's")
		require.NotEqual(t, "late", b.get(t, c.ID).LastError)
	})

	t.Run("RetriedFailAnswersTheFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{MaxAttempts: 1})
		c := b.claimOne(t)
		r1, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "boom"})
		require.NoError(t, err)
		require.Equal(t, queue.StatusDead, r1.Status)
		r2, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "boom"})
		require.NoError(t, err)
		require.Equal(t, queue.StatusDead, r2.Status)
		require.Equal(t, int64(1), b.stats(t).FailedTotal)
	})

	t.Run("FenceGrowsWithEveryClaimAndAttemptsResetOnAManualRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 2, Visibility: time.Second})
		require.Zero(t, j.Fence)
		require.Zero(t, b.get(t, j.ID).Fence, "0 before the first claim")
		var fences []int64
		claim := func(wantAttempts int) *queue.Job {
			t.Helper()
			c := b.claimOne(t)
			require.Equal(t, wantAttempts, c.Attempts)
			require.Equal(t, c.Fence, b.get(t, j.ID).Fence)
			fences = append(fences, c.Fence)
			return c
		}
		// 1: a failure and its backoff.
		c := claim(1)
		_, err := b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now()})
		require.NoError(t, err)
		// 2: a lapsed lease; the reclaim finds the attempts spent.
		claim(2)
		b.clock.Advance(2 * time.Second)
		_, err = b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, queue.StatusDead, b.get(t, j.ID).Status)
		// 3: a manual retry of the dead job starts its attempts again.
		_, err = b.client.RunNow(b.ctx, b.queue, j.ID)
		require.NoError(t, err)
		require.Zero(t, b.get(t, j.ID).Attempts)
		c = claim(1)
		_, err = b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
		require.NoError(t, err)
		// 4: a requeue of the dead set.
		n, err := b.client.RequeueDead(b.ctx, b.queue, "")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		claim(1)
		require.Equal(t, []int64{1, 2, 3, 4}, fences, "above every earlier claim, never reset")
	})

	t.Run("CancelOfAPendingJobLeavesTheListAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var ids []string
		for range 5 {
			ids = append(ids, b.enqueue(t, queue.NewJob{}).ID)
		}
		llen := b.rdb.LLen(b.ctx, b.key(queue.KeyPending)).Val()
		_, err := b.client.Cancel(b.ctx, b.queue, ids[2])
		require.NoError(t, err)
		_, err = b.client.Reschedule(b.ctx, b.queue, ids[3], b.clock.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, llen, b.rdb.LLen(b.ctx, b.key(queue.KeyPending)).Val(), "no LREM: the ids stay, counted stale")
		s := b.stats(t)
		require.Equal(t, int64(3), s.Pending)
		require.Equal(t, int64(1), s.Scheduled)
		listed, _, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusPending})
		require.NoError(t, err)
		require.Len(t, listed, 3)
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, jobs, 3)
		for _, j := range jobs {
			require.NotContains(t, []string{ids[2], ids[3]}, j.ID)
		}
		s = b.stats(t)
		require.Zero(t, s.Pending)
		require.Equal(t, int64(1), b.rdb.LLen(b.ctx, b.key(queue.KeyPending)).Val(), "the claim dropped the stale ids: only the sentinel is left")
	})

	t.Run("DeleteQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.ErrorIs(t, b.client.DeleteQueue(b.ctx, "never", false), queue.ErrNoQueue)
		// A job in every state.
		sched := b.enqueue(t, queue.NewJob{Delay: time.Hour})
		done := b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		dead := b.enqueue(t, queue.NewJob{})
		c = b.claimOne(t)
		_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Dead: true})
		require.NoError(t, err)
		running := b.enqueue(t, queue.NewJob{})
		held := b.claimOne(t)
		pending := b.enqueue(t, queue.NewJob{IdempotencyKey: "once"})

		require.ErrorIs(t, b.client.DeleteQueue(b.ctx, b.queue, false), queue.ErrQueueBusy)
		require.Equal(t, int64(1), b.stats(t).Pending, "a busy queue is left as it was")
		require.NoError(t, b.client.DeleteQueue(b.ctx, b.queue, true))
		for _, j := range []*queue.Job{sched, done, dead, running, pending} {
			_, err := b.client.Get(b.ctx, b.queue, j.ID)
			require.ErrorIs(t, err, queue.ErrNotFound)
		}
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.NotContains(t, qs, b.queue)
		require.Equal(t, queue.Stats{Queue: b.queue}, b.stats(t))
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, held.ID, held.Token, queue.CompleteOptions{}), queue.ErrNotFound,
			"the worker of a deleted job changes nothing")
		b.claimNone(t)
		require.ErrorIs(t, b.client.DeleteQueue(b.ctx, b.queue, false), queue.ErrNoQueue)

		// An enqueue makes it anew, from nothing: the idempotency key too.
		again, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", IdempotencyKey: "once"})
		require.NoError(t, err)
		require.False(t, again.Replayed)
		qs, err = b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Contains(t, qs, b.queue)
		require.Equal(t, int64(1), b.stats(t).EnqueuedTotal)
		require.Equal(t, again.Job.ID, b.claimOne(t).ID)
	})

	t.Run("IdleEmptyQueueIsForgotten", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.IdleQueueTTL = time.Hour; c.Retention = -1 })
		b.enqueue(t, queue.NewJob{})
		busy := b.enqueue(t, queue.NewJob{Queue: "busy", RunAt: b.clock.Now().Add(10 * time.Hour)})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		gone, err := b.client.ForgetIdle(b.ctx, b.queue)
		require.NoError(t, err)
		require.False(t, gone, "used within the hour")
		b.clock.Advance(2 * time.Hour)
		_, err = b.client.Reclaim(b.ctx, b.queue) // the sweep drops the tombstone first
		require.NoError(t, err)
		gone, err = b.client.ForgetIdle(b.ctx, b.queue)
		require.NoError(t, err)
		require.True(t, gone)
		gone, err = b.client.ForgetIdle(b.ctx, "busy")
		require.NoError(t, err)
		require.False(t, gone, "a queue that holds a job is kept, however idle")
		require.Equal(t, queue.StatusScheduled, b.get2(t, "busy", busy.ID).Status)
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"busy"}, qs)
	})

	t.Run("QueueCapHoldsUnderConcurrentFirstEnqueues", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.MaxQueues = 5 })
		var wg sync.WaitGroup
		var made, refused atomic.Int64
		for i := range 20 {
			wg.Go(func() {
				// A client each: no process-local cache of known queues helps.
				other, err := queue.NewClient(queue.Config{Redis: newRDB(t), Namespace: b.ns, Clock: b.clock, FollowClock: true, MaxQueues: 5})
				if err != nil {
					t.Error(err)
					return
				}
				defer func() { _ = other.Close() }()
				_, err = other.Enqueue(b.ctx, queue.NewJob{Queue: fmt.Sprintf("q%02d", i), Kind: "k"})
				switch {
				case err == nil:
					made.Add(1)
				case errors.Is(err, queue.ErrTooManyQueues):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(5), made.Load())
		require.Equal(t, int64(15), refused.Load())
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Len(t, qs, 5)
	})

	t.Run("SweepPlanNamesOnlyQueuesWithWork", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.IdleQueueTTL = time.Hour })
		b.enqueue(t, queue.NewJob{Queue: "lapsed", Visibility: 5 * time.Second})
		_, err := b.client.Claim(b.ctx, "lapsed", queue.ClaimOptions{})
		require.NoError(t, err)
		b.enqueue(t, queue.NewJob{Queue: "held", Visibility: time.Hour})
		_, err = b.client.Claim(b.ctx, "held", queue.ClaimOptions{})
		require.NoError(t, err)
		b.enqueue(t, queue.NewJob{Queue: "waiting", Delay: time.Hour})
		b.enqueue(t, queue.NewJob{Queue: "emptied"})
		c, err := b.client.Claim(b.ctx, "emptied", queue.ClaimOptions{})
		require.NoError(t, err)
		_, err = b.client.Fail(b.ctx, "emptied", c[0].ID, c[0].Token, queue.FailOptions{Dead: true})
		require.NoError(t, err)
		_, err = b.client.Cancel(b.ctx, "emptied", c[0].ID) // deletes the dead job
		require.NoError(t, err)
		qs := []string{"lapsed", "held", "waiting", "emptied"}

		work, empty, err := b.client.SweepPlan(b.ctx, qs)
		require.NoError(t, err)
		require.Empty(t, work)
		require.Empty(t, empty, "nothing idle for an hour yet")
		b.clock.Advance(2 * time.Second) // a plan looks a second ahead: not yet
		work, _, err = b.client.SweepPlan(b.ctx, qs)
		require.NoError(t, err)
		require.Empty(t, work)
		b.clock.Advance(4 * time.Second)
		work, _, err = b.client.SweepPlan(b.ctx, qs)
		require.NoError(t, err)
		require.Equal(t, []string{"lapsed"}, work)
		b.clock.Advance(2 * time.Hour)
		work, empty, err = b.client.SweepPlan(b.ctx, qs)
		require.NoError(t, err)
		require.Equal(t, []string{"lapsed", "held", "emptied"}, work,
			"both leases lapsed, and the deleted job's tombstone is due; a due scheduled job is the promoter's")
		require.Empty(t, empty)
		_, err = b.client.Reclaim(b.ctx, "emptied")
		require.NoError(t, err)
		_, empty, err = b.client.SweepPlan(b.ctx, qs)
		require.NoError(t, err)
		require.Equal(t, []string{"emptied"}, empty)
	})

	t.Run("AClaimTakesThePendingJobsBehindStaleIds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var ids []string
		for range 4 {
			ids = append(ids, b.enqueue(t, queue.NewJob{}).ID)
		}
		b.clock.Advance(3 * time.Second)
		_, err := b.client.Cancel(b.ctx, b.queue, ids[0])
		require.NoError(t, err)
		_, err = b.client.Reschedule(b.ctx, b.queue, ids[1], b.clock.Now().Add(time.Hour))
		require.NoError(t, err)
		// The two oldest ids in the list are stale now.
		require.InDelta(t, 3, b.stats(t).OldestPendingAge.Seconds(), 1, "the oldest pending job, past the stale ids")
		start := time.Now()
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 1, Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, ids[2], jobs[0].ID)
		require.Less(t, time.Since(start), time.Second, "no wait while a job is pending")
		require.Equal(t, int64(1), b.stats(t).Pending)
	})

	t.Run("PendingListsStopAtTheirDepth", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		deep := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("pending:%d:abc", queue.MaxPendingListDepth)))
		_, _, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusPending, Cursor: deep})
		require.ErrorIs(t, err, queue.ErrInvalid, "no cursor reads deeper than the cap")
	})

	t.Run("IdempotencyRecordsExpireAndGoWithTheirJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.IdempotencyTTL = time.Minute })
		enq := func(key string) queue.Enqueued {
			t.Helper()
			e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", Delay: time.Hour, IdempotencyKey: key})
			require.NoError(t, err)
			return e
		}
		// "~" is an idempotency key like any other (no sentinel can be one).
		first := enq("~")
		require.True(t, enq("~").Replayed)
		b.clock.Advance(2 * time.Minute)
		again := enq("~")
		require.False(t, again.Replayed, "past its time the record answers for nothing")
		require.NotEqual(t, first.Job.ID, again.Job.ID)
		// Deleting the jobs takes their records and leaves the hash, with
		// its sentinel, in place.
		for _, id := range []string{first.Job.ID, again.Job.ID} {
			_, err := b.client.Cancel(b.ctx, b.queue, id) // canceled
			require.NoError(t, err)
			_, err = b.client.Cancel(b.ctx, b.queue, id) // deleted
			require.NoError(t, err)
		}
		require.Equal(t, int64(1), b.rdb.HLen(b.ctx, b.key(queue.KeyIdem)).Val(), "only the sentinel")
		require.False(t, enq("~").Replayed)
	})
}
