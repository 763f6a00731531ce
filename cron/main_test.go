package cron_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// base is the start of the scheduler tests: on a whole minute, so that the
// ticks of every spec are easy to count.
var base = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

type testBundle struct {
	ctx context.Context
	rdb *redis.Client
	ns  string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{ctx: t.Context(), rdb: testutil.Redis(t), ns: testutil.Namespace(t)}
}

// client is a queue client of the bundle's namespace on clock, a fake
// one that Redis's clock follows: an instance of the service.
func (b *testBundle) client(t *testing.T, clock clockwork.Clock) *queue.Client {
	t.Helper()
	c, err := queue.NewClient(queue.Config{Redis: b.rdb, Namespace: b.ns, Clock: clock, FollowClock: true, DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// runner runs a Scheduler as chronoq serve does (its Run, through
// internal/lifecycle), with the Start and Stop the tests step through.
type runner struct {
	*cron.Scheduler
	h *lifecycle.Handle
}

// Start runs the scheduler until Stop.
func (r *runner) Start(ctx context.Context) error {
	r.h = lifecycle.Start(ctx, r.Scheduler)
	return nil
}

// Stop ends the run and waits for it (or ctx); stopping a stopped one is
// nothing.
func (r *runner) Stop(ctx context.Context) error {
	if r.h == nil {
		return nil
	}
	err := r.h.Stop(ctx)
	r.h = nil
	return err
}

// newRunner builds a scheduler of cfg, logging nowhere, and runs it until
// the end of the test.
func newRunner(t *testing.T, ctx context.Context, cfg cron.Config) *runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := cron.NewScheduler(cfg)
	require.NoError(t, err)
	r := &runner{Scheduler: s}
	require.NoError(t, r.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Stop(ctx))
	})
	return r
}

// scheduler runs a scheduler on client (and its clock) until the end of
// the test.
func (b *testBundle) scheduler(t *testing.T, cfg cron.Config) *runner {
	t.Helper()
	return newRunner(t, b.ctx, cfg)
}

// parked waits until n loops sleep on clock.
func parked(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, n), "loops did not park on the clock")
}

// step advances clock by d once its n loops sleep on it.
func step(t *testing.T, clock *clockwork.FakeClock, n int, d time.Duration) {
	t.Helper()
	parked(t, clock, n)
	clock.Advance(d)
}

// jobTicks counts the jobs of entry name waiting in q by the tick of their
// idempotency key (ms), and checks the queue's totals agree: every job
// enqueued is there (or was claimed by the test).
func (b *testBundle) jobTicks(t *testing.T, c *queue.Client, q, name string) map[int64]int {
	t.Helper()
	jobs, _, err := c.List(b.ctx, q, queue.ListOptions{Status: queue.StatusPending, Limit: queue.MaxListLimit})
	require.NoError(t, err)
	ids := make([]string, len(jobs))
	got := map[int64]int{}
	for i, j := range jobs {
		ids[i] = j.ID
		ms, ok := strings.CutPrefix(j.IdempotencyKey, "cron:"+name+":")
		require.True(t, ok, "job %s has key %q", j.ID, j.IdempotencyKey)
		tick, err := strconv.ParseInt(ms, 10, 64)
		require.NoError(t, err)
		got[tick]++
	}
	st, err := c.Stats(b.ctx, q)
	require.NoError(t, err)
	// Jobs a test claimed are processing or completed, not pending.
	require.EqualValues(t, len(ids), st.EnqueuedTotal-st.Processing-st.CompletedTotal, "enqueued total of %s", q)
	require.EqualValues(t, len(ids), st.Pending, "pending of %s", q)
	return got
}

// wantTicks is one job per tick of spec in (from, to].
func wantTicks(t *testing.T, spec, zone string, from, to time.Time) map[int64]int {
	t.Helper()
	s, err := cron.Parse(spec, zone)
	require.NoError(t, err)
	want := map[int64]int{}
	for at := s.Next(from); !at.IsZero() && !at.After(to); at = s.Next(at) {
		want[at.UnixMilli()] = 1
	}
	return want
}

// ticks is one job per given tick.
func ticks(at ...time.Time) map[int64]int {
	m := map[int64]int{}
	for _, a := range at {
		m[a.UnixMilli()] = 1
	}
	return m
}
