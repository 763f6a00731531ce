package demo_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/demo"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
)

// TestPoolRegistry: the simulated workers are in the worker registry as
// demo-1..N, with their host, labels, queue, version and the job each
// holds; they are refreshed every third of the TTL; a shrink deregisters
// the stopped ones; a hung worker's entry keeps its job until its TTL
// lapses while its replacement registers as demo-N.2; Stop deregisters
// them all.
func TestPoolRegistry(t *testing.T) {
	t.Parallel()
	clock := testutil.FakeClock()
	client, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	const ttl = 9 * time.Second
	reg, err := registry.New(client, registry.Config{TTL: ttl})
	require.NoError(t, err)
	pool, err := demo.New(demo.Config{Client: client, ClaimWait: 100 * time.Millisecond, Seed: 1, Logger: slog.New(slog.DiscardHandler),
		Registry: reg, Host: "box-1", Version: "v9.9.9"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	require.NoError(t, pool.Start(ctx))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = pool.Stop(sctx)
		}
	})
	ids := func() []string {
		p, err := reg.List(t.Context(), registry.ListOptions{})
		require.NoError(t, err)
		out := []string{}
		for _, w := range p.Workers {
			out = append(out, w.ID)
		}
		return out
	}
	get := func(id string) registry.Worker {
		w, err := reg.Get(t.Context(), id)
		require.NoError(t, err)
		return w
	}
	waitIDs := func(want ...string) {
		t.Helper()
		require.Eventually(t, func() bool { return slices.Equal(ids(), want) }, 10*time.Second, 10*time.Millisecond, "want %v, have %v", want, ids())
	}
	// step advances the clock a third of the TTL and waits for the
	// workers named to be refreshed.
	step := func(live ...string) {
		t.Helper()
		clock.Advance(ttl / 3)
		now := clock.Now()
		require.Eventually(t, func() bool {
			for _, id := range live {
				if get(id).LastSeenAt.Before(now.Add(-100 * time.Millisecond)) {
					return false
				}
			}
			return true
		}, 10*time.Second, 10*time.Millisecond)
	}

	// Two workers, with what they say of themselves.
	require.NoError(t, pool.Configure(demo.Settings{Size: 2, Latency: 10 * time.Second}))
	waitIDs("demo-1", "demo-2")
	w := get("demo-2")
	require.Equal(t, registry.Info{ID: "demo-2", Host: "box-1", Labels: []string{"simulated"}, Queues: []string{"demo"}, Version: "v9.9.9"}, w.Info)
	require.Empty(t, w.Jobs)
	require.Equal(t, ttl, w.ExpiresAt.Sub(w.LastSeenAt))

	// A job: the worker that claimed it holds it.
	jobs, err := pool.Enqueue(t.Context(), demo.Batch{Count: 1, MaxAttempts: 1, Visibility: time.Minute})
	require.NoError(t, err)
	held := []registry.JobRef{{Queue: "demo", ID: jobs[0].ID}}
	holder := func() string {
		for _, id := range ids() {
			if slices.Equal(get(id).Jobs, held) {
				return id
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return holder() != "" }, 10*time.Second, 10*time.Millisecond)

	// Refreshed every third of the TTL: after twice the TTL, still there.
	for range 6 {
		step("demo-1", "demo-2")
	}
	waitIDs("demo-1", "demo-2")

	// Shrink: demo-2 leaves the registry at once.
	require.NoError(t, pool.Configure(demo.Settings{Size: 1, Latency: 10 * time.Second}))
	waitIDs("demo-1")

	// A hang: the crashed demo-1 keeps its job until its TTL lapses; its
	// replacement is demo-1.2.
	// (The first job, released by demo-2 if it held it, is done first. Its
	// work is up to MaxSteps steps, each a timer set once the one before
	// rang: a step of the clock may end only one of them.)
	for i := 0; ; i++ {
		require.Less(t, i, 3*demo.MaxSteps, "the first job never completed")
		if st := pool.Status(); st.Completed == 1 && st.Busy == 0 {
			break
		}
		step("demo-1")
	}
	require.NoError(t, pool.Configure(demo.Settings{Size: 1, HangRate: 1}))
	jobs, err = pool.Enqueue(t.Context(), demo.Batch{Count: 1, Visibility: time.Minute})
	require.NoError(t, err)
	waitIDs("demo-1", "demo-1.2")
	require.Equal(t, []registry.JobRef{{Queue: "demo", ID: jobs[0].ID}}, get("demo-1").Jobs)
	require.Empty(t, get("demo-1.2").Jobs)
	for range 4 {
		step("demo-1.2")
	}
	waitIDs("demo-1.2")

	// Stop: gone.
	sctx, scancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer scancel()
	require.NoError(t, pool.Stop(sctx))
	stopped = true
	require.Empty(t, ids())
}
