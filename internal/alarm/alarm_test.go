package alarm_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/alarm"
)

func ringTo(ch chan<- time.Time, clock clockwork.Clock) func() {
	return func() { ch <- clock.Now() }
}

func TestAlarmRingsAtItsTimeOnAFakeClock(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	rang := make(chan time.Time, 1)
	at := clock.Now().Add(time.Second)
	a := alarm.New(clock, at, ringTo(rang, clock))
	require.Equal(t, at, a.At())
	clock.Advance(time.Second - time.Microsecond)
	require.True(t, a.Pending(), "not before its time")
	clock.Advance(time.Microsecond)
	select {
	case when := <-rang:
		require.Equal(t, at, when)
	case <-time.After(10 * time.Second):
		t.Fatal("the alarm did not ring")
	}
	require.False(t, a.Pending())
	require.True(t, a.Rang())
}

func TestStoppedAlarmNeverRings(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	stopped, other := make(chan time.Time, 1), make(chan time.Time, 1)
	at := clock.Now().Add(time.Second)
	a := alarm.New(clock, at, ringTo(stopped, clock))
	alarm.New(clock, at, ringTo(other, clock))
	a.Stop()
	require.False(t, a.Pending())
	require.False(t, a.Rang())
	clock.Advance(time.Second)
	<-other // the alarm set for the same time has rung
	select {
	case <-stopped:
		t.Fatal("a stopped alarm rang")
	case <-time.After(20 * time.Millisecond):
	}
}

func TestOnlyRealIsTheRealClock(t *testing.T) {
	t.Parallel()
	require.True(t, alarm.IsReal(alarm.Real()))
	require.False(t, alarm.IsReal(clockwork.NewRealClock()), "a clock passed in is used as it is")
	require.False(t, alarm.IsReal(clockwork.NewFakeClock()))
	require.WithinDuration(t, time.Now(), alarm.Real().Now(), time.Second)
}

func TestAlarmOnTheRealClockNeverRingsEarly(t *testing.T) {
	t.Parallel()
	clock := alarm.Real()
	for _, d := range []time.Duration{-time.Millisecond, 0, 300 * time.Microsecond, 2500 * time.Microsecond, 10 * time.Millisecond} {
		rang := make(chan time.Time, 1)
		at := time.Now().Add(d)
		alarm.New(clock, at, func() { rang <- time.Now() })
		select {
		case when := <-rang:
			require.False(t, when.Before(at), "an alarm for now + %s rang %s early", d, at.Sub(when))
		case <-time.After(10 * time.Second):
			t.Fatalf("an alarm for now + %s did not ring", d)
		}
	}
}
