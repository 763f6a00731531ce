package demo_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/demo"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

type testBundle struct {
	ctx    context.Context
	client *queue.Client
	clock  *clockwork.FakeClock
	pool   *demo.Pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	clock := testutil.FakeClock()
	client, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	pool, err := demo.New(demo.Config{Client: client, ClaimWait: 100 * time.Millisecond, Seed: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, pool.Start(ctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		require.NoError(t, pool.Stop(sctx))
		cancel()
	})
	return &testBundle{ctx: t.Context(), client: client, clock: clock, pool: pool}
}

func (b *testBundle) stats(t *testing.T) queue.Stats {
	t.Helper()
	s, err := b.client.Stats(b.ctx, demo.DefaultQueue)
	require.NoError(t, err)
	return s
}

func TestBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	jobs, err := b.pool.Enqueue(b.ctx, demo.Batch{Count: 8, Delay: 10 * time.Second, Spread: time.Minute, MaxAttempts: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 8)
	for i, j := range jobs {
		require.Equal(t, demo.Kinds[i%4], j.Kind)
		require.Equal(t, queue.StatusScheduled, j.Status)
		require.Equal(t, 2, j.MaxAttempts)
		require.Equal(t, demo.DefaultVisibility, j.Visibility)
		want := now.Add(10*time.Second + time.Minute*time.Duration(i)/8)
		require.WithinDuration(t, want, j.RunAt, time.Millisecond, i)
		require.NotEqual(t, "{}", string(j.Payload))
	}
	require.EqualValues(t, 8, b.stats(t).Scheduled)

	jobs, err = b.pool.Enqueue(b.ctx, demo.Batch{Kinds: []string{"invoice"}})
	require.NoError(t, err)
	require.Len(t, jobs, demo.DefaultBatchCount)
	require.Equal(t, queue.StatusPending, jobs[0].Status)
	require.Equal(t, "invoice", jobs[19].Kind)

	for _, bad := range []demo.Batch{{Count: -1}, {Count: 1001}, {Kinds: []string{"fax"}}, {Delay: -time.Second},
		{Spread: 2 * time.Hour}, {MaxAttempts: -1}, {Visibility: time.Millisecond}} {
		_, err := b.pool.Enqueue(b.ctx, bad)
		require.Error(t, err, "%+v", bad)
	}
}

// TestPoolCompletesAndFails: workers complete jobs, or fail them into the
// dead set when their attempts are spent.
func TestPoolCompletesAndFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pool.Enqueue(b.ctx, demo.Batch{Count: 6})
	require.NoError(t, err)
	require.NoError(t, b.pool.Configure(demo.Settings{Size: 3}))
	// The pool counts a completion after Redis has taken it: wait for both.
	require.Eventually(t, func() bool {
		return b.stats(t).CompletedTotal == 6 && b.pool.Status().Completed == 6
	}, 10*time.Second, 10*time.Millisecond)
	st := b.pool.Status()
	require.Equal(t, 3, st.Running)
	require.EqualValues(t, 6, st.Claimed)

	require.NoError(t, b.pool.Configure(demo.Settings{Size: 1, FailRate: 1}))
	_, err = b.pool.Enqueue(b.ctx, demo.Batch{Count: 2, MaxAttempts: 1})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return b.stats(t).Dead == 2 && b.pool.Status().Failed == 2
	}, 10*time.Second, 10*time.Millisecond)
	dead, _, err := b.client.List(b.ctx, demo.DefaultQueue, queue.ListOptions{Status: queue.StatusDead})
	require.NoError(t, err)
	require.Len(t, dead, 2)
	require.Contains(t, dead[0].LastError, "simulated")
	page, err := b.client.Logs(b.ctx, demo.DefaultQueue, dead[0].ID, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, page.Lines)
	require.Equal(t, "error: "+dead[0].LastError, page.Lines[len(page.Lines)-1].Line, "a failed job's log ends with its error")
}

