package queue_test

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// contractClaim holds the contract of claims: fenced by a token, leased,
// blocking when the queue is empty, and promoting what is due on the way;
// heartbeats and releases of a claim.
func contractClaim(t *testing.T, setup setupFunc) {
	// handHold is how long after its due time a due time handed to a
	// claimer is left to it (HAND_HOLD in internal/store/lua/common.lua).
	const handHold = 2 * time.Millisecond

	t.Run("ClaimPromotesWhatIsDueAndTellsTheNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		due := b.clock.Now().Add(5*time.Second + 300*time.Microsecond)
		var ids []string
		for i := range 3 {
			ids = append(ids, b.enqueue(t, queue.NewJob{RunAt: due.Add(time.Duration(i) * time.Microsecond)}).ID)
		}
		late := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Hour)})
		claim := func(n int) ([]*queue.Job, time.Time) {
			t.Helper()
			jobs, _, next, err := plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: n}, 0)
			require.NoError(t, err)
			return jobs.([]*queue.Job), next
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
		require.True(t, next.IsZero(), "a claim that took all it asked for has no room left: it is handed no due time")
		b.clock.Advance(5 * time.Microsecond)
		jobs, next = claim(1)
		require.Len(t, jobs, 1)
		require.Equal(t, ids[1], jobs[0].ID)
		require.True(t, next.IsZero())
		require.Equal(t, queue.StatusScheduled, b.get(t, ids[2]).Status, "due already, and still scheduled: one claim promotes at most Max")
		jobs, next = claim(10)
		require.Len(t, jobs, 1)
		require.Equal(t, ids[2], jobs[0].ID)
		require.Equal(t, late.RunAt, next, "a claim with room is handed the next due time")
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

	// A worker's claim (ClaimNext with ahead) takes, besides what is due,
	// the jobs due within ahead that it would take directly, each to
	// start at its due time by Redis's clock; the others stay scheduled.
	t.Run("AClaimAheadHoldsWhatComesDueWithinIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.client.UseExactClock() // Redis's clock is the test's: windows of ms
		now := b.clock.Now()
		due := now.Add(30*time.Millisecond + 7*time.Microsecond) // a job's RunAt answers the ms
		soon := b.enqueue(t, queue.NewJob{RunAt: due})
		labeled := b.enqueue(t, queue.NewJob{RunAt: now.Add(20 * time.Millisecond), Labels: []string{"gpu"}})
		later := b.enqueue(t, queue.NewJob{RunAt: now.Add(time.Second)})
		args := []any{10, "toka", 0, "1", 0, 50, ""} // max, token base, visibility, want next, wait, ahead (ms), eligible label sets
		claim := func() (int64, int64, *queue.Job, []any) {
			t.Helper()
			r, err := b.client.RunScript(b.ctx, "claim", b.queue, args...)
			require.NoError(t, err)
			rep := r.([]any)
			require.Len(t, rep, 5, "one job: the one without labels due within the lookahead")
			j, err := queue.ParsePacked(b.queue, rep[4].(string))
			require.NoError(t, err)
			end, waits, ok := strings.Cut(rep[3].(string), " ")
			require.True(t, ok, "Redis's µs at the end, then the waits: %q", rep[3])
			endUs, err := strconv.ParseInt(end, 10, 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, endUs, rep[2].(int64))
			wait, err := strconv.ParseInt(waits, 10, 64)
			require.NoError(t, err)
			return rep[2].(int64), wait, j, rep
		}
		nowUs, wait, j, rep := claim()
		require.Equal(t, soon.ID, j.ID)
		require.Positive(t, wait)
		require.Equal(t, due.UnixMicro()-nowUs, wait, "it may start when it is due by Redis's clock, to the µs")
		require.Equal(t, queue.StatusProcessing, j.Status)
		require.Equal(t, 1, j.Attempts)
		endOfDueMs := due.Truncate(time.Millisecond).Add(time.Millisecond)
		require.Equal(t, endOfDueMs, j.ClaimedAt, "its claim takes effect at the end of the ms it is due in")
		require.Equal(t, endOfDueMs.Add(queue.DefaultVisibility), j.LeaseUntil, "and its lease runs from then")
		require.Equal(t, queue.StatusScheduled, b.get(t, labeled.ID).Status, "a job with labels is not taken ahead")
		require.Equal(t, queue.StatusScheduled, b.get(t, later.ID).Status, "nor one due after the lookahead")
		next, err := strconv.ParseFloat(rep[1].(string), 64)
		require.NoError(t, err)
		require.Equal(t, float64(labeled.RunAt.UnixMilli()), math.Floor(next), "handed the next due time: the job left scheduled")

		// The rerun of a claim whose reply was lost answers the same job,
		// to start no earlier.
		nowUs2, wait2, j2, rep2 := claim()
		require.Equal(t, rep[4:], rep2[4:])
		require.Equal(t, j.Token, j2.Token)
		require.GreaterOrEqual(t, nowUs2+wait2, due.UnixMicro())

		// Handed back before it is due, it waits for its time again:
		// never run before it.
		require.NoError(t, b.client.Release(b.ctx, b.queue, j.ID, j.Token))
		require.Equal(t, queue.StatusScheduled, b.get(t, soon.ID).Status)
		// Not claimable before then (a margin of ms: Redis's clock here is
		// the test's plus each call's transit), and claimable once past
		// the end of its ms (the record keeps ms).
		b.claimNone(t)
		b.clock.Advance(endOfDueMs.Sub(b.clock.Now()))
		js, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 2}) // the job with labels is promoted too
		require.NoError(t, err)
		require.Len(t, js, 1)
		require.Equal(t, soon.ID, js[0].ID)

		// Behind jobs pending, a claim takes nothing ahead: they go first.
		b.enqueue(t, queue.NewJob{})
		aheadDue := b.clock.Now().Add(10 * time.Millisecond)
		ahead := b.enqueue(t, queue.NewJob{RunAt: aheadDue})
		claimed, starts, _, err := plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: 1}, 50*time.Millisecond)
		require.NoError(t, err)
		require.Len(t, claimed.([]*queue.Job), 1)
		require.Nil(t, starts, "the pending job starts at once")
		require.Equal(t, queue.StatusScheduled, b.get(t, ahead.ID).Status)
		// Then the Go call answers when the job held may start, on the
		// client's clock.
		claimed, starts, _, err = plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: 10}, 50*time.Millisecond)
		require.NoError(t, err)
		require.Len(t, claimed.([]*queue.Job), 1)
		require.Equal(t, ahead.ID, claimed.([]*queue.Job)[0].ID)
		require.Len(t, starts, 1)
		// Redis's clock here is the test's plus each call's transit, so
		// it reaches the due time no later than the test's clock does.
		require.False(t, starts[0].IsZero(), "held")
		require.False(t, starts[0].After(aheadDue.Add(time.Microsecond)), "start %s, due %s", starts[0], aheadDue)
		_, _, _, err = plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{}, queue.MaxAhead+time.Millisecond)
		require.ErrorIs(t, err, queue.ErrInvalid)
	})

	t.Run("AClaimTakesTheDueJobsItPromotesAsTheListWould", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A claim that promotes due jobs into the queue's own list, empty
		// before them, takes them straight to processing (claim.lua's
		// direct): the jobs, their fields and their order are those a
		// claim through the list gives.
		due := b.clock.Now().Add(time.Second)
		big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 200) + `"}`) // not inline: in the data hash
		first := b.enqueue(t, queue.NewJob{RunAt: due, Payload: json.RawMessage(`{"n":1}`)})
		second := b.enqueue(t, queue.NewJob{RunAt: due.Add(time.Millisecond), Payload: big})
		labeled := b.enqueue(t, queue.NewJob{RunAt: due, Labels: []string{"gpu"}})
		b.clock.Advance(2 * time.Second)
		claimed, _, next, err := plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: 10}, 0)
		require.NoError(t, err)
		jobs := claimed.([]*queue.Job)
		require.Len(t, jobs, 2, "the labeled job waits for a claimer with its label")
		require.True(t, next.IsZero())
		for i, want := range []*queue.Job{first, second} {
			j := jobs[i]
			require.Equal(t, want.ID, j.ID, "in due order")
			require.Equal(t, want.Payload, j.Payload)
			require.Equal(t, queue.StatusProcessing, j.Status)
			require.Equal(t, 1, j.Attempts)
			require.Equal(t, int64(1), j.Fence)
			require.NotEmpty(t, j.Token)
			require.Equal(t, want.RunAt, j.RunAt)
			requireSoonAfter(t, b.clock.Now().Add(queue.DefaultVisibility), j.LeaseUntil)
			stored := b.get(t, j.ID)
			require.Equal(t, j.Fence, stored.Fence)
			require.Equal(t, j.Attempts, stored.Attempts)
			require.Equal(t, j.LeaseUntil, stored.LeaseUntil)
			require.Equal(t, queue.StatusProcessing, stored.Status)
			require.Equal(t, want.Payload, stored.Payload)
		}
		require.NotEqual(t, jobs[0].Token, jobs[1].Token)
		n, err := b.rdb.LLen(b.ctx, b.key(queue.KeyPending)).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "no copy of a claimed job left in the list: its sentinel only")
		s := b.stats(t)
		require.Equal(t, int64(3), s.PromotedTotal)
		require.Equal(t, int64(2), s.Processing)
		require.Equal(t, int64(1), s.Pending)
		require.Equal(t, queue.StatusPending, b.get(t, labeled.ID).Status)
		for _, j := range jobs {
			require.NoError(t, b.client.Complete(b.ctx, b.queue, j.ID, j.Token, queue.CompleteOptions{}))
		}

		// A job pending before them stays ahead of jobs promoted later.
		waiting := b.enqueue(t, queue.NewJob{})
		later := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		b.clock.Advance(2 * time.Second)
		require.Equal(t, waiting.ID, b.claimOne(t).ID)
		require.Equal(t, later.ID, b.claimOne(t).ID)

		// A claim's reply lost and the call sent again answers the same
		// jobs, promoted and claimed by the first run.
		again := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		b.clock.Advance(2 * time.Second)
		args := []any{5, "tokd", 0, "1", 0, 0, ""} // max, token base, visibility, want next, wait, ahead, eligible label sets
		r1, err := b.client.RunScript(b.ctx, "claim", b.queue, args...)
		require.NoError(t, err)
		r2, err := b.client.RunScript(b.ctx, "claim", b.queue, args...)
		require.NoError(t, err)
		require.Len(t, r1.([]any), 5)
		require.Equal(t, r1.([]any)[3:], r2.([]any)[3:])
		j, err := queue.ParsePacked(b.queue, r1.([]any)[4].(string))
		require.NoError(t, err)
		require.Equal(t, again.ID, j.ID)
		require.Equal(t, 1, j.Attempts)
	})

	t.Run("OneClaimerIsHandedEachDueTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		second := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(2 * time.Second)})
		next := func() time.Time {
			t.Helper()
			claimed, _, next, err := plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: 10}, 0)
			jobs := claimed.([]*queue.Job)
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
		claimed, _, _, err := plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: 10}, 0)
		jobs := claimed.([]*queue.Job)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, first.ID, jobs[0].ID)
		require.True(t, next().IsZero(), "the claim that took the job was handed the next due time")
		// The promoter leaves a handed due time to its claimer until the
		// hand-out lapses, handHold after it, and says so: it passes
		// again then.
		moved, at, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Zero(t, moved)
		require.Equal(t, second.RunAt.Add(handHold), at, "when the hand-out lapses")
		// If that claimer never comes back, the promoter moves the job
		// then, and the due time after it is handed out.
		b.clock.Advance(time.Second + handHold)
		moved, _, err = b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.Equal(t, second.ID, b.claimOne(t).ID)
		third := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		require.Equal(t, third.RunAt, next())
		require.True(t, next().IsZero())
	})

	t.Run("AClaimThatTookAllItAskedIsHandedNoDueTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		b.enqueue(t, queue.NewJob{})
		sched := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		claim := func(n int) ([]*queue.Job, time.Time) {
			t.Helper()
			jobs, _, next, err := plumbing.Of(b.client).ClaimNext(b.ctx, b.queue, queue.ClaimOptions{Max: n}, 0)
			require.NoError(t, err)
			return jobs.([]*queue.Job), next
		}
		jobs, next := claim(2)
		require.Len(t, jobs, 2)
		require.True(t, next.IsZero(), "full: it may have no room when the job is due")
		moved, at, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Zero(t, moved)
		require.Equal(t, sched.RunAt, at, "not handed out: the promoter keeps its due time")
		jobs, next = claim(2)
		require.Empty(t, jobs)
		require.Equal(t, sched.RunAt, next, "a claim with room is handed it")
	})

	// A job rescheduled while pending leaves its id in the pending list
	// (a stale copy, skipped when reached); made pending again, it is
	// listed twice. One claim that reaches both copies takes it once.
	t.Run("AJobListedTwiceIsClaimedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{})
		_, err := b.client.Reschedule(b.ctx, b.queue, j.ID, b.clock.Now().Add(time.Hour))
		require.NoError(t, err)
		_, err = b.client.RunNow(b.ctx, b.queue, j.ID)
		require.NoError(t, err)
		n, err := b.rdb.LLen(b.ctx, b.key(queue.KeyPending)).Result()
		require.NoError(t, err)
		require.Equal(t, int64(3), n, "listed twice, and the sentinel")
		js, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, js, 1)
		require.Equal(t, 1, js[0].Attempts)
		b.claimNone(t)
		require.Equal(t, 1, b.get(t, j.ID).Attempts)
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
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, first.ID, first.Token, queue.CompleteOptions{}), queue.ErrLeaseLost)
		_, err = b.client.Fail(b.ctx, b.queue, first.ID, first.Token, queue.FailOptions{Error: "late"})
		require.ErrorIs(t, err, queue.ErrLeaseLost)
		_, err = b.client.Heartbeat(b.ctx, b.queue, first.ID, first.Token, queue.HeartbeatOptions{Extend: time.Minute})
		require.ErrorIs(t, err, queue.ErrLeaseLost)
		require.ErrorIs(t, b.client.Release(b.ctx, b.queue, first.ID, first.Token), queue.ErrLeaseLost)
		require.Equal(t, before, b.get(t, first.ID), "a stale token changed the job")
		s := b.stats(t)
		require.Equal(t, int64(1), s.Processing)
		require.Zero(t, s.CompletedTotal+s.FailedTotal)

		// The current holder still can.
		require.NoError(t, b.client.Complete(b.ctx, b.queue, second.ID, second.Token, queue.CompleteOptions{}))
	})

	t.Run("BlockingClaimWaitsForAJob", func(t *testing.T) {
		t.Parallel()
		testutil.NeedRedisServer(t, "CLIENT LIST (to see the claimer wait)")
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

	t.Run("HeartbeatExtendsAndReportsCancel", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Visibility: 10 * time.Second})
		c := b.claimOne(t)
		b.clock.Advance(8 * time.Second)
		l, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{})
		require.NoError(t, err)
		requireSoonAfter(t, b.clock.Now().Add(10*time.Second), l.Until)
		require.False(t, l.CancelRequested)
		b.clock.Advance(8 * time.Second) // 16 s after the claim: alive thanks to the heartbeat
		ids, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Empty(t, ids)
		// A shorter extension never shortens the lease.
		l2, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{Extend: time.Second})
		require.NoError(t, err)
		require.Equal(t, l.Until, l2.Until)
		_, err = b.client.Cancel(b.ctx, b.queue, c.ID)
		require.NoError(t, err)
		l3, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{})
		require.NoError(t, err)
		require.True(t, l3.CancelRequested)
	})

	t.Run("ReleaseHandsBackAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 1})
		c := b.claimOne(t)
		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token))
		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token), "a retried release answers what the first did")
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}), queue.ErrLeaseLost)
		again := b.claimOne(t)
		require.ErrorIs(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token), queue.ErrLeaseLost, "not once the job is claimed again")
		require.Equal(t, j.ID, again.ID)
		require.Equal(t, 2, again.Attempts)
	})

	t.Run("PausedQueueAcceptsAndPromotesButHandsOutNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.client.Pause(b.ctx, b.queue))
		b.enqueue(t, queue.NewJob{})
		b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Second)})
		b.clock.Advance(time.Second)
		moved, _, err := b.client.Promote(b.ctx, b.queue, 0)
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
}
