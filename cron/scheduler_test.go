package cron_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
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
	r := b.runTenTicksAndStop(t)
	clock, c, store, entries, s := r.clock, r.client, r.store, r.entries, r.sched
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
	var scheds []*runner
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

// Three instances on fake clocks 2 s apart. Under a fake clock the
// scripts read Redis's clock as the fake one, so here Redis's time itself
// differs by instance, by up to 4 s, as it does, one instance after the
// other, across failovers to masters whose clocks disagree: still one job
// per tick, none missing. (Instances on skewed real clocks, which all read
// the one Redis clock, are TestSchedulerSkewedClocks.)
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

	require.NoError(t, c.Complete(b.ctx, "busy", jobs[0].ID, jobs[0].Token, queue.CompleteOptions{}))
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
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	_, err = cron.NewScheduler(cron.Config{Client: c, Grace: time.Hour})
	require.Error(t, err)
	s, err := cron.NewScheduler(cron.Config{Client: c})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(b.ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	require.NoError(t, clock.BlockUntilContext(b.ctx, 1)) // the first Run sleeps
	require.ErrorContains(t, s.Run(b.ctx), "running already", "a second Run while one runs")
	cancel()
	require.NoError(t, <-ran, "a Run ended by its ctx answers nil")
	ctx, cancel = context.WithCancel(b.ctx)
	cancel()
	require.NoError(t, s.Run(ctx), "run again after it returned")
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
// done in the entry's bookkeeping and does not enqueue it again. With the
// due index an instance reaches a tick that was run only when the
// entry's cursor lags: the instance that ran it recorded it and stopped,
// or lost Redis, before moving the cursor (another command, and in a
// cluster another slot). The test moves the cursor back by hand.
func TestSchedulerLateInstanceAfterJobGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	require.NoError(t, cron.NewStore(c).Register(b.ctx, cron.Entry{Name: "e", Schedule: "@every 1s", Queue: "q", Kind: "tick"}))
	s := b.scheduler(t, cron.Config{Client: c})
	step(t, clock, 1, time.Second) // runs base+1 s
	parked(t, clock, 1)
	require.NoError(t, s.Stop(b.ctx))
	pending := func() []*queue.Job {
		t.Helper()
		jobs, _, err := c.List(b.ctx, "q", queue.ListOptions{Status: queue.StatusPending})
		require.NoError(t, err)
		return jobs
	}
	key := func(sec int) string {
		return "cron:e:" + strconv.FormatInt(base.Add(time.Duration(sec)*time.Second).UnixMilli(), 10)
	}
	jobs := pending()
	require.Len(t, jobs, 1)
	require.Equal(t, key(1), jobs[0].IdempotencyKey)
	// The job goes, with its idempotency record, as a purge of the dead
	// set takes it.
	claimed, err := c.Claim(b.ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = c.Fail(b.ctx, "q", claimed[0].ID, claimed[0].Token, queue.FailOptions{Error: "x", Dead: true})
	require.NoError(t, err)
	n, err := c.PurgeDead(b.ctx, "q", "")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// The cursor as if the move after base+1 s had been lost.
	require.NoError(t, b.rdb.ZAddXX(b.ctx, cron.DueKey(b.ns),
		redis.Z{Score: float64(base.Add(time.Second).UnixMilli()), Member: "e"}).Err())

	require.NoError(t, s.Start(b.ctx))
	step(t, clock, 1, time.Second) // finds base+1 s done, runs base+2 s
	parked(t, clock, 1)
	jobs = pending()
	require.Len(t, jobs, 1)
	require.Equal(t, key(2), jobs[0].IdempotencyKey)
	st, err := c.Stats(b.ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.EnqueuedTotal)
	cursor, err := b.rdb.ZScore(b.ctx, cron.DueKey(b.ns), "e").Result()
	require.NoError(t, err)
	require.Equal(t, float64(base.Add(3*time.Second).UnixMilli()), cursor)
}

// A restart shorter than Grace is not a miss: the loop finds the entries'
// cursors at most Grace behind, so some instance handled them lately, and
// runs the ticks of the gap late, whatever the Missed policy, as a loop
// that fell behind does.
func TestSchedulerQuickRestartRunsTheGapLate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runTenTicksAndStop(t)
	clock, c, store, entries, s := r.clock, r.client, r.store, r.entries, r.sched
	clock.Advance(30 * time.Second) // below the default Grace, 1 min
	require.NoError(t, store.Register(b.ctx, entries...))
	require.NoError(t, s.Start(b.ctx))
	for range 10 {
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	want := wantTicks(t, "@every 1s", "", base, base.Add(50*time.Second))
	for _, e := range entries {
		require.Equal(t, want, b.jobTicks(t, c, e.Queue, e.Name), e.Name)
	}
}

// An instance that reads Redis's clock ahead (a fake clock ahead: see
// TestSchedulerClockSkew) starts while another runs: it finds the cursors
// where the other left them, a moment behind, and runs those ticks instead
// of counting them missed. No tick is lost or doubled, as in a rolling
// restart.
func TestSchedulerStartAmongSkewedOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	behind, ahead := clockwork.NewFakeClockAt(base), clockwork.NewFakeClockAt(base.Add(2*time.Second))
	cb, ca := b.client(t, behind), b.client(t, ahead)
	entries := []cron.Entry{
		{Name: "every", Schedule: "@every 1s", Queue: "every", Kind: "tick"},
		{Name: "fives", Schedule: "*/5 * * * * *", Queue: "fives", Kind: "tick", Missed: cron.MissedOnce},
	}
	require.NoError(t, cron.NewStore(cb).Register(b.ctx, entries...))
	b.scheduler(t, cron.Config{Client: cb})
	for range 10 {
		step(t, behind, 1, time.Second)
	}
	parked(t, behind, 1)
	ahead.Advance(10 * time.Second)
	b.scheduler(t, cron.Config{Client: ca})
	for range 20 {
		step(t, behind, 1, time.Second)
		step(t, ahead, 1, time.Second)
	}
	parked(t, behind, 1)
	parked(t, ahead, 1)
	end := base.Add(32 * time.Second) // the clock ahead
	for _, e := range entries {
		require.Equal(t, wantTicks(t, e.Schedule, "", base, end), b.jobTicks(t, cb, e.Queue, e.Name), e.Name)
	}
}

