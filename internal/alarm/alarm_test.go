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

func TestRealHasRealTimers(t *testing.T) {
	t.Parallel()
	rt, ok := alarm.Real().(alarm.RealTimers)
	require.True(t, ok && rt.RealTimers())
	require.WithinDuration(t, time.Now(), alarm.Real().Now(), time.Second)
	_, ok = clockwork.Clock(clockwork.NewFakeClock()).(alarm.RealTimers)
	require.False(t, ok, "a fake clock's alarms are its AfterFuncs")
}

// offClock reads the real time an hour ahead, its timers the real
// clock's: a host whose clock is off.
type offClock struct{ clockwork.Clock }

func (offClock) RealTimers() bool                  { return true }
func (c offClock) Now() time.Time                  { return c.Clock.Now().Add(time.Hour) }
func (c offClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

func TestAlarmOnTheRealClockNeverRingsEarly(t *testing.T) {
	t.Parallel()
	for _, clock := range []clockwork.Clock{alarm.Real(), offClock{clockwork.NewRealClock()}, clockwork.NewRealClock()} {
		for _, d := range []time.Duration{-time.Millisecond, 0, 300 * time.Microsecond, 2500 * time.Microsecond, 10 * time.Millisecond} {
			rang := make(chan time.Time, 1)
			at := clock.Now().Add(d)
			alarm.New(clock, at, func() { rang <- clock.Now() })
			select {
			case when := <-rang:
				require.False(t, when.Before(at), "%T: an alarm for now + %s rang %s early", clock, d, at.Sub(when))
			case <-time.After(10 * time.Second):
				t.Fatalf("%T: an alarm for now + %s did not ring", clock, d)
			}
		}
	}
}

// movingClock is a fake clock that a test advances by d right after the
// alarm reads the time to its due instant, before the alarm's timer is
// set: the interleaving a test that advances its clock while a worker
// sets an alarm can fall into.
type movingClock struct {
	*clockwork.FakeClock
	d time.Duration
}

func (c movingClock) Until(t time.Time) time.Duration {
	left := c.FakeClock.Until(t)
	c.Advance(c.d)
	return left
}

func TestAlarmRingsWhenItsClockPassesItsTimeWhileItIsSet(t *testing.T) {
	t.Parallel()
	fake := clockwork.NewFakeClock()
	clock := movingClock{FakeClock: fake, d: time.Second}
	rang := make(chan time.Time, 1)
	at := fake.Now().Add(time.Second)
	a := alarm.New(clock, at, ringTo(rang, fake))
	select {
	case when := <-rang:
		require.Equal(t, at, when)
	case <-time.After(10 * time.Second):
		t.Fatal("the alarm did not ring: its clock passed its time while it was set")
	}
	require.True(t, a.Rang())
	fake.Advance(time.Hour) // its timer, set for 1 s after at, fires too
	select {
	case <-rang:
		t.Fatal("the alarm rang twice")
	case <-time.After(20 * time.Millisecond):
	}
}
