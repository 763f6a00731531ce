package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The queue contract: every behaviour of the engine, run against one
// redis-server and against a 3-master Redis Cluster.

func TestContractSingle(t *testing.T) {
	t.Parallel()
	runContract(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestContractCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runContract(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

type testBundle struct {
	ctx    context.Context
	rdb    redis.UniversalClient
	client *queue.Client
	clock  *clockwork.FakeClock
	ns     string
	queue  string
}

// key is a raw key of the bundle's queue (a queue.Key* name), for checks
// below the API.
func (b *testBundle) key(name string) string { return queue.QueueKey(b.ns, b.queue, name) }

// events is the bundle's queue's events channel.
func (b *testBundle) events() string { return b.ns + ":{" + b.queue + "}:events" }

// expiresIn is how long until the sweep deletes job id (by Redis's clock,
// which runs with the fake clock): its score in the expiry set.
func (b *testBundle) expiresIn(t *testing.T, id string) time.Duration {
	t.Helper()
	at, err := b.rdb.ZScore(b.ctx, b.key(queue.KeyExpiry), id).Result()
	require.NoError(t, err)
	return time.UnixMilli(int64(at)).Sub(b.clock.Now())
}

// requireSoonAfter checks that got, a time Redis's clock decided, is want
// (on the fake clock) or a little after: Redis's now runs ahead of the fake
// clock by the time a script takes to arrive (see queue.Config.Clock).
func requireSoonAfter(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.False(t, got.Before(want.Truncate(time.Millisecond)), msgAndArgs...)
	require.Less(t, got.Sub(want), time.Second, msgAndArgs...)
}

func (b *testBundle) enqueue(t *testing.T, nj queue.NewJob) *queue.Job {
	t.Helper()
	if nj.Queue == "" {
		nj.Queue = b.queue
	}
	if nj.Kind == "" {
		nj.Kind = "test"
	}
	e, err := b.client.Enqueue(b.ctx, nj)
	require.NoError(t, err)
	require.False(t, e.Replayed)
	return e.Job
}

func (b *testBundle) claimOne(t *testing.T) *queue.Job {
	t.Helper()
	jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}

func (b *testBundle) claimNone(t *testing.T) {
	t.Helper()
	jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, jobs)
}

func (b *testBundle) get(t *testing.T, id string) *queue.Job {
	t.Helper()
	j, err := b.client.Get(b.ctx, b.queue, id)
	require.NoError(t, err)
	return j
}

// get2 reads job id of queue q.
func (b *testBundle) get2(t *testing.T, q, id string) *queue.Job {
	t.Helper()
	j, err := b.client.Get(b.ctx, q, id)
	require.NoError(t, err)
	return j
}

func (b *testBundle) stats(t *testing.T) queue.Stats {
	t.Helper()
	s, err := b.client.Stats(b.ctx, b.queue)
	require.NoError(t, err)
	return s
}

// newBundle is a client on a fresh namespace of the Redis newRDB connects
// to, on a fake clock, with opts applied to its Config.
func newBundle(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient, opts ...func(*queue.Config)) *testBundle {
	t.Helper()
	rdb := newRDB(t)
	clock := testutil.FakeClock()
	cfg := queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: clock}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := queue.NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return &testBundle{ctx: ctx, rdb: rdb, client: c, clock: clock, ns: cfg.Namespace, queue: "q1"}
}

func runContract(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	setup := func(t *testing.T, opts ...func(*queue.Config)) *testBundle {
		t.Helper()
		return newBundle(t, newRDB, opts...)
	}

	t.Run("NewClientOnAConnectionInUse", func(t *testing.T) {
		t.Parallel()
		for range 10 {
			rdb := newRDB(t)
			var wg sync.WaitGroup
			for range 8 { // new connections handshake while the client is built
				wg.Go(func() { _ = rdb.Ping(context.Background()).Err() })
			}
			c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t)})
			require.NoError(t, err)
			wg.Wait()
			_, err = c.Claim(context.Background(), "q", queue.ClaimOptions{Wait: 10 * time.Millisecond})
			require.NoError(t, err)
			require.NoError(t, c.Close())
		}
	})

	t.Run("EnqueueNowIsPendingAndClaimable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Kind: "email", Payload: json.RawMessage(`{"to":"a@example.com"}`)})
		require.Equal(t, queue.StatusPending, j.Status)
		require.Len(t, j.ID, 32)
		got := b.claimOne(t)
		require.Equal(t, j.ID, got.ID)
		require.Equal(t, "email", got.Kind)
		require.JSONEq(t, `{"to":"a@example.com"}`, string(got.Payload))
		require.Equal(t, queue.StatusProcessing, got.Status)
		require.Equal(t, 1, got.Attempts)
		require.NotEmpty(t, got.Token)
		requireSoonAfter(t, b.clock.Now().Add(queue.DefaultVisibility), got.LeaseUntil)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, got.ID, got.Token, json.RawMessage(`{"ok":true}`)))
		done := b.get(t, j.ID)
		require.Equal(t, queue.StatusCompleted, done.Status)
		require.JSONEq(t, `{"ok":true}`, string(done.Result))
		s := b.stats(t)
		require.Equal(t, int64(1), s.EnqueuedTotal)
		require.Equal(t, int64(1), s.CompletedTotal)
		require.Equal(t, int64(1), s.CompletedHistory)
		require.Zero(t, s.Pending+s.Processing+s.Scheduled)
	})

	t.Run("DelayedJobNeverClaimableBeforeRunAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Delay: 10 * time.Second})
		require.Equal(t, queue.StatusScheduled, j.Status)
		requireSoonAfter(t, b.clock.Now().Add(10*time.Second), j.RunAt, "a delay counts from Redis's now")
		// A second short of due (Redis's now runs a little ahead of the fake
		// clock: the time a script takes to arrive), promotion moves nothing.
		b.clock.Advance(9 * time.Second)
		moved, next, err := b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		require.Zero(t, moved)
		require.Equal(t, j.RunAt, next.Truncate(time.Millisecond))
		b.claimNone(t)
		b.clock.Advance(2 * time.Second) // and past the distance to Redis's clock at enqueue
		moved, next, err = b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.True(t, next.IsZero())
		c := b.claimOne(t)
		require.Equal(t, j.ID, c.ID)
		require.False(t, c.ClaimedAt.Before(j.RunAt), "never early by Redis's clock")
	})

	t.Run("PromoterLoopPromotesExactlyAtRunAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(10 * time.Second)})
		p, err := delayed.NewPromoter(delayed.Config{Source: b.client, Queues: []string{b.queue}, Clock: b.clock, MaxSleep: time.Hour})
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
		p, err := delayed.NewPromoter(delayed.Config{Source: b.client, Queues: []string{b.queue}, Clock: b.clock, MaxSleep: time.Hour})
		require.NoError(t, err)
		promoting := lifecycle.Start(b.ctx, p)
		t.Cleanup(func() { require.NoError(t, promoting.Stop(context.Background())) })
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1)) // asleep for an hour
		other, err := queue.NewClient(queue.Config{Redis: newRDB(t), Namespace: b.ns, Clock: b.clock})
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
		moved, next, err := b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		require.Zero(t, moved, "never before it asked")
		require.Equal(t, due, next, "the next due time keeps its microseconds")
		require.Equal(t, due, b.stats(t).NextRunAt)
		b.clock.Advance(due.Sub(b.clock.Now()))
		moved, _, err = b.client.Promote(b.ctx, b.queue)
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
		moved, _, err = b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		require.Zero(t, moved)
		b.clock.Advance(retry.Sub(b.clock.Now()))
		moved, _, err = b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
	})

	t.Run("ClaimPromotesWhatIsDueAndTellsTheNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		due := b.clock.Now().Add(5*time.Second + 300*time.Microsecond)
		var ids []string
		for i := range 3 {
			ids = append(ids, b.enqueue(t, queue.NewJob{RunAt: due.Add(time.Duration(i) * time.Microsecond)}).ID)
		}
		late := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Hour)})
		claim := func(max int) ([]*queue.Job, time.Time) {
			t.Helper()
			jobs, next, err := b.client.ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: max})
			require.NoError(t, err)
			return jobs, next
		}

		// No promoter runs: the claim itself promotes, never before a job
		// is due by Redis's clock, and at most as many as it may claim.
		b.clock.Advance(due.Sub(b.clock.Now()) - time.Second)
		jobs, next := claim(10)
		require.Empty(t, jobs)
		require.Equal(t, due, next, "the earliest due time, to the microsecond")
		b.clock.Advance(time.Second)
		jobs, next = claim(1)
		require.Len(t, jobs, 1)
		require.Equal(t, ids[0], jobs[0].ID)
		require.Equal(t, queue.StatusProcessing, jobs[0].Status)
		require.False(t, jobs[0].ClaimedAt.Before(jobs[0].RunAt))
		require.Equal(t, due.Add(time.Microsecond), next, "the next job's due time")
		b.clock.Advance(5 * time.Microsecond)
		jobs, next = claim(1)
		require.Len(t, jobs, 1)
		require.Equal(t, ids[1], jobs[0].ID)
		require.Equal(t, due.Add(2*time.Microsecond), next, "due already, and still scheduled: one claim promotes at most Max")
		require.Equal(t, queue.StatusScheduled, b.get(t, ids[2]).Status)
		jobs, next = claim(10)
		require.Len(t, jobs, 1)
		require.Equal(t, ids[2], jobs[0].ID)
		require.Equal(t, late.RunAt, next)
		require.Equal(t, int64(3), b.stats(t).PromotedTotal)

		// A paused queue promotes nothing on a claim (the promoter still
		// does) and tells no next due time.
		require.NoError(t, b.client.Pause(b.ctx, b.queue))
		b.clock.Advance(time.Hour)
		jobs, next = claim(10)
		require.Empty(t, jobs)
		require.True(t, next.IsZero())
		require.Equal(t, queue.StatusScheduled, b.get(t, late.ID).Status)
		require.NoError(t, b.client.Resume(b.ctx, b.queue))
		jobs, next = claim(10)
		require.Len(t, jobs, 1)
		require.Equal(t, late.ID, jobs[0].ID)
		require.True(t, next.IsZero(), "nothing scheduled any more")
	})

	t.Run("OneClaimerIsHandedEachDueTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		second := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(2 * time.Second)})
		next := func() time.Time {
			t.Helper()
			jobs, next, err := b.client.ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
			require.NoError(t, err)
			require.Empty(t, jobs)
			return next
		}
		// A plain Claim (an HTTP worker's) takes no due time, so it does not
		// keep a worker that asks from hearing of it.
		b.claimNone(t)
		require.Equal(t, first.RunAt, next())
		require.True(t, next().IsZero(), "handed to the first caller already")
		require.True(t, next().IsZero())
		// Once that job is gone, the next due time goes to the next caller.
		b.clock.Advance(time.Second)
		jobs, _, err := b.client.ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, first.ID, jobs[0].ID)
		require.True(t, next().IsZero(), "the claim that took the job was handed the next due time")
		// If that claimer never comes back, the promoter moves the job, and
		// the due time after it is handed out as before.
		b.clock.Advance(time.Second)
		moved, _, err := b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.Equal(t, second.ID, b.claimOne(t).ID)
		third := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		require.Equal(t, third.RunAt, next())
		require.True(t, next().IsZero())
	})

	t.Run("DecodeRecordReadsWhatGetReads", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bo := queue.Backoff{Initial: 3 * time.Second, Factor: 1.5, Max: time.Hour, Jitter: 0.1}
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 7, Visibility: 45 * time.Second, Backoff: &bo})
		claimed := b.claimOne(t)
		rec, err := b.rdb.HGet(b.ctx, b.key(queue.KeyJobs), j.ID).Result()
		require.NoError(t, err)
		payload, err := b.rdb.HGet(b.ctx, b.key(queue.KeyData), j.ID).Result()
		require.NoError(t, err)
		got, err := queue.DecodeRecord(b.queue, j.ID, rec, payload, "")
		require.NoError(t, err)
		require.Equal(t, claimed.Token, got.Token, "the claim's token, which Get leaves out")
		got.Token = ""
		require.Equal(t, b.get(t, j.ID), got)
		require.Equal(t, 7, got.MaxAttempts)
		require.Equal(t, 1, got.Attempts)
		require.Equal(t, int64(1), got.Fence)
		require.Equal(t, 45*time.Second, got.Visibility)
		require.Equal(t, bo, got.Backoff)
		_, err = queue.DecodeRecord(b.queue, j.ID, "", "", "")
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = queue.DecodeRecord(b.queue, j.ID, "-c1.1", "", "")
		require.ErrorIs(t, err, queue.ErrNotFound, "a tombstone is no job")
		_, err = queue.DecodeRecord(b.queue, j.ID, strings.Replace(rec, "|", "x", 1), "", "")
		require.ErrorContains(t, err, "malformed spec")
	})

	t.Run("ImmediateJobIsPendingWhateverTheSubMillisecond", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.clock.Advance(700 * time.Microsecond) // real clocks are rarely on a whole millisecond
		j := b.enqueue(t, queue.NewJob{})
		require.Equal(t, queue.StatusPending, j.Status)
		j2 := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now()})
		require.Equal(t, queue.StatusPending, j2.Status)
		require.Equal(t, int64(2), b.stats(t).Pending)
		// Due 0.1 ms from now, in this same millisecond: scheduled.
		j3 := b.enqueue(t, queue.NewJob{Delay: 100 * time.Microsecond})
		require.Equal(t, queue.StatusScheduled, j3.Status)
		requireSoonAfter(t, b.clock.Now().Truncate(time.Millisecond), j3.RunAt)
		require.Equal(t, int64(1), b.stats(t).Scheduled)
	})

	t.Run("PastRunAtMeansNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(-time.Hour)})
		require.Equal(t, queue.StatusPending, j.Status)
		require.Equal(t, j.ID, b.claimOne(t).ID)
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
		moved, _, err := b.client.Promote(b.ctx, b.queue)
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

	t.Run("StaleTokenChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Visibility: time.Second})
		first := b.claimOne(t)
		b.clock.Advance(1001 * time.Millisecond) // the lease lapses
		ids, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, []string{first.ID}, ids)
		second := b.claimOne(t)
		require.Equal(t, first.ID, second.ID)
		require.Equal(t, 2, second.Attempts)
		require.NotEqual(t, first.Token, second.Token)

		before := b.get(t, first.ID)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, first.ID, first.Token, nil), queue.ErrLeaseLost)
		_, err = b.client.Fail(b.ctx, b.queue, first.ID, first.Token, queue.FailOptions{Error: "late"})
		require.ErrorIs(t, err, queue.ErrLeaseLost)
		_, err = b.client.Heartbeat(b.ctx, b.queue, first.ID, first.Token, time.Minute)
		require.ErrorIs(t, err, queue.ErrLeaseLost)
		require.ErrorIs(t, b.client.Release(b.ctx, b.queue, first.ID, first.Token), queue.ErrLeaseLost)
		require.Equal(t, before, b.get(t, first.ID), "a stale token changed the job")
		s := b.stats(t)
		require.Equal(t, int64(1), s.Processing)
		require.Zero(t, s.CompletedTotal+s.FailedTotal)

		// The current holder still can.
		require.NoError(t, b.client.Complete(b.ctx, b.queue, second.ID, second.Token, nil))
	})

	t.Run("BlockingClaimWaitsForAJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got := make(chan []*queue.Job, 1)
		go func() {
			jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Wait: 10 * time.Second, Max: 5})
			if err != nil {
				jobs = nil
			}
			got <- jobs
		}()
		// Wait until the claimer waits on the wake stream, then enqueue.
		node := b.rdb
		if cc, ok := b.rdb.(*redis.ClusterClient); ok {
			n, err := cc.MasterForKey(b.ctx, b.key(queue.KeyPending))
			require.NoError(t, err)
			node = n
		}
		require.Eventually(t, func() bool {
			cl, err := node.ClientList(b.ctx).Result()
			return err == nil && containsCmd(cl, "xread")
		}, 10*time.Second, 5*time.Millisecond)
		j := b.enqueue(t, queue.NewJob{})
		jobs := <-got
		require.Len(t, jobs, 1)
		require.Equal(t, j.ID, jobs[0].ID)
		require.Equal(t, queue.StatusProcessing, b.get(t, j.ID).Status)
	})

	t.Run("ClaimedJobsLiveInLeasesNotInProcessing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			b.enqueue(t, queue.NewJob{})
		}
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 2})
		require.NoError(t, err)
		require.Len(t, jobs, 2)
		blocked, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Wait: time.Second})
		require.NoError(t, err)
		require.Len(t, blocked, 1)
		require.Equal(t, int64(3+1), b.rdb.ZCard(b.ctx, b.key(queue.KeyLeases)).Val(), "and the sentinel")
		require.Equal(t, int64(3), b.stats(t).Processing)
		listed, _, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusProcessing})
		require.NoError(t, err)
		require.Len(t, listed, 3)
	})

	t.Run("BlockingClaimTimesOutEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Wait: 100 * time.Millisecond})
		require.NoError(t, err)
		require.Empty(t, jobs)
	})

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
			moved, _, err := b.client.Promote(b.ctx, b.queue)
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
			_, _, err = b.client.Promote(b.ctx, b.queue)
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
		_, _, err = b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		c = b.claimOne(t)
		res, err = b.client.Fail(b.ctx, b.queue, j.ID, c.Token, queue.FailOptions{Error: "bad input", Dead: true})
		require.NoError(t, err)
		require.Equal(t, queue.StatusDead, res.Status)
		require.Equal(t, 2, b.get(t, j.ID).Attempts)
	})

	t.Run("HeartbeatExtendsAndReportsCancel", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Visibility: 10 * time.Second})
		c := b.claimOne(t)
		b.clock.Advance(8 * time.Second)
		l, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, 0)
		require.NoError(t, err)
		requireSoonAfter(t, b.clock.Now().Add(10*time.Second), l.Until)
		require.False(t, l.CancelRequested)
		b.clock.Advance(8 * time.Second) // 16 s after the claim: alive thanks to the heartbeat
		ids, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Empty(t, ids)
		// A shorter extension never shortens the lease.
		l2, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, time.Second)
		require.NoError(t, err)
		require.Equal(t, l.Until, l2.Until)
		_, err = b.client.Cancel(b.ctx, b.queue, c.ID)
		require.NoError(t, err)
		l3, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, 0)
		require.NoError(t, err)
		require.True(t, l3.CancelRequested)
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

	t.Run("ReleaseHandsBackAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 1})
		c := b.claimOne(t)
		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token))
		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token), "a retried release answers what the first did")
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, nil), queue.ErrLeaseLost)
		again := b.claimOne(t)
		require.ErrorIs(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token), queue.ErrLeaseLost, "not once the job is claimed again")
		require.Equal(t, j.ID, again.ID)
		require.Equal(t, 2, again.Attempts)
	})

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
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, nil))
		ttl := b.expiresIn(t, j.ID)
		require.Greater(t, ttl, 59*time.Minute, "the job is kept as long as its idempotency record")
	})

	t.Run("BatchEnqueueAcrossQueuesValidatedAsAWhole", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.EnqueueBatch(b.ctx, []queue.NewJob{
			{Queue: "qa", Kind: "k"}, {Queue: "qb", Kind: "k"}, {Queue: "Bad{Name}", Kind: "k"}})
		var fe *queue.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, 2, fe.Index)
		require.Equal(t, "queue", fe.Field)
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Empty(t, qs, "nothing was enqueued")

		jobs := make([]queue.NewJob, 0, 1000)
		for i := range 1000 {
			jobs = append(jobs, queue.NewJob{Queue: []string{"qa", "qb", "qc"}[i%3], Kind: "k", Delay: time.Duration(i%2) * time.Second})
		}
		out, err := b.client.EnqueueBatch(b.ctx, jobs)
		require.NoError(t, err)
		require.Len(t, out, 1000)
		seen := map[string]bool{}
		for _, e := range out {
			require.False(t, seen[e.Job.ID])
			seen[e.Job.ID] = true
		}
		qs, err = b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"qa", "qb", "qc"}, qs)
		var total int64
		for _, q := range qs {
			s, err := b.client.Stats(b.ctx, q)
			require.NoError(t, err)
			total += s.Pending + s.Scheduled
		}
		require.Equal(t, int64(1000), total)
		_, err = b.client.EnqueueBatch(b.ctx, make([]queue.NewJob, 1001))
		require.ErrorIs(t, err, queue.ErrInvalid)
	})

	t.Run("BadInputIsANamedError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.MaxPayloadBytes = 64 })
		cases := []struct {
			field string
			nj    queue.NewJob
			is    error
		}{
			{"queue", queue.NewJob{Queue: "A", Kind: "k"}, queue.ErrInvalidQueue},
			{"kind", queue.NewJob{Kind: ""}, queue.ErrInvalidKind},
			{"payload", queue.NewJob{Kind: "k", Payload: json.RawMessage(`{"a":`)}, queue.ErrInvalid},
			{"payload", queue.NewJob{Kind: "k", Payload: json.RawMessage(`"` + string(make([]byte, 70)) + `"`)}, queue.ErrPayloadTooLarge},
			{"delay", queue.NewJob{Kind: "k", Delay: -time.Second}, queue.ErrInvalid},
			{"delay", queue.NewJob{Kind: "k", Delay: time.Second, RunAt: time.Now()}, queue.ErrInvalid},
			{"max_attempts", queue.NewJob{Kind: "k", MaxAttempts: -1}, queue.ErrInvalid},
			{"max_attempts", queue.NewJob{Kind: "k", MaxAttempts: 1001}, queue.ErrInvalid},
			{"backoff", queue.NewJob{Kind: "k", Backoff: &queue.Backoff{Initial: time.Second, Factor: 0.5, Max: time.Minute}}, queue.ErrInvalidBackoff},
			{"visibility", queue.NewJob{Kind: "k", Visibility: time.Millisecond}, queue.ErrInvalid},
			{"result_ttl", queue.NewJob{Kind: "k", ResultTTL: -time.Second}, queue.ErrInvalid},
			{"idempotency_key", queue.NewJob{Kind: "k", IdempotencyKey: "a\nb"}, queue.ErrInvalid},
		}
		for _, tc := range cases {
			_, err := b.client.Enqueue(b.ctx, tc.nj)
			var fe *queue.FieldError
			require.ErrorAs(t, err, &fe, tc.field)
			require.Equal(t, tc.field, fe.Field)
			require.ErrorIs(t, err, tc.is, tc.field)
		}
		_, err := b.client.Claim(b.ctx, "no{tag}", queue.ClaimOptions{})
		require.ErrorIs(t, err, queue.ErrInvalidQueue)
		_, err = b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 1001})
		require.ErrorIs(t, err, queue.ErrInvalid)
		_, err = b.client.Get(b.ctx, b.queue, "../x")
		require.ErrorIs(t, err, queue.ErrInvalidID)
	})

	t.Run("TooManyQueues", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.MaxQueues = 2 })
		b.enqueue(t, queue.NewJob{Queue: "a"})
		b.enqueue(t, queue.NewJob{Queue: "b"})
		b.enqueue(t, queue.NewJob{Queue: "a"})
		_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "c", Kind: "k"})
		require.ErrorIs(t, err, queue.ErrTooManyQueues)
		// A batch refused for one of its queues enqueues nothing at all.
		_, err = b.client.EnqueueBatch(b.ctx, []queue.NewJob{{Queue: "a", Kind: "k"}, {Queue: "c", Kind: "k"}})
		require.ErrorIs(t, err, queue.ErrTooManyQueues)
		s, err := b.client.Stats(b.ctx, "a")
		require.NoError(t, err)
		require.Equal(t, int64(2), s.EnqueuedTotal)
	})

	t.Run("PausedQueueAcceptsAndPromotesButHandsOutNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.client.Pause(b.ctx, b.queue))
		b.enqueue(t, queue.NewJob{})
		b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		b.clock.Advance(time.Second)
		moved, _, err := b.client.Promote(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		b.claimNone(t)
		s := b.stats(t)
		require.True(t, s.Paused)
		require.Equal(t, int64(2), s.Pending)
		require.NoError(t, b.client.Resume(b.ctx, b.queue))
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 5})
		require.NoError(t, err)
		require.Len(t, jobs, 2)
	})

	t.Run("StatsOldestPendingAndNextRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Minute)})
		b.clock.Advance(3 * time.Second)
		s := b.stats(t)
		require.InDelta(t, (3 * time.Second).Seconds(), s.OldestPendingAge.Seconds(), 1, "its run_at is Redis's now at enqueue")
		require.Equal(t, b.clock.Now().Add(57*time.Second), s.NextRunAt)
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
		args := []any{2, "tok", 0, "1", 0} // max, token base, visibility, want next, wait
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
		next, err := strconv.ParseFloat(r1.([]any)[1].(string), 64)
		require.NoError(t, err)
		require.Equal(t, float64(later.RunAt.UnixMilli()), math.Floor(next), "the next due time")
		require.Equal(t, r1.([]any)[1], r2.([]any)[1], "the rerun answers the next due time too")
		require.Equal(t, queue.StatusProcessing, read(r1)[0].Status)
		require.Equal(t, 1, read(r1)[0].Attempts)
		require.Equal(t, int64(2), b.stats(t).Processing)
		require.Equal(t, int64(2), b.stats(t).Pending)

		// An enqueue sent twice makes one job, and a job claimed between the
		// two runs is left alone.
		spec := queue.EncodeSpec(3, 30*time.Second, queue.DefaultBackoff.Encode())
		job := []any{"0192f3c4a1b27c9e8d1f0a3b4c5d6e7f", "k", "{}", spec, "d0", "", ""}
		enq := append([]any{60000, 1}, job...)
		_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		claimed, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, claimed, 3)
		_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		s := b.stats(t)
		require.Zero(t, s.Pending)
		require.Equal(t, int64(5), s.Processing)
		require.Equal(t, int64(6), s.EnqueuedTotal) // and the scheduled one
		require.Equal(t, queue.StatusProcessing, b.get(t, "0192f3c4a1b27c9e8d1f0a3b4c5d6e7f").Status)

		// A call of several jobs, sent twice, makes them once.
		two := []any{60000, 2,
			"0192f3c4a1b27c9e8d1f0a3b4c5d6e80", "k", "{}", spec, "d0", "", "",
			"0192f3c4a1b27c9e8d1f0a3b4c5d6e81", "k", "{}", spec, "d3600000000", "", ""}
		for range 2 {
			_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, two...)
			require.NoError(t, err)
		}
		s = b.stats(t)
		require.Equal(t, int64(1), s.Pending)
		require.Equal(t, int64(2), s.Scheduled) // with the one due in a minute
		require.Equal(t, int64(8), s.EnqueuedTotal)
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
		second, err := queue.NewClient(queue.Config{Redis: newRDB(t), Namespace: b.ns, Clock: b.clock, DisableEvents: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = second.Close() })
		var wg sync.WaitGroup
		counts := make([]int, 2)
		for i, c := range []*queue.Client{b.client, second} {
			wg.Go(func() {
				for range 100 {
					moved, next, err := c.Promote(b.ctx, b.queue)
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

	t.Run("EventsArePublished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var sub *redis.PubSub
		if cc, ok := b.rdb.(*redis.ClusterClient); ok {
			sub = cc.SSubscribe(b.ctx, b.events())
		} else {
			sub = b.rdb.Subscribe(b.ctx, b.events())
		}
		t.Cleanup(func() { _ = sub.Close() })
		_, err := sub.Receive(b.ctx)
		require.NoError(t, err)
		j := b.enqueue(t, queue.NewJob{Kind: "email"})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, nil))
		for _, want := range []string{"enqueued|%s|email|pending|0|", "claimed|%s|email|processing|1|", "completed|%s|email|completed|1|"} {
			m, err := sub.ReceiveMessage(b.ctx)
			require.NoError(t, err)
			i := strings.LastIndexByte(m.Payload, '|')
			require.Equal(t, fmt.Sprintf(want, j.ID), m.Payload[:i+1])
			ms, err := strconv.ParseInt(m.Payload[i+1:], 10, 64)
			require.NoError(t, err)
			requireSoonAfter(t, b.clock.Now(), time.UnixMilli(ms).UTC(), "the event's time is Redis's")
		}
	})

	t.Run("NudgeOnNewEarliestJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(b.ctx)
		defer cancel()
		nudges := b.client.Nudges(ctx)
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

func containsCmd(clientList, cmd string) bool {
	return strings.Contains(clientList, "cmd="+cmd+" ") || strings.Contains(clientList, "cmd="+cmd+"\n")
}