// Entries stored before the due index (no version, no cursor) are indexed
// by the first loop that sees the entries and their versions disagree:
// they resume after the later of their last change and their last run,
// here long ago, so the Missed policy applies. A version left by an entry
// deleted without the index goes.
func TestSchedulerIndexesOldEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	old := func(name string, missed cron.Missed, changed time.Time) {
		raw, err := json.Marshal(map[string]any{"name": name, "schedule": "@every 1s", "timezone": "UTC",
			"queue": name, "kind": "tick", "missed": missed, "overlap": "allow", "paused": false,
			"updated_at_ms": changed.UnixMilli()})
		require.NoError(t, err)
		require.NoError(t, b.rdb.HSet(b.ctx, b.ns+":cron", name, raw).Err())
	}
	old("once", cron.MissedOnce, base.Add(-time.Hour))
	old("skip", cron.MissedSkip, base.Add(-time.Hour))
	old("fresh", cron.MissedSkip, base.Add(-2*time.Second))
	// The last run of "once", 100 s ago.
	require.NoError(t, b.rdb.HSet(b.ctx, b.ns+":cron:{once}:run", "tick_ms", base.Add(-100*time.Second).UnixMilli(),
		"run_at_ms", base.Add(-100*time.Second).UnixMilli(), "queue", "once", "job_id", "x").Err())
	versions := b.ns + ":{" + b.ns + ":cron}:versions"
	require.NoError(t, b.rdb.HSet(b.ctx, versions, "gone", 7).Err())

	b.scheduler(t, cron.Config{Client: c})
	for range 2 {
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	sec := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	require.Equal(t, ticks(sec(-1), sec(0), sec(1), sec(2)), b.jobTicks(t, c, "once", "once"), "one catch-up, then on time")
	require.Equal(t, ticks(sec(0), sec(1), sec(2)), b.jobTicks(t, c, "skip", "skip"))
	require.Equal(t, ticks(sec(-1), sec(0), sec(1), sec(2)), b.jobTicks(t, c, "fresh", "fresh"), "changed within Grace: late, not missed")
	n, err := b.rdb.HLen(b.ctx, versions).Result()
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	due, err := b.rdb.ZRange(b.ctx, cron.DueKey(b.ns), 0, -1).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"once", "skip", "fresh"}, due)
}