// TestPoolHangAndReclaim: a hung worker holds its job without a heartbeat;
// once the lease lapses a reclaim sweep returns it to pending.
func TestPoolHangAndReclaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.pool.Configure(demo.Settings{Size: 2, HangRate: 1}))
	jobs, err := b.pool.Enqueue(b.ctx, demo.Batch{Count: 3, Visibility: 2 * time.Second})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.pool.Status().Hung == 3 }, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 3, b.stats(t).Processing)
	st := b.pool.Status()
	require.Len(t, st.HungJobs, 3)
	require.Equal(t, 2, st.Running) // the crashed workers were replaced
	require.Zero(t, st.Busy)

	// Nothing heartbeats: within the lease nothing is reclaimed, after it
	// everything is.
	require.NoError(t, b.pool.Configure(demo.Settings{Size: 0}))
	require.Eventually(t, func() bool { return b.pool.Status().Running == 0 }, 10*time.Second, 10*time.Millisecond)
	ids, err := b.client.Reclaim(b.ctx, demo.DefaultQueue)
	require.NoError(t, err)
	require.Empty(t, ids)
	b.clock.Advance(2*time.Second + time.Millisecond)
	ids, err = b.client.Reclaim(b.ctx, demo.DefaultQueue)
	require.NoError(t, err)
	require.Len(t, ids, 3)
	s := b.stats(t)
	require.EqualValues(t, 3, s.Pending)
	require.EqualValues(t, 3, s.ReclaimedTotal)
	j, err := b.client.Get(b.ctx, demo.DefaultQueue, jobs[0].ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusPending, j.Status)
	require.Equal(t, 1, j.Attempts)
}

// TestPoolLatencyAndShrink: work takes its latency on the pool's clock,
// with heartbeats keeping a long job's lease; a worker stopped mid-job
// releases it.
func TestPoolLatencyAndShrink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.pool.Configure(demo.Settings{Size: 1, Latency: 4 * time.Second}))
	jobs, err := b.pool.Enqueue(b.ctx, demo.Batch{Count: 1, Visibility: time.Second})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.pool.Status().Busy == 1 }, 10*time.Second, 10*time.Millisecond)
	// Latency 4s is 2s to 6s of work; heartbeats every 500 ms keep the
	// 1 s lease alive: a sweep after 1.5 s finds nothing lapsed.
	for range 3 {
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
		b.clock.Advance(500 * time.Millisecond)
	}
	require.Eventually(t, func() bool {
		j, err := b.client.Get(b.ctx, demo.DefaultQueue, jobs[0].ID)
		require.NoError(t, err)
		return j.LeaseUntil.After(b.clock.Now())
	}, 10*time.Second, 10*time.Millisecond)
	ids, err := b.client.Reclaim(b.ctx, demo.DefaultQueue)
	require.NoError(t, err)
	require.Empty(t, ids)
	require.Zero(t, b.stats(t).CompletedTotal)

	// Shrink to 0 mid-job: the job goes back to pending at once.
	require.NoError(t, b.pool.Configure(demo.Settings{Size: 0, Latency: 4 * time.Second}))
	require.Eventually(t, func() bool { return b.pool.Status().Released == 1 }, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, b.stats(t).Pending)

	// And back: it completes once its latency has passed.
	require.NoError(t, b.pool.Configure(demo.Settings{Size: 1, Latency: 4 * time.Second}))
	require.Eventually(t, func() bool {
		if b.stats(t).CompletedTotal == 1 {
			return true
		}
		b.clock.Advance(250 * time.Millisecond)
		return false
	}, 10*time.Second, 10*time.Millisecond)
}

func TestSettingsValidate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, s := range []demo.Settings{{Size: -1}, {Size: demo.MaxSize + 1}, {Latency: -1}, {Latency: time.Minute},
		{FailRate: 1.5}, {HangRate: -0.1}} {
		require.Error(t, b.pool.Configure(s), "%+v", s)
	}
	require.NoError(t, b.pool.Configure(demo.Settings{Size: demo.MaxSize}))
	require.NoError(t, b.pool.Configure(demo.Settings{}))
}

