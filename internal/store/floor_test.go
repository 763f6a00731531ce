package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A job claimed ahead starts where the bound of Redis's clock reaches its
// due time: never before any one reading says Redis may get there (a
// reading R answered at T: Redis reads R at T at the earliest), and as
// soon as the best of the recent readings allows.
func TestFloorBoundsRedisClockFromBelow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000, 0)
	us := func(d time.Duration) int64 { return t0.Add(d).UnixMicro() }
	var f Floor

	// Redis 5 ms ahead of the client, read on a slow answer (4 ms after
	// Redis's reading): the bound is 1 ms short of the truth, and a job
	// due 10 ms later by Redis starts no earlier than that reading allows.
	f.Observe(us(5*time.Millisecond), t0.Add(4*time.Millisecond))
	start := f.Reaches(us(15 * time.Millisecond))
	require.False(t, start.Before(t0.Add(14*time.Millisecond)), "from the reading alone: %s", start.Sub(t0))
	require.WithinDuration(t, t0.Add(14*time.Millisecond), start, 20*time.Microsecond, "waits the drift allowance, no more")

	// A quicker answer (the reading 100 µs before it arrived) bounds
	// higher: it is kept, and jobs start sooner.
	f.Observe(us(10*time.Millisecond+4900*time.Microsecond), t0.Add(10*time.Millisecond))
	start = f.Reaches(us(15 * time.Millisecond))
	require.WithinDuration(t, t0.Add(10*time.Millisecond+100*time.Microsecond), start, 20*time.Microsecond)
	// A slower one after it bounds lower: the quicker one stays.
	f.Observe(us(11*time.Millisecond), t0.Add(12*time.Millisecond))
	require.Equal(t, start, f.Reaches(us(15*time.Millisecond)))

	// The reading a claim brings bounds every job of it: a job starts no
	// later than the claim's own now plus its wait (and the drift
	// allowance) says, and sooner when a better reading says so.
	for _, wait := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		at := t0.Add(20 * time.Millisecond)
		now := us(24 * time.Millisecond) // a worse reading than the one kept (4 ms ahead, not 4.9)
		f.Observe(now, at)
		start := f.Reaches(now + wait.Microseconds())
		require.False(t, start.After(at.Add(wait+wait/500+time.Microsecond)), "wait %s: %s", wait, start.Sub(at))
		require.WithinDuration(t, at.Add(wait-900*time.Microsecond), start, 20*time.Microsecond+wait/500)
	}

	// A reading older than floorFresh gives way to any newer one, lower
	// too: a queue whose Redis changed is bound by its new clock.
	later := t0.Add(floorFresh + time.Second)
	f.Observe(later.Add(-3*time.Millisecond).UnixMicro(), later) // Redis now 3 ms behind the client
	require.WithinDuration(t, later.Add(3*time.Millisecond), f.Reaches(later.UnixMicro()), 20*time.Microsecond)
}