// The store and the loops over a Redis Cluster: the entries and their
// index share a slot, each entry's bookkeeping has its own.
func TestSchedulerOnRedisCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	rdb := testutil.Cluster(t)
	ctx, ns := t.Context(), testutil.Namespace(t)
	clock := clockwork.NewFakeClockAt(base)
	var clients []*queue.Client
	for range 2 {
		c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, Clock: clock, FollowClock: true, DisableEvents: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	store := cron.NewStore(clients[0])
	var entries []cron.Entry
	for _, name := range []string{"a", "b", "c", "d"} {
		entries = append(entries, cron.Entry{Name: name, Schedule: "@every 1s", Queue: "q" + name, Kind: "tick"})
	}
	require.NoError(t, store.Register(ctx, entries...))
	tb := &testBundle{ctx: ctx, ns: ns}
	for _, c := range clients {
		tb.scheduler(t, cron.Config{Client: c})
	}
	for range 5 {
		step(t, clock, 2, time.Second)
	}
	parked(t, clock, 2)
	require.NoError(t, store.Delete(ctx, "d"))
	entries[0].Paused = true
	_, err := store.Put(ctx, entries[0])
	require.NoError(t, err)
	for range 3 {
		step(t, clock, 2, time.Second)
	}
	parked(t, clock, 2)
	for _, e := range entries {
		to := base.Add(8 * time.Second)
		if e.Name == "a" || e.Name == "d" {
			to = base.Add(5 * time.Second)
		}
		st, err := clients[1].Stats(ctx, e.Queue)
		require.NoError(t, err)
		require.EqualValues(t, len(wantTicks(t, e.Schedule, "", base, to)), st.EnqueuedTotal, e.Name)
	}
}

// stoppedAfterTen is a scheduler stopped after ten ticks of a "skip" and a
// "once" entry due every second, on a fake clock: where the restart tests
// start.
type stoppedAfterTen struct {
	clock   *clockwork.FakeClock
	client  *queue.Client
	store   *cron.Store
	entries []cron.Entry
	sched   *runner
}

func (b *testBundle) runTenTicksAndStop(t *testing.T) stoppedAfterTen {
	t.Helper()
	r := stoppedAfterTen{clock: clockwork.NewFakeClockAt(base), entries: []cron.Entry{
		{Name: "skip", Schedule: "@every 1s", Queue: "skip", Kind: "tick", Missed: cron.MissedSkip},
		{Name: "once", Schedule: "* * * * * *", Queue: "once", Kind: "tick", Missed: cron.MissedOnce},
	}}
	r.client = b.client(t, r.clock)
	r.store = cron.NewStore(r.client)
	require.NoError(t, r.store.Register(b.ctx, r.entries...))
	r.sched = b.scheduler(t, cron.Config{Client: r.client})
	for range 10 {
		step(t, r.clock, 1, time.Second)
	}
	parked(t, r.clock, 1)
	require.NoError(t, r.sched.Stop(b.ctx))
	return r
}
