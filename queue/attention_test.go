package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The attention indexes (attention.go): each queue's next due job and next
// sweep work, kept never later than the truth, so that promoters and
// reclaimers visit only the queues that have work. On one redis-server and
// on the Cluster (where the indexes sit in another slot than the queues).

func TestAttentionSingle(t *testing.T) {
	t.Parallel()
	runAttention(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestAttentionCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runAttention(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

func runAttention(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	setup := func(t *testing.T, opts ...func(*queue.Config)) *testBundle {
		t.Helper()
		return newBundle(t, newRDB, opts...)
	}
	index := func(t *testing.T, b *testBundle, name string) map[string]int64 {
		t.Helper()
		idx, err := b.client.Index(b.ctx, name)
		require.NoError(t, err)
		return idx
	}

	t.Run("AnEarlierJobLowersTheDueIndexALaterOneDoesNot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Empty(t, index(t, b, "due"))
		j := b.enqueue(t, queue.NewJob{Delay: time.Hour})
		require.Equal(t, map[string]int64{b.queue: j.RunAt.UnixMilli()}, index(t, b, "due"))
		b.enqueue(t, queue.NewJob{Delay: 2 * time.Hour})
		require.Equal(t, map[string]int64{b.queue: j.RunAt.UnixMilli()}, index(t, b, "due"), "a later job: no change")
		earlier := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		require.Equal(t, map[string]int64{b.queue: earlier.RunAt.UnixMilli()}, index(t, b, "due"))
		b.enqueue(t, queue.NewJob{Queue: "other"}) // pending at once: nothing to promote
		require.NotContains(t, index(t, b, "due"), "other")

		// A failed attempt's retry, and a rescheduled job, lower it too.
		o := setup(t)
		o.enqueue(t, queue.NewJob{MaxAttempts: 3})
		c := o.claimOne(t)
		res, err := o.client.Fail(o.ctx, o.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: o.clock.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, map[string]int64{o.queue: res.Due.UnixMilli()}, index(t, o, "due"))
		p := o.enqueue(t, queue.NewJob{})
		_, err = o.client.Reschedule(o.ctx, o.queue, p.ID, o.clock.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, map[string]int64{o.queue: o.clock.Now().Add(time.Minute).UnixMilli()}, index(t, o, "due"))
	})

	t.Run("APromotePassParksTheQueueAtItsNextJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Delay: time.Second})
		later := b.enqueue(t, queue.NewJob{Delay: time.Hour})
		b.clock.Advance(2 * time.Second)
		moved, _, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.Equal(t, map[string]int64{b.queue: later.RunAt.UnixMilli()}, index(t, b, "due"))

		// Within its horizon, a promoter's pass writes nothing: its loop
		// sleeps until the job.
		require.NoError(t, b.client.Unindex(b.ctx, b.queue))
		_, _, err = b.client.Promote(b.ctx, b.queue, 2*time.Hour)
		require.NoError(t, err)
		require.Empty(t, index(t, b, "due"))
		_, _, err = b.client.Promote(b.ctx, b.queue, time.Minute)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{b.queue: later.RunAt.UnixMilli()}, index(t, b, "due"))

		// Nothing scheduled: out of the index.
		b.clock.Advance(2 * time.Hour)
		_, _, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Empty(t, index(t, b, "due"))
		due, err := b.client.Source().Due(b.ctx, time.Hour, 0, 10)
		require.NoError(t, err)
		require.Empty(t, due)
	})

	t.Run("AParkOlderThanAMarkIsDropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Delay: time.Hour})
		// A promote pass reads the queue...
		v, err := b.client.RunScript(b.ctx, "promote", b.queue, 500)
		require.NoError(t, err)
		seq := v.([]any)[2].(int64)
		// ...an enqueue of an earlier job marks the index after it...
		earlier := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		// ...and the pass's park, arriving last, must not undo that mark.
		require.NoError(t, b.client.ParkDue(b.ctx, b.queue, b.clock.Now().Add(time.Hour).UnixMilli(), seq))
		require.Equal(t, map[string]int64{b.queue: earlier.RunAt.UnixMilli()}, index(t, b, "due"))
		// A pass that ran after the mark parks.
		_, _, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{b.queue: earlier.RunAt.UnixMilli()}, index(t, b, "due"))
		require.NoError(t, b.client.ParkDue(b.ctx, b.queue, 0, b.clock.Now().Add(time.Hour).UnixMicro()))
		require.Empty(t, index(t, b, "due"), "a newer park takes the queue out")
	})

	// A call whose reply was lost is sent again, and its rerun changes
	// nothing: it must still mark what its first run added, since the
	// client that ran it never got the marks to apply.
	t.Run("ARerunAfterALostReplyMarksAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		spec := queue.EncodeSpec(3, 30*time.Second, queue.DefaultBackoff.Encode())
		const id = "0192f3c4a1b27c9e8d1f0a3b4c5d6e7f"
		enq := []any{60000, 64, 0, 0, 1, id, "k", "{}", spec, "d3600000000", "", "", "", "", "", ""} // an hour ahead
		_, err := b.client.RunScript(b.ctx, "create", b.queue)
		require.NoError(t, err)
		_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		want := index(t, b, "due")
		require.Len(t, want, 1)
		require.NoError(t, b.client.Unindex(b.ctx, b.queue)) // the first run's marks never applied
		_, err = b.client.RunScript(b.ctx, "enqueue", b.queue, enq...)
		require.NoError(t, err)
		require.Equal(t, want, index(t, b, "due"), "the rerun of the enqueue")

		b.enqueue(t, queue.NewJob{})
		claim := []any{1, "base0001", 30000, "0", 0, 0, ""}
		_, err = b.client.RunScript(b.ctx, "claim", b.queue, claim...)
		require.NoError(t, err)
		want = index(t, b, "sweep")
		require.Len(t, want, 1)
		require.NoError(t, b.client.Unindex(b.ctx, b.queue))
		v, err := b.client.RunScript(b.ctx, "claim", b.queue, claim...)
		require.NoError(t, err)
		require.Len(t, v.([]any), 5, "the same job, answered again")
		require.Equal(t, want, index(t, b, "sweep"), "the rerun of the claim")

		c, err := queue.ParsePacked(b.queue, v.([]any)[4].(string))
		require.NoError(t, err)
		res, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now().Add(time.Minute)})
		require.NoError(t, err)
		require.NoError(t, b.client.Unindex(b.ctx, b.queue))
		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now().Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, res.Due.UnixMilli(), index(t, b, "due")[b.queue], "the rerun of the fail")
	})

	// A call that failed with the connection (its reply lost, a timeout)
	// may have run, and noted marks no one applies: the queue is marked at
	// now in both indexes instead, early, never late. A script's own
	// error wrote nothing and marks nothing.
	t.Run("AnUncertainFailureMarksTheQueueNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := b.clock.Now()
		b.client.Uncertain(b.queue, errors.New("queue: redis: EOF"))
		require.Equal(t, 1, b.client.MarksPending(), "marked in the background: the failed caller does not wait")
		require.Eventually(t, func() bool { return b.client.MarksPending() == 0 }, 10*time.Second, time.Millisecond)
		for _, idx := range []string{"due", "sweep"} {
			got := index(t, b, idx)
			require.Contains(t, got, b.queue, idx)
			requireSoonAfter(t, now, time.UnixMilli(got[b.queue]), idx)
		}
		o := setup(t)
		o.client.Uncertain(o.queue, errors.New("ERR chronoq claim: malformed arguments"))
		require.Zero(t, o.client.MarksPending())
		require.Empty(t, index(t, o, "due"))
		require.Empty(t, index(t, o, "sweep"))
	})

	// A sweep mark no earlier than the queue's hint is left out (see "The
	// sweep hint" in attention.go): a claim into a queue whose entry is
	// early already sends no mark. A hint past its age, and a reclaim pass
	// (whose park may raise the entry), let the next mark go again; so an
	// entry lost behind a hint is back within the hint's age.
	t.Run("TheSweepHintLeavesOutMarksThatChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		marks := &markCounter{sha: queue.MarkScriptHash()}
		b.rdb.AddHook(marks)
		enqueueClaim := func() *queue.Job {
			t.Helper()
			b.enqueue(t, queue.NewJob{Visibility: time.Minute})
			return b.claimOne(t)
		}
		first := enqueueClaim()
		require.Equal(t, 1, marks.n(), "the first lease marks the index")
		require.Equal(t, map[string]int64{b.queue: first.LeaseUntil.UnixMilli()}, index(t, b, "sweep"))
		require.NoError(t, b.client.Complete(b.ctx, b.queue, first.ID, first.Token, queue.CompleteOptions{}))
		b.clock.Advance(time.Second)
		second := enqueueClaim() // the earliest lease again, but later than the entry
		require.Equal(t, 1, marks.n(), "a mark that would change nothing is left out")
		require.Equal(t, map[string]int64{b.queue: first.LeaseUntil.UnixMilli()}, index(t, b, "sweep"))

		// Past the hint's age, the next mark goes (and changes nothing here).
		b.clock.Advance(queue.SweepHintFor)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, second.ID, second.Token, queue.CompleteOptions{}))
		third := enqueueClaim()
		require.Equal(t, 2, marks.n())
		require.Equal(t, map[string]int64{b.queue: first.LeaseUntil.UnixMilli()}, index(t, b, "sweep"))

		// A reclaim pass parks the entry at what it finds (third's lease)
		// and drops the hint, so the next mark goes, whatever its time.
		_, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{b.queue: third.LeaseUntil.UnixMilli()}, index(t, b, "sweep"))
		require.NoError(t, b.client.Complete(b.ctx, b.queue, third.ID, third.Token, queue.CompleteOptions{}))
		b.clock.Advance(time.Second)
		fourth := enqueueClaim()
		require.Equal(t, 3, marks.n(), "the pass dropped the hint")
		require.Equal(t, map[string]int64{b.queue: third.LeaseUntil.UnixMilli()}, index(t, b, "sweep"))

		// An entry lost behind a hint (a client died before its mark) is
		// back with the first lease mark after the hint's age.
		require.NoError(t, b.client.Complete(b.ctx, b.queue, fourth.ID, fourth.Token, queue.CompleteOptions{}))
		require.NoError(t, b.client.Unindex(b.ctx, b.queue))
		b.clock.Advance(time.Second)
		fifth := enqueueClaim()
		require.Equal(t, 3, marks.n())
		require.Empty(t, index(t, b, "sweep"), "within the hint's age the loss is not seen")
		require.NoError(t, b.client.Complete(b.ctx, b.queue, fifth.ID, fifth.Token, queue.CompleteOptions{}))
		b.clock.Advance(queue.SweepHintFor)
		sixth := enqueueClaim()
		require.Equal(t, 4, marks.n())
		require.Equal(t, map[string]int64{b.queue: sixth.LeaseUntil.UnixMilli()}, index(t, b, "sweep"))
	})

	t.Run("LeasesRetentionAndTheDeadMarkTheSweepIndex", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.Retention = time.Hour; c.DeadMaxAge = 24 * time.Hour })
		b.enqueue(t, queue.NewJob{Visibility: time.Minute})
		require.Empty(t, index(t, b, "sweep"), "a pending job needs no sweep")
		c := b.claimOne(t)
		require.Equal(t, map[string]int64{b.queue: c.LeaseUntil.UnixMilli()}, index(t, b, "sweep"))
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		require.Equal(t, map[string]int64{b.queue: c.LeaseUntil.UnixMilli()}, index(t, b, "sweep"),
			"a retention end later than the lease: the entry is early already")
		sweep, err := b.client.SweepDue(b.ctx)
		require.NoError(t, err)
		require.Empty(t, sweep)

		// The reclaim the lapsed entry brings parks the queue at its next
		// work: the completed job's retention end.
		b.clock.Advance(2 * time.Minute)
		sweep, err = b.client.SweepDue(b.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{b.queue}, sweep)
		_, err = b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		done := b.get(t, c.ID)
		require.Equal(t, map[string]int64{b.queue: done.CompletedAt.Add(time.Hour).UnixMilli()}, index(t, b, "sweep"))

		// A dead job's age, in a queue with nothing else to sweep.
		d := setup(t, func(c *queue.Config) { c.Retention = -1; c.DeadMaxAge = 24 * time.Hour; c.RetryWindow = time.Second })
		d.enqueue(t, queue.NewJob{MaxAttempts: 1})
		c = d.claimOne(t)
		_, err = d.client.Fail(d.ctx, d.queue, c.ID, c.Token, queue.FailOptions{Error: "x"})
		require.NoError(t, err)
		d.clock.Advance(2 * time.Minute) // past the lease, with nothing left to do
		_, err = d.client.Reclaim(d.ctx, d.queue)
		require.NoError(t, err)
		dead := d.get(t, c.ID)
		require.Equal(t, map[string]int64{d.queue: dead.DiedAt.Add(24 * time.Hour).UnixMilli()}, index(t, d, "sweep"))
	})

	t.Run("DeletingAQueueTakesItOutOfTheIndexes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Delay: time.Hour})
		b.enqueue(t, queue.NewJob{})
		b.claimOne(t)
		require.Len(t, index(t, b, "due"), 1)
		require.Len(t, index(t, b, "sweep"), 1)
		require.NoError(t, b.client.DeleteQueue(b.ctx, b.queue, true))
		require.Empty(t, index(t, b, "due"))
		require.Empty(t, index(t, b, "sweep"))
	})

	// A sweep visits the queues the index names and no other: a queue whose
	// mark was lost (its client died after the claim) waits for the
	// reconcile, while the others are swept on time.
	t.Run("ASweepVisitsWhatTheIndexNamesAndAReconcileTheRest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, q := range []string{"busy", "lost"} {
			b.enqueue(t, queue.NewJob{Queue: q, Visibility: 5 * time.Second})
			_, err := b.client.Claim(b.ctx, q, queue.ClaimOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, b.client.Unindex(b.ctx, "lost"))
		reclaimed := make(chan string, 4)
		r, err := queue.NewReclaimer(queue.ReclaimerConfig{Client: b.client, Interval: time.Second, ReconcileInterval: time.Minute,
			OnReclaim: func(q string, _ []string) { reclaimed <- q }})
		require.NoError(t, err)
		reclaiming := lifecycle.Start(b.ctx, r)
		defer func() { require.NoError(t, reclaiming.Stop(context.Background())) }()
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1)) // the first sweep, a reconcile, is done
		require.Error(t, r.Run(b.ctx), "a second Run, while one is under way, is refused")
		lease := func(q string) int64 { return b.get2(t, q, firstProcessing(t, b, q)).LeaseUntil.UnixMilli() }
		require.Equal(t, map[string]int64{"busy": lease("busy"), "lost": lease("lost")}, index(t, b, "sweep"),
			"the reconcile found the lost queue's lease, not yet due but not in the index: it reclaimed it, which parked it")
		require.NoError(t, b.client.Unindex(b.ctx, "lost")) // lost again
		b.clock.Advance(6 * time.Second)                    // both leases lapse; the sweeps are not reconciles
		require.Equal(t, "busy", <-reclaimed)
		for range 5 {
			require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
			b.clock.Advance(time.Second)
		}
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
		require.Empty(t, reclaimed, "the lost queue is not in the index: no sweep visits it")
		require.Equal(t, queue.StatusProcessing, b.get2(t, "lost", firstProcessing(t, b, "lost")).Status)
		b.clock.Advance(time.Minute) // the reconcile
		require.Equal(t, "lost", <-reclaimed)
	})

	// The promoter over real Redis: a queue whose next job is far off is
	// parked, costs no pass, and is promoted on time when it nears.
	t.Run("APromoterPromotesAParkedQueueOnTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		passes := make(chan int, 16)
		p, err := delayed.NewPromoter(delayed.Config{Source: b.client.Source(), Clock: b.clock, MaxSleep: time.Second,
			OnPromote: func(_ string, n int) { passes <- n }})
		require.NoError(t, err)
		promoting := lifecycle.Start(b.ctx, p)
		defer func() { require.NoError(t, promoting.Stop(context.Background())) }()
		for range 59 {
			require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1)) // the scheduler only: the queue is parked
			b.clock.Advance(time.Second)
		}
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 2)) // the queue's loop, started as its job nears, sleeps
		require.Equal(t, queue.StatusScheduled, b.get(t, j.ID).Status)
		b.clock.Advance(time.Second)
		require.Equal(t, 1, <-passes)
		require.Equal(t, queue.StatusPending, b.get(t, j.ID).Status)
	})
}

// firstProcessing answers the id of a processing job of queue q.
func firstProcessing(t *testing.T, b *testBundle, q string) string {
	t.Helper()
	jobs, _, err := b.client.List(b.ctx, q, queue.ListOptions{Status: queue.StatusProcessing, Limit: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0].ID
}

// markCounter counts the calls of the script that applies marks.
type markCounter struct {
	sha   string
	calls atomic.Int64
}

func (h *markCounter) n() int { return int(h.calls.Load()) }

func (h *markCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *markCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *markCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && args[1] == h.sha {
			h.calls.Add(1)
		}
		return next(ctx, cmd)
	}
}
