package cron_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
)

// Three instances on one Redis, 600 ticks: one job per entry per tick.
func TestSchedulerThreeLoops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	entries := []cron.Entry{
		{Name: "every", Schedule: "@every 1s", Queue: "every", Kind: "tick"},
		{Name: "fives", Schedule: "*/5 * * * * *", Timezone: "Europe/Berlin", Queue: "fives", Kind: "tick", Missed: cron.MissedOnce},
		{Name: "minutely", Schedule: "* * * * *", Timezone: "America/New_York", Queue: "minutely", Kind: "tick"},
	}
	clients := []*queue.Client{b.client(t, clock), b.client(t, clock), b.client(t, clock)}
	require.NoError(t, cron.NewStore(clients[0]).Register(b.ctx, entries...))
	for _, c := range clients {
		b.scheduler(t, cron.Config{Client: c})
	}
	const n = 600
	for range n {
		step(t, clock, 3, time.Second)
	}
	parked(t, clock, 3)
	end := base.Add(n * time.Second)
	for _, e := range entries {
		want := wantTicks(t, e.Schedule, e.Timezone, base, end)
		require.Equal(t, want, b.jobTicks(t, clients[1], e.Queue, e.Name), e.Name)
	}
	require.Len(t, wantTicks(t, "*/5 * * * * *", "", base, end), n/5)
	require.Len(t, wantTicks(t, "* * * * *", "", base, end), n/60)
}

// The only instance stops and starts again 100 s later: skip enqueues
// nothing for the gap, once exactly one catch-up (the latest missed tick).
func TestSchedulerRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	store := cron.NewStore(c)
	entries := []cron.Entry{
		{Name: "skip", Schedule: "@every 1s", Queue: "skip", Kind: "tick", Missed: cron.MissedSkip},
		{Name: "once", Schedule: "* * * * * *", Queue: "once", Kind: "tick", Missed: cron.MissedOnce},
	}
	require.NoError(t, store.Register(b.ctx, entries...))
	s := b.scheduler(t, cron.Config{Client: c})
	for range 10 {
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	require.NoError(t, s.Stop(b.ctx))
	clock.Advance(100 * time.Second) // nobody runs
	// A restart registers the same entries again: their history stays.
	require.NoError(t, store.Register(b.ctx, entries...))
	require.NoError(t, s.Start(b.ctx))
	for range 10 {
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)

	ran := func(from, to int) []time.Time { // base+from s .. base+to s
		var at []time.Time
		for i := from; i <= to; i++ {
			at = append(at, base.Add(time.Duration(i)*time.Second))
		}
		return at
	}
	before, after := ran(1, 10), ran(110, 120)
	require.Equal(t, ticks(append(before, after...)...), b.jobTicks(t, c, "skip", "skip"))
	catchUp := base.Add(109 * time.Second)
	require.Equal(t, ticks(append(append(before, catchUp), after...)...), b.jobTicks(t, c, "once", "once"))

	e, err := store.Get(b.ctx, "once")
	require.NoError(t, err)
	require.Equal(t, base.Add(120*time.Second), e.LastRunAt)
	require.Equal(t, base.Add(121*time.Second), e.NextRunAt)
}

// One of three instances stops and starts again while the others run:
// still one job per tick, none missing, and no catch-up.
func TestSchedulerRestartAmongOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	entries := []cron.Entry{
		{Name: "skip", Schedule: "@every 1s", Queue: "skip", Kind: "tick"},
		{Name: "once", Schedule: "*/2 * * * * *", Queue: "once", Kind: "tick", Missed: cron.MissedOnce},
	}
	clients := []*queue.Client{b.client(t, clock), b.client(t, clock), b.client(t, clock)}
	require.NoError(t, cron.NewStore(clients[0]).Register(b.ctx, entries...))
	var scheds []*cron.Scheduler
	for _, c := range clients {
		scheds = append(scheds, b.scheduler(t, cron.Config{Client: c}))
	}
	for range 20 {
		step(t, clock, 3, time.Second)
	}
	parked(t, clock, 3)
	require.NoError(t, scheds[0].Stop(b.ctx))
	for range 30 {
		step(t, clock, 2, time.Second)
	}
	parked(t, clock, 2)
	require.NoError(t, scheds[0].Start(b.ctx))
	for range 20 {
		step(t, clock, 3, time.Second)
	}
	parked(t, clock, 3)
	end := base.Add(70 * time.Second)
	for _, e := range entries {
		require.Equal(t, wantTicks(t, e.Schedule, "", base, end), b.jobTicks(t, clients[2], e.Queue, e.Name), e.Name)
	}
}

