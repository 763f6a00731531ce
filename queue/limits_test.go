package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

func limitedClient(t *testing.T, clock clockwork.Clock) *queue.Client {
	t.Helper()
	cfg := queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), DisableEvents: true}
	if clock != nil {
		cfg.Clock, cfg.FollowClock = clock, true
	}
	c, err := queue.NewClient(cfg)
	require.NoError(t, err)
	return c
}

func enqueueN(t *testing.T, c *queue.Client, q string, n int) {
	t.Helper()
	for range n {
		_, err := c.Enqueue(t.Context(), queue.NewJob{Queue: q, Kind: "k"})
		require.NoError(t, err)
	}
}

// The token bucket on a fake clock (Redis's time is the fake clock's, plus
// the little real time the test takes): a full bucket grants its burst,
// an empty one nothing until a refill, then what the refill holds, never
// more than the burst. The rate is 0.1/s so that the real time the test
// takes cannot add a token (it would need 10 s).
func TestLimitsTokenBucketGrantsPerRefill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := clockwork.NewFakeClock()
	c := limitedClient(t, clock)
	_, err := c.SetLimits(ctx, "q", queue.Limits{Rate: 0.1, Burst: 5})
	require.NoError(t, err)
	got, err := c.Limits(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, queue.Limits{Rate: 0.1, Burst: 5}, got)
	enqueueN(t, c, "q", 30)

	claim := func() int {
		jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: 100})
		require.NoError(t, err)
		return len(jobs)
	}
	require.Equal(t, 5, claim(), "a full bucket grants its burst")
	require.Equal(t, 0, claim(), "then nothing")
	clock.Advance(10 * time.Second) // one token
	require.Equal(t, 1, claim())
	require.Equal(t, 0, claim())
	clock.Advance(25 * time.Second) // two and a half
	require.Equal(t, 2, claim())
	clock.Advance(5 * time.Second) // the half left and a half: one
	require.Equal(t, 1, claim())
	clock.Advance(time.Hour) // far more than the burst
	require.Equal(t, 5, claim(), "never more than the burst")

	// WaitPending does not count jobs the bucket holds back.
	ok, err := plumbing.Of(c).WaitPending(ctx, "q", time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "pending jobs held back by the limits are not claimable")

	// A claim with a wait sleeps until the next token (on the client's
	// clock), then takes it.
	done := make(chan int, 1)
	go func() {
		jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: 100, Wait: 5 * time.Second})
		if err != nil {
			jobs = nil
		}
		done <- len(jobs)
	}()
	require.NoError(t, clock.BlockUntilContext(ctx, 1)) // the claim sleeps
	// A little past the token: the sleep is to the token's time on Redis's
	// clock, which runs a few real ms ahead of the fake one here.
	clock.Advance(11 * time.Second)
	select {
	case n := <-done:
		require.Equal(t, 1, n)
	case <-time.After(4 * time.Second): // before the claim's own 5 s
		t.Fatal("the limited claim did not wake at the next token")
	}
	require.Positive(t, plumbing.Of(c).LimitWait())

	// Removing the limits lets the rest through.
	_, err = c.SetLimits(ctx, "q", queue.Limits{})
	require.NoError(t, err)
	require.Equal(t, 30-5-1-2-1-5-1, claim())
}

// MaxInFlight caps the jobs processing at once, whoever claimed them; an
// ack makes room.
func TestLimitsMaxInFlight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := limitedClient(t, nil)
	_, err := c.SetLimits(ctx, "q", queue.Limits{MaxInFlight: 2})
	require.NoError(t, err)
	enqueueN(t, c, "q", 5)
	jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	more, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, more)
	ok, err := plumbing.Of(c).WaitPending(ctx, "q", 30*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "at MaxInFlight no pending job is claimable")

	// A claim that waits takes the room an ack makes: it waits on the wake
	// stream, which the ack writes (no polling).
	rdb, wake := plumbing.Of(c).Redis(), queue.QueueKey(plumbing.Of(c).Namespace(), "q", queue.KeyWake)
	lastWake := func() string {
		e, err := rdb.XRevRangeN(ctx, wake, "+", "-", 1).Result()
		require.NoError(t, err)
		require.Len(t, e, 1)
		return e[0].ID
	}
	before := lastWake()
	done := make(chan []*queue.Job, 1)
	go func() {
		js, _ := c.Claim(context.WithoutCancel(ctx), "q", queue.ClaimOptions{Max: 10, Wait: 10 * time.Second})
		done <- js
	}()
	require.Eventually(t, func() bool { // the claim is waiting: its 10 s mark, not the earlier 30 ms one
		v, err := rdb.HGet(ctx, queue.QueueKey(plumbing.Of(c).Namespace(), "q", queue.KeyMeta), "waiting_until").Int64()
		return err == nil && v > time.Now().Add(5*time.Second).UnixMilli()
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Complete(ctx, "q", jobs[0].ID, jobs[0].Token, queue.CompleteOptions{}))
	require.NotEqual(t, before, lastWake(), "the ack that ended a lease wrote to the wake stream")
	select {
	case js := <-done:
		require.Len(t, js, 1)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim did not take the room an ack made")
	}
	ok, err = plumbing.Of(c).WaitPending(ctx, "q", time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)

	// A worker's idle wait at MaxInFlight ends when a lease does.
	meta := queue.QueueKey(plumbing.Of(c).Namespace(), "q", queue.KeyMeta)
	marked, err := rdb.HGet(ctx, meta, "waiting_until").Int64()
	require.NoError(t, err)
	waited := make(chan bool, 1)
	go func() {
		ok, _ := plumbing.Of(c).WaitPending(context.WithoutCancel(ctx), "q", 10*time.Second)
		waited <- ok
	}()
	require.Eventually(t, func() bool { // the wait has marked that it waits
		v, err := rdb.HGet(ctx, meta, "waiting_until").Int64()
		return err == nil && v > marked
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Complete(ctx, "q", jobs[1].ID, jobs[1].Token, queue.CompleteOptions{}))
	select {
	case ok := <-waited:
		require.True(t, ok, "a pending job is claimable again: the ack made room")
	case <-time.After(10 * time.Second):
		t.Fatal("the idle wait did not end when a lease did")
	}
}

// SetLimits refuses limits out of range, naming the field, and answers
// the limits it keeps with their defaults filled in.
func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := limitedClient(t, nil)
	for _, l := range []queue.Limits{{Rate: -1}, {Rate: 2e6}, {Burst: 3}, {Rate: 1, Burst: -1}, {MaxInFlight: -1}} {
		_, err := c.SetLimits(ctx, "q", l)
		require.ErrorIs(t, err, queue.ErrInvalid, "%+v", l)
		var fe *queue.FieldError
		require.ErrorAs(t, err, &fe)
	}
	l, err := c.SetLimits(ctx, "q", queue.Limits{Rate: 200})
	require.NoError(t, err)
	require.Equal(t, 20, l.Burst, "a tenth of a second's worth")
	l, err = c.SetLimits(ctx, "q", queue.Limits{Rate: 0.5})
	require.NoError(t, err)
	require.Equal(t, 1, l.Burst)
	got, err := c.Limits(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, l, got, "kept as answered")
}
