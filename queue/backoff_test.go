package queue_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

func TestBackoffGrowsExponentiallyWithinJitterBounds(t *testing.T) {
	t.Parallel()
	b := queue.Backoff{Initial: time.Second, Factor: 2, Max: time.Hour, Jitter: 0.2}
	rng := rand.New(rand.NewPCG(1, 2))
	for attempt := 1; attempt <= 20; attempt++ {
		base := min(time.Second<<(attempt-1), time.Hour)
		lo, hi := b.Bounds(attempt)
		require.Equal(t, time.Duration(float64(base)*0.8).Truncate(time.Millisecond), lo, "attempt %d", attempt)
		require.Equal(t, min(time.Duration(float64(base)*1.2), time.Hour).Truncate(time.Millisecond), hi.Round(time.Millisecond), "attempt %d", attempt)
		for range 200 {
			d := b.Delay(attempt, rng.Float64())
			require.GreaterOrEqual(t, d, lo)
			require.LessOrEqual(t, d, hi)
		}
	}
	// Without jitter the delays are exact powers.
	exact := queue.Backoff{Initial: 250 * time.Millisecond, Factor: 3, Max: time.Minute}
	want := []time.Duration{250 * time.Millisecond, 750 * time.Millisecond, 2250 * time.Millisecond, 6750 * time.Millisecond, 20250 * time.Millisecond, time.Minute, time.Minute}
	for i, w := range want {
		require.Equal(t, w, exact.Delay(i+1, 0.99), "attempt %d", i+1)
	}
	require.Equal(t, 250*time.Millisecond, exact.Delay(0, 0.5), "attempt 0 counts as the first")
}

func TestBackoffJitterSpreadsDelays(t *testing.T) {
	t.Parallel()
	b := queue.DefaultBackoff
	seen := map[time.Duration]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		seen[b.Delay(5, rng.Float64())] = true
	}
	require.Greater(t, len(seen), 50, "jittered delays should differ")
}

func TestBackoffValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, queue.DefaultBackoff.Validate())
	bad := []queue.Backoff{
		{Initial: 0, Factor: 2, Max: time.Hour},
		{Initial: time.Second, Factor: 0.5, Max: time.Hour},
		{Initial: time.Second, Factor: 101, Max: time.Hour},
		{Initial: time.Hour, Factor: 2, Max: time.Second},
		{Initial: time.Second, Factor: 2, Max: time.Hour, Jitter: 1.5},
		{Initial: time.Second, Factor: 2, Max: 31 * 24 * time.Hour},
	}
	for _, b := range bad {
		require.ErrorIs(t, b.Validate(), queue.ErrInvalidBackoff, "%+v", b)
	}
}

func TestBackoffEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, b := range []queue.Backoff{queue.DefaultBackoff, {Initial: 1500 * time.Millisecond, Factor: 1.5, Max: 90 * time.Second, Jitter: 0.05}} {
		got, err := queue.DecodeBackoff(b.Encode())
		require.NoError(t, err)
		require.Equal(t, b, got)
	}
	_, err := queue.DecodeBackoff("nonsense")
	require.ErrorIs(t, err, queue.ErrInvalidBackoff)
}