// Three instances whose clocks read -2 s, 0 and +2 s of the true time:
// one job per tick, none missing.
func TestSchedulerClockSkew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	skews := []time.Duration{-2 * time.Second, 0, 2 * time.Second}
	var clocks []*clockwork.FakeClock
	var clients []*queue.Client
	for _, d := range skews {
		clock := clockwork.NewFakeClockAt(base.Add(d))
		clocks = append(clocks, clock)
		clients = append(clients, b.client(t, clock))
	}
	entries := []cron.Entry{
		{Name: "every", Schedule: "@every 1s", Queue: "every", Kind: "tick", Missed: cron.MissedOnce},
		{Name: "everyskip", Schedule: "@every 1s", Queue: "everyskip", Kind: "tick"},
		{Name: "fives", Schedule: "*/5 * * * * *", Queue: "fives", Kind: "tick"},
		{Name: "minutely", Schedule: "@every 1m", Queue: "minutely", Kind: "tick"},
	}
	require.NoError(t, cron.NewStore(clients[1]).Register(b.ctx, entries...))
	for _, c := range clients {
		b.scheduler(t, cron.Config{Client: c})
	}
	const n = 600
	for range n {
		for _, clock := range clocks {
			step(t, clock, 1, time.Second)
		}
	}
	for _, clock := range clocks {
		parked(t, clock, 1)
	}
	end := base.Add(n*time.Second + skews[2]) // the clock ahead has enqueued up to here
	for _, e := range entries {
		want := wantTicks(t, e.Schedule, "", base, end)
		require.Equal(t, want, b.jobTicks(t, clients[1], e.Queue, e.Name), e.Name)
	}
}

// Overlap skip leaves out ticks while the previous run is pending or
// processing; allow does not.
func TestSchedulerOverlapSkip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	require.NoError(t, cron.NewStore(c).Register(b.ctx,
		cron.Entry{Name: "busy", Schedule: "@every 1s", Queue: "busy", Kind: "tick", Overlap: cron.OverlapSkip},
		cron.Entry{Name: "free", Schedule: "@every 1s", Queue: "free", Kind: "tick"},
	))
	b.scheduler(t, cron.Config{Client: c})
	sec := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }

	for range 4 { // tick 1 enqueues, 2..4 find it pending
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	require.Equal(t, ticks(sec(1)), b.jobTicks(t, c, "busy", "busy"))
	jobs, err := c.Claim(b.ctx, "busy", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	step(t, clock, 1, time.Second) // tick 5: processing
	parked(t, clock, 1)
	st, err := c.Stats(b.ctx, "busy")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.EnqueuedTotal)

	require.NoError(t, c.Complete(b.ctx, "busy", jobs[0].ID, jobs[0].Token, nil))
	step(t, clock, 1, time.Second) // tick 6: finished, so it runs
	parked(t, clock, 1)
	require.Equal(t, ticks(sec(6)), b.jobTicks(t, c, "busy", "busy"))
	st, err = c.Stats(b.ctx, "busy")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.EnqueuedTotal)
	require.Equal(t, ticks(sec(1), sec(2), sec(3), sec(4), sec(5), sec(6)), b.jobTicks(t, c, "free", "free"))
}

