package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The claim loop's knowledge of the next due time, driven by hand on a
// worker that was never started.

func idleWorker(t *testing.T) (*Worker, *queueState, *clockwork.FakeClock, context.Context) {
	t.Helper()
	return idleWorkerOf(t, HandlerFunc(func(context.Context, *queue.Job) (json.RawMessage, error) { return nil, nil }))
}

// idleWorkerOf is idleWorker running h, whose heartbeats do not come
// within a test's run.
func idleWorkerOf(t *testing.T, h Handler) (*Worker, *queueState, *clockwork.FakeClock, context.Context) {
	t.Helper()
	clock := testutil.FakeClock()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	w, err := New(Config{Client: c, Queues: []QueueConfig{{Name: "q1"}}, HeartbeatInterval: time.Hour, Handler: h})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return w, w.queues[0], clock, ctx
}

func TestRetryAskedWhileIdleSetsTheAlarm(t *testing.T) {
	t.Parallel()
	w, q, clock, ctx := idleWorker(t)
	q.next = clock.Now().Add(time.Hour)
	woke := make(chan bool, 1)
	go func() { woke <- w.idle() }()
	require.NoError(t, clock.BlockUntilContext(ctx, 1)) // idle, its alarm set for the hour
	// A retry sooner than that, asked while the loop waits, moves the
	// alarm (before or after the clock moves: an alarm for a past time
	// rings at once).
	w.retryAsked(q, clock.Now().Add(time.Second))
	clock.Advance(time.Second)
	select {
	case ok := <-woke:
		require.True(t, ok)
	case <-ctx.Done():
		t.Fatal("the alarm did not wake the loop")
	}
	require.True(t, w.alarm.Rang())
}

func TestRetryAskedDuringAClaimOutlivesItsAnswer(t *testing.T) {
	t.Parallel()
	w, q, clock, _ := idleWorker(t)
	now := clock.Now()
	retry := now.Add(time.Minute + 2*time.Microsecond)

	w.claimStarting(q)
	w.retryAsked(q, retry)
	w.claimAnswered(q, now.Add(time.Hour)) // read before the retry was written
	require.Equal(t, retry, q.next)

	w.claimStarting(q)
	w.claimAnswered(q, now.Add(time.Hour)) // read after: the retried job is gone
	require.Equal(t, now.Add(time.Hour), q.next)

	w.claimStarting(q)
	w.retryAsked(q, now.Add(2*time.Hour))
	w.claimAnswered(q, now.Add(time.Hour))
	require.Equal(t, now.Add(time.Hour), q.next, "the earlier of the two")
}

func TestAClaimHandedNoTimeKeepsTheOneHeld(t *testing.T) {
	t.Parallel()
	w, q, clock, _ := idleWorker(t)
	held := clock.Now().Add(time.Second)
	w.claimStarting(q)
	w.claimAnswered(q, held)
	// Another claim of this worker before then is handed nothing: the
	// time went to this worker already.
	w.claimStarting(q)
	w.claimAnswered(q, time.Time{})
	require.Equal(t, held, q.next)
	// Once it has passed, nothing handed means nothing held.
	clock.Advance(time.Second)
	w.claimStarting(q)
	w.claimAnswered(q, time.Time{})
	require.True(t, q.next.IsZero())
}

func TestNoSecondAlarmForATimeThatRang(t *testing.T) {
	t.Parallel()
	w, _, clock, ctx := idleWorker(t)
	rang := make(chan struct{})
	go func() {
		<-w.wake
		close(rang)
	}()
	due := clock.Now().Add(time.Second)
	w.setAlarm(due)
	clock.Advance(time.Second)
	select {
	case <-rang:
	case <-ctx.Done():
		t.Fatal("the alarm did not ring")
	}
	first := w.alarm
	require.True(t, first.Rang())
	// A claim after the ring still answers that time (only a clock that
	// does not keep time can do that): no new alarm for it, no loop of
	// claims.
	w.setAlarm(due)
	require.Same(t, first, w.alarm)
	// A new time gets a new alarm.
	w.setAlarm(due.Add(time.Millisecond))
	require.NotSame(t, first, w.alarm)
	require.True(t, w.alarm.Pending())
	w.alarm.Stop()
}

func TestTheLoopWakesBeforeADueTimeAndThenAtIt(t *testing.T) {
	t.Parallel()
	w, _, clock, ctx := idleWorker(t)
	rang := make(chan struct{}, 2)
	go func() {
		for range 2 {
			<-w.wake
			rang <- struct{}{}
		}
	}()
	ring := func(at time.Time) {
		t.Helper()
		w.setAlarm(at)
		clock.Advance(at.Sub(clock.Now()))
		select {
		case <-rang:
		case <-ctx.Done():
			t.Fatal("the alarm did not ring")
		}
	}
	due := clock.Now().Add(time.Second)
	early := due.Add(-maxLead) // DefaultLookahead/2 is more
	require.Equal(t, early, w.wakeAt(due), "early enough for the claim that holds the job")
	ring(w.wakeAt(due))
	// That claim took nothing ahead (a queue with limits, say): the loop
	// wakes again when the job is due, and claims it then.
	require.Equal(t, due, w.wakeAt(due))
	ring(w.wakeAt(due))
	// And once that has rung too, no loop of claims.
	first := w.alarm
	w.setAlarm(w.wakeAt(due))
	require.Same(t, first, w.alarm)
	w.alarm.Stop()
	w.cfg.Lookahead = -1
	require.Equal(t, due, w.wakeAt(due), "no lookahead: at the due time")
}
