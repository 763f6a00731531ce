package cron_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Schedulers whose clocks are wrong by ±30 s and ±5 min, each alone and
// all of them together on one Redis, on the real clock: Redis's clock
// decides which tick is due, so every tick is enqueued exactly once and
// none before its instant by Redis's time; and each loop sleeps until
// the tick's instant on Redis's clock less its estimate of the skew, so a
// loop alone on a clock minutes behind still enqueues each tick within a
// second of it. (The entries are put through a skewed instance too: the
// first tick is the first after the change by Redis's clock.)
func TestSchedulerSkewedClocks(t *testing.T) {
	t.Parallel()
	skews := []time.Duration{30 * time.Second, -30 * time.Second, 5 * time.Minute, -5 * time.Minute}
	for _, s := range skews {
		t.Run("alone/"+s.String(), func(t *testing.T) {
			t.Parallel()
			skewedTicks(t, []time.Duration{s})
		})
	}
	t.Run("together", func(t *testing.T) {
		t.Parallel()
		skewedTicks(t, append([]time.Duration{0}, skews...))
	})
}

func skewedTicks(t *testing.T, skews []time.Duration) {
	b := setup(t)
	var clients []*queue.Client
	for _, s := range skews {
		c, err := queue.NewClient(queue.Config{Redis: b.rdb, Namespace: b.ns, Clock: testutil.SkewedClock(s), DisableEvents: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	entries := []cron.Entry{
		{Name: "secs", Schedule: "* * * * * *", Queue: "secs", Kind: "tick"},
		{Name: "twos", Schedule: "*/2 * * * * *", Queue: "twos", Kind: "tick", Missed: cron.MissedOnce},
	}
	before, err := b.rdb.Time(b.ctx).Result()
	require.NoError(t, err)
	require.NoError(t, cron.NewStore(clients[len(clients)-1]).Register(b.ctx, entries...))
	after, err := b.rdb.Time(b.ctx).Result()
	require.NoError(t, err)
	var scheds []*runner
	for _, c := range clients {
		// No refresh to fall back on: each loop wakes for a tick only by
		// converting its instant on Redis's clock to its own.
		scheds = append(scheds, b.scheduler(t, cron.Config{Client: c, RefreshInterval: time.Hour}))
	}
	// Three ticks of "secs" (about three seconds), then every loop stops.
	require.Eventually(t, func() bool {
		st, err := clients[0].Stats(b.ctx, "secs")
		return err == nil && st.EnqueuedTotal >= 3
	}, 15*time.Second, 10*time.Millisecond, "ticks are enqueued")
	for i, s := range scheds {
		require.InDelta(t, -skews[i].Seconds(), cron.RedisClockOffset(s.Scheduler).Seconds(), 0.5,
			"the loop on a clock %s off knows how far Redis's is", skews[i])
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		require.NoError(t, s.Stop(ctx))
		cancel()
	}

	var latest time.Duration
	for _, e := range entries {
		sched, err := cron.Parse(e.Schedule, "")
		require.NoError(t, err)
		jobs, _, err := clients[0].List(b.ctx, e.Queue, queue.ListOptions{Status: queue.StatusPending, Limit: queue.MaxListLimit})
		require.NoError(t, err)
		require.NotEmpty(t, jobs, e.Name)
		got := map[int64]int{}
		first, last := time.Time{}, time.Time{}
		for _, j := range jobs {
			ms, ok := strings.CutPrefix(j.IdempotencyKey, "cron:"+e.Name+":")
			require.True(t, ok, j.IdempotencyKey)
			n, err := strconv.ParseInt(ms, 10, 64)
			require.NoError(t, err)
			tick := time.UnixMilli(n).UTC()
			got[n]++
			if first.IsZero() || tick.Before(first) {
				first = tick
			}
			if tick.After(last) {
				last = tick
			}
			// Enqueued at Redis's now, due at the tick: never early, and on
			// time whatever the clocks of the loops say.
			late := j.EnqueuedAt.Sub(tick)
			require.GreaterOrEqual(t, late, time.Duration(0), "%s tick %s enqueued at %s by Redis's clock: early", e.Name, tick, j.EnqueuedAt)
			require.Less(t, late, 2*time.Second, "%s tick %s enqueued at %s: late", e.Name, tick, j.EnqueuedAt)
			latest = max(latest, late)
		}
		// The first tick is the first after the Put by Redis's clock, and
		// from there every tick ran once, none missing.
		require.False(t, first.Before(sched.Next(before)), "%s: first tick %s, put after %s", e.Name, first, before)
		require.False(t, first.After(sched.Next(after)), "%s: first tick %s, put before %s", e.Name, first, after)
		require.Equal(t, wantTicks(t, e.Schedule, "", first.Add(-time.Millisecond), last), got, e.Name)
		st, err := clients[0].Stats(b.ctx, e.Queue)
		require.NoError(t, err)
		require.EqualValues(t, len(jobs), st.EnqueuedTotal, fmt.Sprintf("%s: one job a tick", e.Name))
	}
	t.Logf("latest enqueue after its tick, by Redis's clock: %s (to the ms)", latest)
}

// TestOneRedisClock: cron reads Redis's clock through its queue client's
// one estimate. Cron's read of TIME feeds the client's estimate, and the
// scheduler's offset, the client's (what the gauge reads) and the engine's
// are one reading.
func TestOneRedisClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, err := queue.NewClient(queue.Config{Redis: b.rdb, Namespace: b.ns, Clock: testutil.SkewedClock(time.Minute), DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.True(t, plumbing.Of(c).RedisClock().At.IsZero(), "nothing measured yet")

	require.NoError(t, cron.NewStore(c).Register(b.ctx, cron.Entry{Name: "secs", Schedule: "* * * * * *", Queue: "secs", Kind: "tick"}))
	est := plumbing.Of(c).RedisClock()
	require.False(t, est.At.IsZero(), "cron's TIME fed the client's estimate")
	require.InDelta(t, -time.Minute.Seconds(), est.Offset.Seconds(), 0.5, "this instance's clock is a minute ahead")

	s, err := cron.NewScheduler(cron.Config{Client: c})
	require.NoError(t, err)
	require.Equal(t, est.Offset, cron.RedisClockOffset(s))
	require.Equal(t, est.Offset, plumbing.Of(c).RedisClock().Offset)
	require.Equal(t, est, plumbing.Of(c).Engine().Clock().Estimate())
	_, err = plumbing.Of(c).MeasureRedisClock(b.ctx)
	require.NoError(t, err)
	require.Equal(t, plumbing.Of(c).RedisClock().Offset, cron.RedisClockOffset(s), "a new measure is the scheduler's too")
}