// DST through the loop, as documented on Schedule.Next: fall back in
// America/New_York fires the fixed-hour spec once and the hourly one every
// real hour; spring forward in Europe/Berlin skips the missing 02:30.
func TestSchedulerDST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start time.Time
		hours int
		entry cron.Entry
		want  map[int64]int
	}{
		{
			name:  "fall back New York 01:30",
			start: time.Date(2030, 11, 2, 16, 0, 0, 0, time.UTC), // 12:00 EDT
			hours: 48,
			entry: cron.Entry{Schedule: "30 1 * * *", Timezone: "America/New_York"},
			want: ticks(
				time.Date(2030, 11, 3, 5, 30, 0, 0, time.UTC), // 01:30 EDT; not 01:30 EST (06:30Z)
				time.Date(2030, 11, 4, 6, 30, 0, 0, time.UTC), // 01:30 EST
			),
		},
		{
			name:  "fall back New York hourly",
			start: time.Date(2030, 11, 3, 2, 0, 0, 0, time.UTC), // 22:00 EDT
			hours: 8,
			entry: cron.Entry{Schedule: "0 * * * *", Timezone: "America/New_York"},
			want: ticks(
				time.Date(2030, 11, 3, 3, 0, 0, 0, time.UTC),
				time.Date(2030, 11, 3, 4, 0, 0, 0, time.UTC),
				time.Date(2030, 11, 3, 5, 0, 0, 0, time.UTC), // 01:00 EDT
				time.Date(2030, 11, 3, 6, 0, 0, 0, time.UTC), // 01:00 EST
				time.Date(2030, 11, 3, 7, 0, 0, 0, time.UTC), // 02:00 EST
				time.Date(2030, 11, 3, 8, 0, 0, 0, time.UTC),
				time.Date(2030, 11, 3, 9, 0, 0, 0, time.UTC),
				time.Date(2030, 11, 3, 10, 0, 0, 0, time.UTC),
			),
		},
		{
			name:  "spring forward Berlin 02:30",
			start: time.Date(2030, 3, 30, 11, 0, 0, 0, time.UTC), // 12:00 CET
			hours: 48,
			entry: cron.Entry{Schedule: "30 2 * * *", Timezone: "Europe/Berlin"},
			// 2030-03-31 02:30 does not exist: no run that day.
			want: ticks(time.Date(2030, 4, 1, 0, 30, 0, 0, time.UTC)), // 02:30 CEST
		},
		{
			name:  "fall back Berlin 02:30",
			start: time.Date(2030, 10, 26, 10, 0, 0, 0, time.UTC), // 12:00 CEST
			hours: 24,
			entry: cron.Entry{Schedule: "30 2 * * *", Timezone: "Europe/Berlin"},
			want:  ticks(time.Date(2030, 10, 27, 0, 30, 0, 0, time.UTC)), // 02:30 CEST; not 02:30 CET
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			clock := clockwork.NewFakeClockAt(tc.start)
			c := b.client(t, clock)
			e := tc.entry
			e.Name, e.Queue, e.Kind = "dst", "dst", "tick"
			require.NoError(t, cron.NewStore(c).Register(b.ctx, e))
			b.scheduler(t, cron.Config{Client: c, RefreshInterval: 15 * time.Minute, Grace: 30 * time.Minute})
			for range tc.hours * 4 {
				step(t, clock, 1, 15*time.Minute)
			}
			parked(t, clock, 1)
			require.Equal(t, tc.want, b.jobTicks(t, c, "dst", "dst"))
		})
	}
}

