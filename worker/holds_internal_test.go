package worker

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// The runs held ahead share one alarm, set for the earliest: each is let
// go at its time, never before; one given up leaves the queue, and the
// alarm moves to the next.
func TestHoldsLetEachRunGoAtItsTimeOnOneAlarm(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clock := clockwork.NewFakeClock()
	h := &holds{clock: clock}
	t0 := clock.Now()

	went := make(chan int, 10)
	waiting := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return len(h.q) == n
		}, 10*time.Second, time.Millisecond)
	}
	hold := func(ctx context.Context, i int, after time.Duration) {
		go func() {
			if h.wait(ctx, t0.Add(after)) {
				went <- i
			} else {
				went <- -i
			}
		}()
	}
	hold(ctx, 3, 30*time.Millisecond)
	hold(ctx, 1, 10*time.Millisecond)
	hold(ctx, 2, 20*time.Millisecond)
	giveUp, give := context.WithCancel(ctx)
	hold(giveUp, 4, 15*time.Millisecond)
	waiting(4)
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	h.mu.Lock()
	require.Equal(t, t0.Add(10*time.Millisecond), h.alarm.At(), "one alarm, for the earliest")
	h.mu.Unlock()

	clock.Advance(10*time.Millisecond - time.Microsecond)
	require.Never(t, func() bool { return len(went) > 0 }, 20*time.Millisecond, time.Millisecond, "none before its time")
	clock.Advance(time.Microsecond)
	require.Equal(t, 1, <-went)

	give() // the hold at 15 ms is given up: it answers false at once
	require.Equal(t, -4, <-went)
	waiting(2)
	h.mu.Lock()
	require.Equal(t, t0.Add(20*time.Millisecond), h.alarm.At(), "the alarm moved past the one given up")
	h.mu.Unlock()

	// The clock passes both remaining times at once: one ring lets both go.
	clock.Advance(25 * time.Millisecond)
	require.ElementsMatch(t, []int{2, 3}, []int{<-went, <-went})
	waiting(0)
	h.mu.Lock()
	require.Nil(t, h.alarm, "no alarm once none waits")
	h.mu.Unlock()

	// A time already come does not wait, nor set an alarm.
	require.True(t, h.wait(ctx, clock.Now()))
	h.mu.Lock()
	require.Nil(t, h.alarm)
	h.mu.Unlock()
}
