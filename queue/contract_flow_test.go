package queue_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// Flow keys: claims take a queue's flow keys in turns, and each key's
// limits (max in flight, rate) hold with the queue's; strategies and
// debounce act per key; idle keys are forgotten.
func contractFlow(t *testing.T, setup setupFunc) {
	keyed := func(t *testing.T, b *testBundle, key string, n int) []*queue.Job {
		t.Helper()
		out := make([]*queue.Job, n)
		for i := range n {
			out[i] = b.enqueue(t, queue.NewJob{FlowKey: key, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		}
		return out
	}
	claim := func(t *testing.T, b *testBundle, n int) []*queue.Job {
		t.Helper()
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: n})
		require.NoError(t, err)
		return jobs
	}
	keysOf := func(jobs []*queue.Job) []string {
		out := make([]string, len(jobs))
		for i, j := range jobs {
			out[i] = j.FlowKey
		}
		return out
	}
	count := func(jobs []*queue.Job) map[string]int {
		out := map[string]int{}
		for _, j := range jobs {
			out[j.FlowKey]++
		}
		return out
	}
	complete := func(t *testing.T, b *testBundle, j *queue.Job) {
		t.Helper()
		require.NoError(t, b.client.Complete(b.ctx, b.queue, j.ID, j.Token, queue.CompleteOptions{}))
	}
	stats := func(t *testing.T, b *testBundle, key string) queue.FlowKeyStats {
		t.Helper()
		s, err := b.client.FlowKey(b.ctx, b.queue, key)
		require.NoError(t, err)
		return s
	}

	t.Run("KeysTakeTurnsWhateverTheirBacklog", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyed(t, b, "hot", 30)
		for _, k := range []string{"a", "b", "c"} {
			keyed(t, b, k, 2)
		}
		// One claim a job: the three cold keys' first jobs come within one
		// turn of the four keys with work, not after hot's 30.
		var first []*queue.Job
		for range 4 {
			first = append(first, claim(t, b, 1)...)
		}
		require.ElementsMatch(t, []string{"hot", "a", "b", "c"}, keysOf(first), "one job of each key a turn")
		// A claim of many takes a job of each key a turn, and all it can of
		// a key left alone.
		got := claim(t, b, 20)
		require.Len(t, got, 20)
		require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "hot": 17}, count(got))
		s := b.stats(t)
		require.Equal(t, int64(12), s.Pending, "the flow keys' pending jobs count as pending")
		require.Equal(t, int64(24), s.Processing)
		// A key's jobs come in the order they were enqueued.
		hot := append([]*queue.Job{}, first...)
		hot = append(hot, got...)
		var last string
		for _, j := range hot {
			if j.FlowKey == "hot" {
				require.Greater(t, j.ID, last)
				last = j.ID
			}
		}
	})

	t.Run("AWeightGivesAKeyMoreTurns", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.SetFlowOverride(b.ctx, b.queue, queue.FlowOverride{Key: "gold", Weight: 3})
		require.NoError(t, err)
		keyed(t, b, "gold", 20)
		keyed(t, b, "plain", 20)
		var got []*queue.Job
		for range 16 {
			got = append(got, claim(t, b, 1)...)
		}
		require.Equal(t, map[string]int{"gold": 12, "plain": 4}, count(got), "three turns for one")
	})

	t.Run("ClaimersWithLabelsTakeKeyedJobsToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := keyed(t, b, "k", 1)[0]
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 5, Labels: []string{"gpu"}})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, j.ID, jobs[0].ID)
	})

	t.Run("WaitingClaimersWakeForKeyedJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{MaxInFlight: 1})
		require.NoError(t, err)
		waitClaim := func() chan []*queue.Job {
			ch := make(chan []*queue.Job, 1)
			go func() {
				jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 5, Wait: 20 * time.Second})
				if err != nil {
					jobs = nil
				}
				ch <- jobs
			}()
			return ch
		}
		b.claimNone(t) // the queue exists, nothing is pending
		ch := waitClaim()
		waiting := func() bool { return plumbing.Of(b.client).Waiters() == 1 }
		require.Eventually(t, waiting, 10*time.Second, time.Millisecond)
		first := keyed(t, b, "k", 2)[0]
		select {
		case got := <-ch:
			require.Len(t, got, 1, "woken by the key's job, and only one: the key's limit")
			require.Equal(t, first.ID, got[0].ID)
			// At the key's limit: a waiting claim wakes when the lease ends.
			ch = waitClaim()
			require.Eventually(t, waiting, 10*time.Second, time.Millisecond)
			complete(t, b, got[0])
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting claim was not woken by a keyed job")
		}
		select {
		case got := <-ch:
			require.Len(t, got, 1, "woken when the key's slot freed")
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting claim was not woken when its key's slot freed")
		}
	})

	t.Run("UnkeyedJobsTakeTheirTurnByAge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		plain := b.enqueue(t, queue.NewJob{})
		keyed(t, b, "k", 3)
		late := b.enqueue(t, queue.NewJob{})
		got := claim(t, b, 1)
		require.Equal(t, plain.ID, got[0].ID, "the oldest job first")
		got = claim(t, b, 10)
		require.Len(t, got, 4)
		require.Contains(t, []string{got[0].ID, got[3].ID}, late.ID)
	})

	t.Run("MaxInFlightPerKeyAndOverrides", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{MaxInFlight: 2})
		require.NoError(t, err)
		o, err := b.client.SetFlowOverride(b.ctx, b.queue, queue.FlowOverride{Key: "paying", MaxInFlight: 3})
		require.NoError(t, err)
		require.Equal(t, 1, o.Weight, "the weight defaults to 1")
		keyed(t, b, "a", 5)
		keyed(t, b, "b", 5)
		keyed(t, b, "paying", 5)
		got := claim(t, b, 100)
		require.Equal(t, map[string]int{"a": 2, "b": 2, "paying": 3}, count(got))
		require.Empty(t, claim(t, b, 100), "every key at its limit")
		require.Equal(t, queue.FlowKeyStats{Key: "a", Pending: 3, InFlight: 2}, stats(t, b, "a"))

		// A job's end frees its key's slot, and only its key's.
		for _, j := range got {
			if j.FlowKey == "a" {
				complete(t, b, j)
				break
			}
		}
		more := claim(t, b, 100)
		require.Equal(t, []string{"a"}, keysOf(more))

		// A lapsed lease (a crashed worker) holds the slot until it is
		// reclaimed, then frees it.
		b.clock.Advance(queue.DefaultVisibility + time.Second)
		_, err = b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		back := claim(t, b, 100)
		require.Equal(t, map[string]int{"a": 2, "b": 2, "paying": 3}, count(back), "reclaimed jobs and their keys' next")
		for _, j := range back {
			require.LessOrEqual(t, stats(t, b, j.FlowKey).InFlight, int64(3))
		}
	})

	t.Run("RatePerKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// 0.1/s: the real time the test takes cannot add a token.
		_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{Rate: 0.1, Burst: 2})
		require.NoError(t, err)
		keyed(t, b, "a", 6)
		keyed(t, b, "b", 6)
		require.Equal(t, map[string]int{"a": 2, "b": 2}, count(claim(t, b, 100)), "each key's burst")
		require.Empty(t, claim(t, b, 100))
		b.clock.Advance(10 * time.Second)
		require.Equal(t, map[string]int{"a": 1, "b": 1}, count(claim(t, b, 100)), "a token each")
		// A claim with a wait sleeps until the next token.
		done := make(chan int, 1)
		go func() {
			jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 100, Wait: 20 * time.Second})
			if err != nil {
				done <- -1
				return
			}
			done <- len(jobs)
		}()
		require.Eventually(t, func() bool {
			b.clock.Advance(time.Second)
			select {
			case n := <-done:
				require.Positive(t, n)
				return true
			default:
				return false
			}
		}, 10*time.Second, 5*time.Millisecond)
	})

	t.Run("RatePerKeyHoldsOverFiveSeconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{Rate: 10, Burst: 2})
		require.NoError(t, err)
		_, err = b.client.SetFlowOverride(b.ctx, b.queue, queue.FlowOverride{Key: "fast", Rate: 20, Burst: 2})
		require.NoError(t, err)
		jobs := make([]queue.NewJob, 0, 400)
		for range 200 {
			jobs = append(jobs, queue.NewJob{Queue: b.queue, Kind: "k", FlowKey: "slow"}, queue.NewJob{Queue: b.queue, Kind: "k", FlowKey: "fast"})
		}
		_, err = b.client.EnqueueBatch(b.ctx, jobs)
		require.NoError(t, err)
		// 5 s of the fake clock in steps of 20 ms, claiming all a step
		// allows: the burst, then 10/s and 20/s, each within 10%. (With a burst of 1, a
		// claimer that polls later than each token loses the time between:
		// the bucket holds no more than one.)
		got := map[string]int{}
		start := time.Now()
		for range 250 {
			for k, n := range count(claim(t, b, 100)) {
				got[k] += n
			}
			b.clock.Advance(20 * time.Millisecond)
		}
		// Redis's clock ran the fake clock's 5 s and the real time the
		// loop took (see queue.Config.FollowClock).
		span := 5 + time.Since(start).Seconds()
		slow, fast := 2+10*span, 2+20*span
		require.InDelta(t, slow, got["slow"], slow/10, "10 a second over 5 s")
		require.InDelta(t, fast, got["fast"], fast/10, "the override's 20 a second")
	})

	t.Run("CancelNewestAtTheLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{MaxInFlight: 1, Strategy: queue.FlowCancelNewest})
		require.NoError(t, err)
		first := keyed(t, b, "k", 1)[0]
		e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", FlowKey: "k"})
		require.NoError(t, err)
		require.Equal(t, queue.StatusCanceled, e.Job.Status, "the newest is canceled")
		require.Equal(t, queue.StatusCanceled, b.get(t, e.Job.ID).Status)
		require.Contains(t, e.Job.LastError, "cancel_newest", "its error says why")
		other := keyed(t, b, "other", 1)[0]
		got := claim(t, b, 10)
		require.ElementsMatch(t, []string{first.ID, other.ID}, []string{got[0].ID, got[1].ID})
	})

	t.Run("CancelInProgressAtTheLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{MaxInFlight: 1, Strategy: queue.FlowCancelInProgress})
		require.NoError(t, err)
		keyed(t, b, "k", 1)
		running := claim(t, b, 1)[0]
		next := keyed(t, b, "k", 1)[0]
		require.True(t, b.get(t, running.ID).CancelRequested, "the running one is asked to cancel")
		lease, err := b.client.Heartbeat(b.ctx, b.queue, running.ID, running.Token, queue.HeartbeatOptions{})
		require.NoError(t, err)
		require.True(t, lease.CancelRequested, "its worker sees it at its heartbeat")
		require.Empty(t, claim(t, b, 10), "the new one waits for the slot")
		_, err = b.client.Fail(b.ctx, b.queue, running.ID, running.Token, queue.FailOptions{Error: "canceled"})
		require.NoError(t, err)
		require.Equal(t, queue.StatusCanceled, b.get(t, running.ID).Status)
		got := claim(t, b, 10)
		require.Len(t, got, 1)
		require.Equal(t, next.ID, got[0].ID)
	})

	t.Run("DebounceFoldsIntoTheWaitingJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		deb := &queue.Debounce{Period: 5 * time.Second, MaxWait: 8 * time.Second}
		enq := func(n int) queue.Enqueued {
			e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "sync", FlowKey: "user1",
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), Debounce: deb})
			require.NoError(t, err)
			return e
		}
		t0 := b.clock.Now()
		first := enq(1)
		require.False(t, first.Debounced)
		require.Equal(t, queue.StatusScheduled, first.Job.Status)
		b.clock.Advance(2 * time.Second)
		second := enq(2)
		require.True(t, second.Debounced)
		require.Equal(t, first.Job.ID, second.Job.ID, "the same job answers")
		require.JSONEq(t, `{"n":2}`, string(second.Job.Payload))
		requireSoonAfter(t, t0.Add(7*time.Second).Truncate(time.Millisecond), second.Job.RunAt, "moved to a period after the last")
		b.clock.Advance(4 * time.Second)
		third := enq(3)
		require.Equal(t, first.Job.ID, third.Job.ID)
		requireSoonAfter(t, t0.Add(8*time.Second).Truncate(time.Millisecond), third.Job.RunAt, "never past max wait after the first")
		b.clock.Advance(3 * time.Second)
		got := claim(t, b, 10)
		require.Len(t, got, 1, "it runs once")
		require.JSONEq(t, `{"n":3}`, string(got[0].Payload))
		fourth := enq(4)
		require.False(t, fourth.Debounced, "a job that left waiting takes no more")
		require.NotEqual(t, first.Job.ID, fourth.Job.ID)
	})

	t.Run("PendingJobsOfKeysAreListedCanceledAndForgotten", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		jobs := keyed(t, b, "k", 3)
		plain := b.enqueue(t, queue.NewJob{})
		listed, _, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusPending, Limit: 10})
		require.NoError(t, err)
		require.Len(t, listed, 4)
		page, cursor, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusPending, Limit: 2})
		require.NoError(t, err)
		page2, _, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusPending, Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		ids := map[string]bool{}
		for _, j := range append(page, page2...) {
			ids[j.ID] = true
		}
		require.Len(t, ids, 4, "paged through the lists and the keys")

		_, err = b.client.Cancel(b.ctx, b.queue, jobs[0].ID)
		require.NoError(t, err)
		require.Equal(t, int64(2), stats(t, b, "k").Pending)
		got := claim(t, b, 10)
		require.Len(t, got, 3)
		require.NotContains(t, []string{got[0].ID, got[1].ID, got[2].ID}, jobs[0].ID)
		keys, total, err := b.client.FlowKeys(b.ctx, b.queue, 0, 10)
		require.NoError(t, err)
		require.Equal(t, int64(1), total)
		require.Equal(t, []queue.FlowKeyStats{{Key: "k", InFlight: 2}}, keys)
		for _, j := range got {
			if j.ID != plain.ID {
				complete(t, b, j)
			}
		}
		keys, total, err = b.client.FlowKeys(b.ctx, b.queue, 0, 10)
		require.NoError(t, err)
		require.Zero(t, total, "a key with no jobs is forgotten")
		require.Empty(t, keys)
	})

	t.Run("BadFlowInputIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, nj := range []queue.NewJob{
			{Kind: "k", FlowKey: "has space"},
			{Kind: "k", FlowKey: "k", Labels: []string{"gpu"}},
			{Kind: "k", Debounce: &queue.Debounce{Period: time.Second}},
			{Kind: "k", FlowKey: "k", Delay: time.Second, Debounce: &queue.Debounce{Period: time.Second}},
			{Kind: "k", FlowKey: "k", Debounce: &queue.Debounce{Period: time.Second, MaxWait: time.Millisecond}},
		} {
			nj.Queue = b.queue
			_, err := b.client.Enqueue(b.ctx, nj)
			var fe *queue.FieldError
			require.ErrorAs(t, err, &fe, "%+v", nj)
			require.ErrorIs(t, err, queue.ErrInvalid)
		}
		_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{Strategy: "drop"})
		require.ErrorIs(t, err, queue.ErrInvalid)
		_, err = b.client.SetFlowOverride(b.ctx, b.queue, queue.FlowOverride{Key: "k", Weight: 1000})
		require.ErrorIs(t, err, queue.ErrInvalid)
	})
}
