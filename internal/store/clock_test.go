package store_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/store"
)

var clockBase = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// TestClockEstimate: a reply carrying Redis's time sets the estimate to
// Redis's time less the middle of the round trip, within half of it; what
// Offset (the gauge) reads and where LocalOf, RedisOf and Now put an
// instant all follow from it.
func TestClockEstimate(t *testing.T) {
	t.Parallel()
	local := clockwork.NewFakeClockAt(clockBase)
	c := store.NewClock(local, false)
	require.Equal(t, store.Estimate{}, c.Estimate(), "nothing measured yet")
	require.Zero(t, c.Offset())
	require.Zero(t, c.OffsetUs(store.Running), "production scripts read TIME as it is")
	require.Zero(t, c.OffsetUs(store.Exact))

	t0, t1 := clockBase, clockBase.Add(20*time.Millisecond) // mid: +10 ms
	redis := clockBase.Add(10*time.Millisecond + 3*time.Second)
	c.Observe(redis.UnixMicro(), t0, t1)
	est := c.Estimate()
	require.Equal(t, 3*time.Second, est.Offset)
	require.Equal(t, 10*time.Millisecond, est.Bound)
	require.True(t, est.At.Equal(t1))
	require.Equal(t, est.Offset, c.Offset())
	require.True(t, c.Now().Equal(clockBase.Add(3*time.Second)))
	at := clockBase.Add(time.Hour)
	require.True(t, c.RedisOf(at).Equal(at.Add(3*time.Second)))
	require.True(t, c.LocalOf(at).Equal(at.Add(-3*time.Second)))
	require.True(t, c.LocalOf(time.Time{}).IsZero())
	require.True(t, c.At(redis.UnixMicro()).Equal(redis), "Redis's time as it answered")

	// A slower round trip while the estimate is fresh is passed over.
	c.Observe(clockBase.Add(time.Minute).UnixMicro(), t1, t1.Add(100*time.Millisecond))
	require.Equal(t, est, c.Estimate())
	// A round trip as quick is taken, and so is any once it is stale.
	c.Observe(t1.Add(5*time.Millisecond-time.Second).UnixMicro(), t1, t1.Add(10*time.Millisecond))
	require.Equal(t, -time.Second, c.Offset())
	late := t1.Add(time.Minute)
	c.Observe(late.Add(50*time.Millisecond+2*time.Second).UnixMicro(), late, late.Add(100*time.Millisecond))
	require.Equal(t, 2*time.Second, c.Offset())
	require.Equal(t, 50*time.Millisecond, c.Estimate().Bound)
	c.Observe(0, late, late) // a reply without Redis's time
	require.Equal(t, 2*time.Second, c.Offset())
}

// TestClockFollow: when Redis's clock follows a test's clock the estimate
// is 0, the scripts' offset moves with the fake clock (Exact: to its
// instant; Running: from the real time of its first use, the same for
// every Clock on that fake clock), and Redis's time as answered is never
// later than the fake clock's.
func TestClockFollow(t *testing.T) {
	t.Parallel()
	local := clockwork.NewFakeClockAt(clockBase)
	c := store.NewClock(local, true)
	other := store.NewClock(local, true)
	require.True(t, c.Follows())

	c.Observe(time.Now().UnixMicro(), clockBase, clockBase)
	require.Equal(t, store.Estimate{At: clockBase}, c.Estimate(), "the two clocks are one")
	require.Zero(t, c.Offset())

	exact := time.Now().UnixMicro() + c.OffsetUs(store.Exact)
	require.InDelta(t, clockBase.UnixMicro(), exact, float64(time.Second.Microseconds()))

	run := c.OffsetUs(store.Running)
	require.InDelta(t, run, other.OffsetUs(store.Running), float64(time.Second.Microseconds()), "one anchor per fake clock")
	local.Advance(time.Hour)
	require.InDelta(t, run+time.Hour.Microseconds(), c.OffsetUs(store.Running), float64(time.Second.Microseconds()))
	require.InDelta(t, clockBase.Add(time.Hour).UnixMicro(), time.Now().UnixMicro()+c.OffsetUs(store.Exact), float64(time.Second.Microseconds()))

	now := local.Now()
	require.True(t, c.At(now.Add(time.Millisecond).UnixMicro()).Equal(now), "capped at the fake clock's now")
	require.True(t, c.At(now.Add(-time.Millisecond).UnixMicro()).Equal(now.Add(-time.Millisecond)))
}