func TestPoolNotRunning(t *testing.T) {
	t.Parallel()
	clock := testutil.FakeClock()
	client, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	_, err = demo.New(demo.Config{})
	require.Error(t, err)
	_, err = demo.New(demo.Config{Client: client, Queue: "Bad{q}"})
	require.Error(t, err)
	pool, err := demo.New(demo.Config{Client: client})
	require.NoError(t, err)
	require.ErrorIs(t, pool.Configure(demo.Settings{Size: 1}), demo.ErrStopped)
	require.NoError(t, pool.Start(t.Context()))
	require.Error(t, pool.Start(t.Context()))
	require.NoError(t, pool.Stop(t.Context()))
	require.ErrorIs(t, pool.Configure(demo.Settings{Size: 1}), demo.ErrStopped)
}

// TestPoolJobLogProgressArtifact: a demo job leaves what its page shows: a
// log line when claimed, one per step, each step's progress with its
// heartbeat, a last line, and on completion the artifact "summary".
func TestPoolJobLogProgressArtifact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jobs, err := b.pool.Enqueue(b.ctx, demo.Batch{Count: 1, Kinds: []string{"thumbnail"}})
	require.NoError(t, err)
	id := jobs[0].ID
	// Latency 2s: 1 s to 3 s of work, in 4 to 6 steps of at most 750 ms.
	require.NoError(t, b.pool.Configure(demo.Settings{Size: 1, Latency: 2 * time.Second}))
	logs := func() queue.LogPage {
		page, err := b.client.Logs(b.ctx, demo.DefaultQueue, id, 0, queue.MaxLogPage)
		require.NoError(t, err)
		return page
	}
	require.Eventually(t, func() bool { return logs().Total == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "claimed by demo-1 (attempt 1 of 3)", logs().Lines[0].Line)
	// Step by step: each step a line and a higher progress.
	var last float64
	for step := 1; ; step++ {
		require.LessOrEqual(t, step, demo.MaxSteps)
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
		b.clock.Advance(time.Second) // more than a step
		var j *queue.Job
		require.Eventually(t, func() bool {
			j, err = b.client.Get(b.ctx, demo.DefaultQueue, id)
			require.NoError(t, err)
			return j.Progress != nil && j.Progress.Percent > last && logs().Total >= int64(1+step)
		}, 10*time.Second, 10*time.Millisecond, "step %d", step)
		if j.Progress.Percent < 100 {
			require.Equal(t, queue.StatusProcessing, j.Status)
			require.EqualValues(t, 1+step, logs().Total, "a line a step")
		}
		require.Regexp(t, `^\w.* \(`+strconv.Itoa(step)+` of \d\)$`, j.Progress.Message)
		require.Regexp(t, `^\w.* \(step `+strconv.Itoa(step)+` of \d\)$`, logs().Lines[step].Line)
		last = j.Progress.Percent
		if last == 100 {
			require.GreaterOrEqual(t, step, demo.MinSteps)
			break
		}
	}
	var j *queue.Job
	require.Eventually(t, func() bool {
		j, err = b.client.Get(b.ctx, demo.DefaultQueue, id)
		require.NoError(t, err)
		return j.Status == queue.StatusCompleted
	}, 10*time.Second, 10*time.Millisecond)
	page := logs()
	require.Regexp(t, `^done in \d`, page.Lines[len(page.Lines)-1].Line)
	for i, l := range page.Lines {
		require.EqualValues(t, i+1, l.Seq)
	}
	require.False(t, page.Truncated)
	arts, err := b.client.Artifacts(b.ctx, demo.DefaultQueue, id)
	require.NoError(t, err)
	var got map[string]struct {
		Kind   string         `json:"kind"`
		Steps  int            `json:"steps"`
		Output map[string]any `json:"output"`
	}
	require.NoError(t, json.Unmarshal(arts, &got))
	require.Equal(t, "thumbnail", got[demo.ArtifactName].Kind)
	require.Equal(t, len(page.Lines)-2, got[demo.ArtifactName].Steps)
	require.Contains(t, got[demo.ArtifactName].Output["thumbnail"], "thumbs/uploads/img_")
}