// Changes made through another instance's store reach a running loop
// within its RefreshInterval: a new entry starts, a paused one stops, a
// deleted one stops.
func TestSchedulerFollowsChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	// Before the loop starts: queue.NewClient copies the options of a
	// redis.Client, which races with the client's first connections.
	other := cron.NewStore(b.client(t, clock))
	b.scheduler(t, cron.Config{Client: c})
	sec := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }

	step(t, clock, 1, time.Second) // 1 s: no entries yet
	parked(t, clock, 1)
	e := cron.Entry{Name: "late", Schedule: "@every 1s", Queue: "late", Kind: "tick"}
	created, err := other.Put(b.ctx, e)
	require.NoError(t, err)
	require.True(t, created)
	for range 3 { // 2, 3, 4 s
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	require.Equal(t, ticks(sec(2), sec(3), sec(4)), b.jobTicks(t, c, "late", "late"))

	e.Paused = true
	created, err = other.Put(b.ctx, e)
	require.NoError(t, err)
	require.False(t, created)
	for range 3 { // 5, 6, 7 s: paused
		step(t, clock, 1, time.Second)
	}
	e.Paused = false
	_, err = other.Put(b.ctx, e)
	require.NoError(t, err)
	for range 2 { // 8, 9 s
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	require.NoError(t, other.Delete(b.ctx, "late"))
	for range 2 { // 10, 11 s: deleted
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	require.Equal(t, ticks(sec(2), sec(3), sec(4), sec(8), sec(9)), b.jobTicks(t, c, "late", "late"))
}

func TestNewSchedulerConfig(t *testing.T) {
	t.Parallel()
	_, err := cron.NewScheduler(cron.Config{})
	require.Error(t, err)
	b := setup(t)
	c := b.client(t, clockwork.NewFakeClockAt(base))
	_, err = cron.NewScheduler(cron.Config{Client: c, Grace: time.Hour})
	require.Error(t, err)
	s, err := cron.NewScheduler(cron.Config{Client: c})
	require.NoError(t, err)
	require.NoError(t, s.Start(b.ctx))
	require.Error(t, s.Start(b.ctx), "started twice")
	require.NoError(t, s.Stop(b.ctx))
	require.NoError(t, s.Stop(b.ctx), "stopping a stopped scheduler")
}

// A loop that falls behind by more than Grace (a stalled process, Redis
// out of reach) treats the older ticks as missed; the ones within Grace
// run late.
func TestSchedulerGapLongerThanGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	require.NoError(t, cron.NewStore(c).Register(b.ctx,
		cron.Entry{Name: "skip", Schedule: "@every 1s", Queue: "skip", Kind: "tick"},
		cron.Entry{Name: "once", Schedule: "@every 1s", Queue: "once", Kind: "tick", Missed: cron.MissedOnce},
	))
	b.scheduler(t, cron.Config{Client: c, Grace: 30 * time.Second})
	for range 10 {
		step(t, clock, 1, time.Second)
	}
	step(t, clock, 1, 10*time.Minute) // wakes at 610 s
	for range 5 {
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	var run []time.Time
	for _, r := range [][2]int{{1, 10}, {580, 615}} { // 580..610 within Grace of 610
		for i := r[0]; i <= r[1]; i++ {
			run = append(run, base.Add(time.Duration(i)*time.Second))
		}
	}
	require.Equal(t, ticks(run...), b.jobTicks(t, c, "skip", "skip"))
	require.Equal(t, ticks(append(run, base.Add(579*time.Second))...), b.jobTicks(t, c, "once", "once"))
}

// An instance that reaches a tick after its job is gone (dropped with its
// idempotency record, as the dead set's caps or a purge do) finds the tick
// done in the entry's bookkeeping and does not enqueue it again.
func TestSchedulerLateInstanceAfterJobGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ahead, behind := clockwork.NewFakeClockAt(base.Add(2*time.Second)), clockwork.NewFakeClockAt(base)
	ca, cb := b.client(t, ahead), b.client(t, behind)
	require.NoError(t, cron.NewStore(cb).Register(b.ctx, cron.Entry{Name: "e", Schedule: "@every 1s", Queue: "q", Kind: "tick"}))
	b.scheduler(t, cron.Config{Client: ca})
	parked(t, ahead, 1) // ran 2 s; 1 s passed before it started (skip)
	pending := func() []*queue.Job {
		t.Helper()
		jobs, _, err := ca.List(b.ctx, "q", queue.ListOptions{Status: queue.StatusPending})
		require.NoError(t, err)
		return jobs
	}
	jobs := pending()
	require.Len(t, jobs, 1)
	key := "cron:e:" + strconv.FormatInt(base.Add(2*time.Second).UnixMilli(), 10)
	require.Equal(t, key, jobs[0].IdempotencyKey)
	// The job goes, with its idempotency record, as a purge of the dead
	// set takes it.
	claimed, err := ca.Claim(b.ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = ca.Fail(b.ctx, "q", claimed[0].ID, claimed[0].Token, queue.FailOptions{Error: "x", Dead: true})
	require.NoError(t, err)
	n, err := ca.PurgeDead(b.ctx, "q", "")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	b.scheduler(t, cron.Config{Client: cb})
	for range 2 {
		step(t, behind, 1, time.Second)
	}
	parked(t, behind, 1)
	// The behind instance ran 1 s (the ahead one had skipped it) and
	// found 2 s done.
	jobs = pending()
	require.Len(t, jobs, 1)
	require.Equal(t, "cron:e:"+strconv.FormatInt(base.Add(time.Second).UnixMilli(), 10), jobs[0].IdempotencyKey)
	st, err := cb.Stats(b.ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.EnqueuedTotal)
}
