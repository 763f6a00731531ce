package worker_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

type testBundle struct {
	ctx      context.Context
	rdb      redis.UniversalClient
	client   *queue.Client
	clock    *clockwork.FakeClock
	ns       string
	mux      *worker.Mux
	outcomes chan worker.Outcome
}

func setupOn(t *testing.T, rdb redis.UniversalClient) *testBundle {
	t.Helper()
	clock := testutil.FakeClock()
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &testBundle{ctx: ctx, rdb: rdb, client: c, clock: clock, ns: ns, mux: worker.NewMux(),
		outcomes: make(chan worker.Outcome, 10_000)}
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupOn(t, testutil.Redis(t))
}

// start runs a worker over the bundle's mux, stopped at cleanup, and
// answers its Run. Unless cfg says otherwise, its stop gives running
// handlers 10 s.
func (b *testBundle) start(t *testing.T, cfg worker.Config) *lifecycle.Handle {
	t.Helper()
	cfg.Client, cfg.Handler = b.client, b.mux
	if len(cfg.Queues) == 0 {
		cfg.Queues = []worker.QueueConfig{{Name: "q1"}}
	}
	cfg.IdleWait = 50 * time.Millisecond // a stop waits at most this long for idle waits
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, 10*time.Second)
	cfg.OnOutcome = func(o worker.Outcome) { b.outcomes <- o }
	w, err := worker.New(cfg)
	require.NoError(t, err)
	run := lifecycle.Start(b.ctx, w)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = run.Stop(ctx)
	})
	return run
}

func (b *testBundle) enqueue(t *testing.T, nj queue.NewJob) *queue.Job {
	t.Helper()
	nj.Queue = cmpOr(nj.Queue, "q1")
	nj.Kind = cmpOr(nj.Kind, "test")
	e, err := b.client.Enqueue(b.ctx, nj)
	require.NoError(t, err)
	return e.Job
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (b *testBundle) outcome(t *testing.T) worker.Outcome {
	t.Helper()
	select {
	case o := <-b.outcomes:
		return o
	case <-b.ctx.Done():
		t.Fatal("no outcome")
		return worker.Outcome{}
	}
}

// recv receives from ch, failing the test when nothing comes in time.
func recv[T any](t *testing.T, ctx context.Context, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("nothing received: %v", ctx.Err())
		panic("unreachable")
	}
}

func (b *testBundle) get(t *testing.T, queueName, id string) *queue.Job {
	t.Helper()
	j, err := b.client.Get(b.ctx, queueName, id)
	require.NoError(t, err)
	return j
}

// promote makes the due scheduled jobs of queueName pending, as a
// promoter would.
func (b *testBundle) promote(t *testing.T, queueName string) {
	t.Helper()
	_, _, err := b.client.Promote(b.ctx, queueName, 0)
	require.NoError(t, err)
}

// blocker is a handler that signals when it starts and returns when its
// context ends, recording the cause.
type blocker struct {
	started chan *queue.Job
	causes  chan error
}

func newBlocker() *blocker {
	return &blocker{started: make(chan *queue.Job, 100), causes: make(chan error, 100)}
}

func (h *blocker) Work(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
	h.started <- job
	<-ctx.Done()
	h.causes <- context.Cause(ctx)
	return nil, ctx.Err()
}

func TestPanicIsRetriedWithItsStack(t *testing.T) {
	t.Parallel()
	for _, withRecover := range []bool{false, true} {
		t.Run(fmt.Sprint("RecoverMiddleware=", withRecover), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var seen []error // what middleware outside Recover saw
			var mu sync.Mutex
			if withRecover {
				b.mux.Use(func(next worker.Handler) worker.Handler {
					return worker.HandlerFunc(func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
						res, err := next.Work(ctx, j)
						mu.Lock()
						seen = append(seen, err)
						mu.Unlock()
						return res, err
					})
				}, worker.Recover)
			}
			b.mux.HandleFunc("explode", func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
				if j.Attempts == 1 {
					explode()
				}
				return json.RawMessage(`{"ok":true}`), nil
			})
			bo := queue.Backoff{Initial: time.Second, Factor: 2, Max: time.Minute}
			j := b.enqueue(t, queue.NewJob{Kind: "explode", Backoff: &bo})
			b.start(t, worker.Config{})

			o := b.outcome(t)
			var pe *worker.PanicError
			require.ErrorAs(t, o.Err, &pe)
			require.Equal(t, "kaboom", pe.Value)
			require.Equal(t, queue.StatusScheduled, o.Status, "retried")
			requireSoonAfter(t, b.clock.Now().Add(time.Second), o.RunAt, "after the backoff")
			got := b.get(t, "q1", j.ID)
			require.Contains(t, got.LastError, "panic: kaboom")
			require.Contains(t, got.LastError, "worker_test.explode", "the stack is recorded")
			require.Contains(t, got.LastError, "worker_test.go:")

			b.clock.Advance(time.Second)
			b.promote(t, "q1")
			o = b.outcome(t)
			require.NoError(t, o.Err)
			require.Equal(t, queue.StatusCompleted, o.Status)
			got = b.get(t, "q1", j.ID)
			require.Equal(t, queue.StatusCompleted, got.Status)
			require.Equal(t, 2, got.Attempts)
			require.JSONEq(t, `{"ok":true}`, string(got.Result))
			if withRecover {
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, seen, 2)
				require.ErrorAs(t, seen[0], &pe, "middleware outside Recover sees the panic as an error")
			}
		})
	}
}

func explode() { panic("kaboom") }

func TestHandlerOutlivingItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	b.mux.HandleFunc("slow", func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
		if j.Attempts > 1 {
			return json.RawMessage(`{"run":2}`), nil
		}
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return json.RawMessage(`{"late":true}`), nil // succeeds, too late
	})
	j := b.enqueue(t, queue.NewJob{Kind: "slow", Visibility: 3 * time.Second})
	b.start(t, worker.Config{Concurrency: 1, DisableRegistry: true}) // the test counts the clock's timers
	recv(t, b.ctx, started)

	// Another instance, whose clock is past the lease, takes the job back
	// before this worker's next heartbeat. Past it by a minute, not a
	// millisecond: the time the scripts see runs on in real time from each
	// fake clock's first use, so the lease ends 3 s after the claim plus
	// however long this machine took to get there from the setup.
	later := clockwork.NewFakeClockAt(b.clock.Now().Add(3*time.Second + time.Minute))
	other, err := queue.NewClient(queue.Config{Redis: b.rdb, Namespace: b.ns, Clock: later, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	ids, err := other.Reclaim(b.ctx, "q1")
	require.NoError(t, err)
	require.Equal(t, []string{j.ID}, ids)

	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1)) // the heartbeat timer
	b.clock.Advance(time.Second)                            // a third of the visibility
	require.ErrorIs(t, recv(t, b.ctx, causes), queue.ErrLeaseLost)
	// The job runs again at once (it was pending); the two outcomes may
	// come in either order.
	byAttempt := map[int]worker.Outcome{}
	for range 2 {
		o := b.outcome(t)
		byAttempt[o.Job.Attempts] = o
	}
	late := byAttempt[1]
	require.NoError(t, late.Err)
	require.ErrorIs(t, late.StoreErr, queue.ErrLeaseLost, "the late complete is refused")
	require.Empty(t, late.Status)
	require.Equal(t, queue.StatusCompleted, byAttempt[2].Status)
	// Only the second run's result counts.
	got := b.get(t, "q1", j.ID)
	require.Equal(t, 2, got.Attempts)
	require.JSONEq(t, `{"run":2}`, string(got.Result))
}

func TestStopHandsRunningJobsBackAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newBlocker()
	b.mux.Handle("block", h)
	ids := map[string]bool{}
	for range 3 {
		ids[b.enqueue(t, queue.NewJob{Kind: "block", MaxAttempts: 1}).ID] = true
	}
	run := b.start(t, worker.Config{Concurrency: 5, ShutdownTimeout: -1})
	for range 3 {
		recv(t, b.ctx, h.started)
	}
	stopErr := run.Stop(b.ctx)
	require.ErrorIs(t, stopErr, context.DeadlineExceeded, "no time to finish")
	require.Contains(t, stopErr.Error(), "3 running jobs handed back")
	for range 3 {
		require.ErrorIs(t, recv(t, b.ctx, h.causes), worker.ErrStopped)
		o := b.outcome(t)
		require.ErrorIs(t, o.Err, worker.ErrStopped)
		require.Equal(t, queue.StatusPending, o.Status)
	}
	s, err := b.client.Stats(b.ctx, "q1")
	require.NoError(t, err)
	require.Equal(t, int64(3), s.Pending)
	require.Zero(t, s.Processing)
	require.Zero(t, s.FailedTotal, "handed back, not failed")
	// At once: claimable now, with no lease to wait out (and not dead,
	// though each had only one attempt).
	jobs, err := b.client.Claim(b.ctx, "q1", queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	for _, j := range jobs {
		require.True(t, ids[j.ID])
	}
	require.Equal(t, stopErr, run.Stop(b.ctx), "a second Stop answers as the first")
}

func TestStopWaitsForRunningHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	b.mux.HandleFunc("wait", func(ctx context.Context, _ *queue.Job) (json.RawMessage, error) {
		started <- struct{}{}
		<-release
		causes <- context.Cause(ctx)
		return json.RawMessage(`1`), nil
	})
	j := b.enqueue(t, queue.NewJob{Kind: "wait"})
	run := b.start(t, worker.Config{})
	recv(t, b.ctx, started)
	stopped := make(chan error, 1)
	go func() { stopped <- run.Stop(b.ctx) }()
	close(release)
	require.NoError(t, recv(t, b.ctx, stopped))
	require.NoError(t, recv(t, b.ctx, causes), "a graceful stop does not cancel the handler")
	// The completion was flushed before Stop returned.
	require.Equal(t, queue.StatusCompleted, b.get(t, "q1", j.ID).Status)
}

func TestCanceledProcessingJobCancelsItsHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newBlocker()
	b.mux.Handle("block", h)
	j := b.enqueue(t, queue.NewJob{Kind: "block", Visibility: 30 * time.Second})
	b.start(t, worker.Config{DisableRegistry: true}) // the test counts the clock's timers
	recv(t, b.ctx, h.started)
	got, err := b.client.Cancel(b.ctx, "q1", j.ID)
	require.NoError(t, err)
	require.True(t, got.CancelRequested)
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
	b.clock.Advance(10 * time.Second) // the next heartbeat sees it
	require.ErrorIs(t, recv(t, b.ctx, h.causes), worker.ErrJobCanceled)
	o := b.outcome(t)
	require.Equal(t, queue.StatusCanceled, o.Status)
	done := b.get(t, "q1", j.ID)
	require.Equal(t, queue.StatusCanceled, done.Status)
	s, err := b.client.Stats(b.ctx, "q1")
	require.NoError(t, err)
	require.Zero(t, s.Processing+s.Pending+s.Scheduled+s.FailedTotal)
}

func TestTimeoutCancelsTheHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newBlocker()
	b.mux.Handle("slow", h)
	b.mux.HandleFunc("fast", func(context.Context, *queue.Job) (json.RawMessage, error) { return nil, nil })
	j := b.enqueue(t, queue.NewJob{Kind: "slow", Visibility: time.Minute})
	b.start(t, worker.Config{Timeout: time.Hour, KindTimeouts: map[string]time.Duration{"slow": 5 * time.Second},
		DisableRegistry: true}) // the test counts the clock's timers
	recv(t, b.ctx, h.started)
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 2)) // heartbeat and timeout
	b.clock.Advance(5 * time.Second)
	require.ErrorIs(t, recv(t, b.ctx, h.causes), worker.ErrTimeout)
	o := b.outcome(t)
	require.ErrorIs(t, o.Err, context.Canceled)
	require.Equal(t, queue.StatusScheduled, o.Status, "a timeout is retried")
	require.Contains(t, b.get(t, "q1", j.ID).LastError, "timed out after 5s")
}

func TestErrorsDecideTheRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mux.HandleFunc("bad-input", func(context.Context, *queue.Job) (json.RawMessage, error) {
		return nil, worker.SkipRetry(errors.New("bad input"))
	})
	b.mux.HandleFunc("rate-limited", func(context.Context, *queue.Job) (json.RawMessage, error) {
		return nil, worker.RetryAfter(90*time.Second, errors.New("rate limited"))
	})
	b.mux.HandleFunc("flaky", func(context.Context, *queue.Job) (json.RawMessage, error) {
		return nil, errors.New("flaky")
	})
	bo := queue.Backoff{Initial: 4 * time.Second, Factor: 2, Max: time.Minute}
	dead := b.enqueue(t, queue.NewJob{Kind: "bad-input", MaxAttempts: 5})
	later := b.enqueue(t, queue.NewJob{Kind: "rate-limited", MaxAttempts: 5})
	flaky := b.enqueue(t, queue.NewJob{Kind: "flaky", MaxAttempts: 5, Backoff: &bo})
	unknown := b.enqueue(t, queue.NewJob{Kind: "nobody-handles-this", MaxAttempts: 5, Backoff: &bo})
	b.start(t, worker.Config{})
	byID := map[string]worker.Outcome{}
	for range 4 {
		o := b.outcome(t)
		byID[o.Job.ID] = o
	}
	now := b.clock.Now()

	require.Equal(t, queue.StatusDead, byID[dead.ID].Status, "SkipRetry goes dead")
	got := b.get(t, "q1", dead.ID)
	require.Equal(t, queue.StatusDead, got.Status)
	require.Equal(t, 1, got.Attempts)
	require.Equal(t, "bad input", got.LastError)

	require.Equal(t, queue.StatusScheduled, byID[later.ID].Status)
	// 90 s after the failure, by Redis's clock (which follows the fake one
	// and runs on in real time between its steps)
	requireSoonAfter(t, now.Add(90*time.Second), byID[later.ID].RunAt, "RetryAfter sets run_at")
	require.Equal(t, byID[later.ID].RunAt, b.get(t, "q1", later.ID).RunAt)

	requireSoonAfter(t, now.Add(4*time.Second), byID[flaky.ID].RunAt, "a plain error takes the backoff")
	require.ErrorIs(t, byID[unknown.ID].Err, worker.ErrUnknownKind)
	require.Equal(t, queue.StatusScheduled, byID[unknown.ID].Status)
}

// No promoter runs in these two tests: the worker wakes at the due time
// it knows of (a retry it asked for, or the earliest scheduled job its
// last claim saw) and its claim promotes the job.
func TestRetryRunsAtItsTimeWithNoPromoter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runs := make(chan time.Time, 10)
	b.mux.HandleFunc("again", func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
		runs <- b.clock.Now()
		if j.Attempts == 1 {
			return nil, worker.RetryAfter(time.Second+300*time.Microsecond, errors.New("later"))
		}
		return nil, nil
	})
	j := b.enqueue(t, queue.NewJob{Kind: "again"})
	b.start(t, worker.Config{})
	first := recv(t, b.ctx, runs)
	o := b.outcome(t)
	require.Equal(t, queue.StatusScheduled, o.Status)
	// Due 1.0003 s after Redis recorded the failure, by Redis's clock
	// (which follows the fake one and runs on in real time meanwhile):
	// in the millisecond o.RunAt.
	requireSoonAfter(t, first.Add(time.Second+300*time.Microsecond), o.RunAt)
	b.clock.Advance(o.RunAt.Add(time.Millisecond).Sub(b.clock.Now()))
	require.Equal(t, o.RunAt.Add(time.Millisecond), recv(t, b.ctx, runs), "run again once due")
	require.Equal(t, j.ID, o.Job.ID)
	require.Equal(t, queue.StatusCompleted, b.outcome(t).Status)
}

func TestScheduledJobRunsAtItsTimeWithNoPromoter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runs := make(chan time.Time, 10)
	b.mux.HandleFunc("later", func(context.Context, *queue.Job) (json.RawMessage, error) {
		runs <- b.clock.Now()
		return nil, nil
	})
	b.start(t, worker.Config{})
	// The worker hears of the scheduled job from a claim: its first one,
	// or the one the immediate job wakes it for.
	j := b.enqueue(t, queue.NewJob{Kind: "later", RunAt: b.clock.Now().Add(2 * time.Second)})
	b.enqueue(t, queue.NewJob{Kind: "later"})
	recv(t, b.ctx, runs)
	require.Equal(t, queue.StatusCompleted, b.outcome(t).Status)
	b.clock.Advance(2 * time.Second)
	require.Equal(t, j.RunAt, recv(t, b.ctx, runs))
	o := b.outcome(t)
	require.Equal(t, j.ID, o.Job.ID)
	require.Equal(t, queue.StatusCompleted, o.Status)
}

// On the real clock, scheduled jobs due a few ms apart, which the worker
// claims ahead (Config.Lookahead): every handler starts when its job is
// due by Redis's clock, never before, read from Redis as it starts.
func TestJobsClaimedAheadNeverStartEarly(t *testing.T) {
	t.Parallel()
	rdb := testutil.Redis(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	const n = 40
	type start struct{ due, redis time.Time }
	starts := make(chan start, n)
	handler := worker.HandlerFunc(func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			return nil, err
		}
		var due time.Time
		if err := json.Unmarshal(j.Payload, &due); err != nil {
			return nil, err
		}
		if !due.IsZero() {
			starts <- start{due, now}
		}
		return nil, nil
	})
	w, err := worker.New(worker.Config{Client: c, Handler: handler, Queues: []worker.QueueConfig{{Name: "q1"}},
		Lookahead: queue.MaxAhead, IdleWait: 50 * time.Millisecond, DisableRegistry: true})
	require.NoError(t, err)
	run := lifecycle.Start(ctx, w)
	t.Cleanup(func() { require.NoError(t, run.Stop(context.Background())) })
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	first := now.Add(300 * time.Millisecond)
	for i := range n {
		due := first.Add(time.Duration(i)*3*time.Millisecond + time.Duration(i)*17*time.Microsecond)
		p, err := json.Marshal(due)
		require.NoError(t, err)
		_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q1", Kind: "at", RunAt: due, Payload: p})
		require.NoError(t, err)
	}
	// No promoter runs: the worker hears of the first due time from the
	// claim this job wakes it for, and of each next from the claim before.
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q1", Kind: "at", Payload: json.RawMessage(`"0001-01-01T00:00:00Z"`)})
	require.NoError(t, err)
	for range n {
		select {
		case s := <-starts:
			require.False(t, s.redis.Before(s.due), "started at %s by Redis's clock, due at %s", s.redis, s.due)
		case <-ctx.Done():
			t.Fatal("not every job ran")
		}
	}
}

// A worker on a host whose clock is off by minutes: a RetryAfter delay
// counts on Redis's clock, so the retry falls due that long after the
// handler returned, not at once (a clock behind) or minutes late (ahead).
func TestRetryAfterCountsOnRedisClockOnASkewedHost(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-5 * time.Minute, 5 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			rdb := testutil.Redis(t)
			c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: testutil.SkewedClock(skew)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t.Cleanup(cancel)
			returned := make(chan time.Time, 1) // Redis's time as the handler returns
			handler := worker.HandlerFunc(func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
				now, err := rdb.Time(ctx).Result()
				if err != nil {
					return nil, err
				}
				returned <- now
				return nil, worker.RetryAfter(2*time.Second, errors.New("later"))
			})
			outcomes := make(chan worker.Outcome, 1)
			w, err := worker.New(worker.Config{Client: c, Handler: handler, Queues: []worker.QueueConfig{{Name: "q1"}},
				DisableRegistry: true, OnOutcome: func(o worker.Outcome) { outcomes <- o }})
			require.NoError(t, err)
			run := lifecycle.Start(ctx, w)
			t.Cleanup(func() { require.NoError(t, run.Stop(context.Background())) })
			_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q1", Kind: "k"})
			require.NoError(t, err)
			from := recv(t, ctx, returned)
			o := recv(t, ctx, outcomes)
			to := testutil.RedisTime(t, rdb)
			require.NoError(t, o.StoreErr)
			require.Equal(t, queue.StatusScheduled, o.Status)
			testutil.RequireDueAfter(t, o.RunAt, from, to, 2*time.Second)
		})
	}
}

func TestStrictPriorityServesTheFirstQueueFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var order []string
	b.mux.HandleFunc("rec", func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
		mu.Lock()
		order = append(order, j.Queue)
		mu.Unlock()
		return nil, nil
	})
	for range 5 {
		b.enqueue(t, queue.NewJob{Queue: "low", Kind: "rec"})
	}
	for range 5 {
		b.enqueue(t, queue.NewJob{Queue: "high", Kind: "rec"})
	}
	b.start(t, worker.Config{Concurrency: 1, Priority: worker.Strict,
		Queues: []worker.QueueConfig{{Name: "high"}, {Name: "low"}}})
	for range 10 {
		require.Equal(t, queue.StatusCompleted, b.outcome(t).Status)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"high", "high", "high", "high", "high", "low", "low", "low", "low", "low"}, order)
}

func TestWeightedPrioritySharesByWeight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mux.HandleFunc("rec", func(context.Context, *queue.Job) (json.RawMessage, error) { return nil, nil })
	for _, q := range []string{"heavy", "light"} {
		jobs := make([]queue.NewJob, 200)
		for i := range jobs {
			jobs[i] = queue.NewJob{Queue: q, Kind: "rec"}
		}
		_, err := b.client.EnqueueBatch(b.ctx, jobs)
		require.NoError(t, err)
	}
	b.start(t, worker.Config{Concurrency: 1,
		Queues: []worker.QueueConfig{{Name: "light", Weight: 1}, {Name: "heavy", Weight: 3}}})
	heavy := 0
	for range 100 {
		if b.outcome(t).Job.Queue == "heavy" {
			heavy++
		}
	}
	// 75 expected; the bounds are more than 4.5 standard deviations away.
	require.InDelta(t, 75, heavy, 20, "heavy ran %d of the first 100", heavy)
}

func TestPerQueueConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newBlocker()
	b.mux.Handle("block", h)
	for range 4 {
		b.enqueue(t, queue.NewJob{Queue: "capped", Kind: "block"})
	}
	b.start(t, worker.Config{Concurrency: 10, Queues: []worker.QueueConfig{{Name: "capped", Concurrency: 2}}})
	recv(t, b.ctx, h.started)
	recv(t, b.ctx, h.started)
	// Two run; two wait, though the worker has slots to spare.
	require.Eventually(t, func() bool {
		s, err := b.client.Stats(b.ctx, "capped")
		return err == nil && s.Processing == 2 && s.Pending == 2
	}, 5*time.Second, 10*time.Millisecond)
	require.Empty(t, h.started)
}

func TestManyJobsCompleteInBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mux.HandleFunc("noop", func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
		return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, j.Attempts)), nil
	})
	const n = 2000
	jobs := make([]queue.NewJob, queue.MaxBatch)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "q1", Kind: "noop"}
	}
	for range n / queue.MaxBatch {
		_, err := b.client.EnqueueBatch(b.ctx, jobs)
		require.NoError(t, err)
	}
	b.start(t, worker.Config{Concurrency: 50})
	for range n {
		o := b.outcome(t)
		require.Equal(t, queue.StatusCompleted, o.Status, "%+v", o)
	}
	s, err := b.client.Stats(b.ctx, "q1")
	require.NoError(t, err)
	require.Equal(t, int64(n), s.CompletedTotal)
	require.Zero(t, s.Pending+s.Processing)
}

// A result the store refuses (over its cap) fails its job's attempt with
// the reason, and only that job's: the completes of the others, in the
// same batch or not, go through.
func TestARefusedResultFailsOnlyItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mux.HandleFunc("good", func(context.Context, *queue.Job) (json.RawMessage, error) {
		return json.RawMessage(`{"ok":true}`), nil
	})
	b.mux.HandleFunc("bad", func(context.Context, *queue.Job) (json.RawMessage, error) {
		return json.RawMessage(`"` + strings.Repeat("x", queue.DefaultMaxPayloadBytes) + `"`), nil
	})
	jobs := make([]queue.NewJob, 0, 20)
	for i := range 20 {
		jobs = append(jobs, queue.NewJob{Queue: "q1", Kind: map[bool]string{true: "bad", false: "good"}[i%5 == 0], MaxAttempts: 1})
	}
	_, err := b.client.EnqueueBatch(b.ctx, jobs)
	require.NoError(t, err)
	b.start(t, worker.Config{Concurrency: 20})
	for range 20 {
		o := b.outcome(t)
		if o.Job.Kind == "good" {
			require.Equal(t, queue.StatusCompleted, o.Status, "%+v", o)
			require.NoError(t, o.StoreErr)
			continue
		}
		require.Equal(t, queue.StatusDead, o.Status, "%+v", o)
		require.ErrorIs(t, o.Err, queue.ErrPayloadTooLarge)
		got := b.get(t, "q1", o.Job.ID)
		require.Equal(t, queue.StatusDead, got.Status)
		require.Contains(t, got.LastError, "the handler's result was refused")
	}
	s, err := b.client.Stats(b.ctx, "q1")
	require.NoError(t, err)
	require.Equal(t, int64(16), s.CompletedTotal)
	require.Equal(t, int64(4), s.Dead)
}

func TestWorkerOnCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	b := setupOn(t, testutil.Cluster(t))
	b.mux.HandleFunc("noop", func(context.Context, *queue.Job) (json.RawMessage, error) { return nil, nil })
	qs := []string{"alpha", "beta", "gamma"} // in different slots
	b.start(t, worker.Config{Concurrency: 8, Queues: []worker.QueueConfig{{Name: qs[0]}, {Name: qs[1]}, {Name: qs[2]}}})
	for i := range 300 {
		b.enqueue(t, queue.NewJob{Queue: qs[i%3], Kind: "noop"})
	}
	for range 300 {
		require.Equal(t, queue.StatusCompleted, b.outcome(t).Status)
	}
}

func TestConfigIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, cfg := range []worker.Config{
		{Handler: b.mux},
		{Client: b.client},
		{Client: b.client, Handler: b.mux, Concurrency: -1},
		{Client: b.client, Handler: b.mux, Queues: []worker.QueueConfig{{Name: "Bad{Name}"}}},
		{Client: b.client, Handler: b.mux, Queues: []worker.QueueConfig{{Name: "a"}, {Name: "a"}}},
		{Client: b.client, Handler: b.mux, Queues: []worker.QueueConfig{{Name: "a", Weight: 1001}}},
		{Client: b.client, Handler: b.mux, IdleWait: time.Hour},
		{Client: b.client, Handler: b.mux, MaxClaim: queue.MaxBatch + 1},
		{Client: b.client, Handler: b.mux, KindTimeouts: map[string]time.Duration{"k": -1}},
		{Client: b.client, Handler: b.mux, Lookahead: queue.MaxAhead + time.Millisecond},
	} {
		_, err := worker.New(cfg)
		require.Error(t, err, "%+v", cfg)
	}
	w, err := worker.New(worker.Config{Client: b.client, Handler: b.mux})
	require.NoError(t, err)
	ended, cancel := context.WithCancel(b.ctx)
	cancel()
	require.NoError(t, w.Run(ended), "a Run whose ctx has ended stops at once, cleanly")
	require.Error(t, w.Run(b.ctx), "a worker runs once")
}

func TestMux(t *testing.T) {
	t.Parallel()
	mux := worker.NewMux()
	var trail []string
	mw := func(name string) worker.Middleware {
		return func(next worker.Handler) worker.Handler {
			return worker.HandlerFunc(func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
				trail = append(trail, name)
				return next.Work(ctx, j)
			})
		}
	}
	mux.Use(mw("outer"), mw("inner"))
	mux.HandleFunc("b.kind", func(context.Context, *queue.Job) (json.RawMessage, error) {
		trail = append(trail, "handler")
		return json.RawMessage(`"b"`), nil
	})
	mux.HandleFunc("a.kind", func(context.Context, *queue.Job) (json.RawMessage, error) { return nil, nil })
	require.Equal(t, []string{"a.kind", "b.kind"}, mux.Kinds())
	res, err := mux.Work(t.Context(), &queue.Job{Kind: "b.kind"})
	require.NoError(t, err)
	require.Equal(t, `"b"`, string(res))
	require.Equal(t, []string{"outer", "inner", "handler"}, trail)
	trail = nil
	_, err = mux.Work(t.Context(), &queue.Job{Kind: "c.kind"})
	require.ErrorIs(t, err, worker.ErrUnknownKind)
	require.Equal(t, []string{"outer", "inner"}, trail, "middleware sees unknown kinds too")
	require.Panics(t, func() { mux.HandleFunc("a.kind", nil) })
	require.Panics(t, func() { mux.Handle("bad kind", worker.HandlerFunc(nil)) })

	// Recover turns a panic into a *PanicError carrying the stack.
	_, err = worker.Recover(worker.HandlerFunc(func(context.Context, *queue.Job) (json.RawMessage, error) {
		explode()
		return nil, nil
	})).Work(t.Context(), &queue.Job{})
	var pe *worker.PanicError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, string(pe.Stack), "worker_test.explode")
}

// TestNoGoroutineLeft runs a worker through busy, idle, a stop that hands
// jobs back, and checks that no goroutine outlives it. It is not parallel:
// top-level parallel tests wait until it is done, so the goroutines it
// finds are its own.
func TestNoGoroutineLeft(t *testing.T) {
	rdb := testutil.Redis(t) // starts the shared server before the snapshot
	require.NoError(t, rdb.Ping(t.Context()).Err())
	ignore := goleak.IgnoreCurrent()

	func() {
		b := setupOn(t, rdb)
		h := newBlocker()
		b.mux.Handle("block", h)
		b.mux.HandleFunc("noop", func(context.Context, *queue.Job) (json.RawMessage, error) { return nil, nil })
		w, err := worker.New(worker.Config{Client: b.client, Handler: b.mux, Concurrency: 4, IdleWait: 50 * time.Millisecond,
			ShutdownTimeout: -1, Queues: []worker.QueueConfig{{Name: "a"}, {Name: "b"}},
			OnOutcome: func(o worker.Outcome) { b.outcomes <- o }})
		require.NoError(t, err)
		run := lifecycle.Start(b.ctx, w)
		for i := range 20 {
			b.enqueue(t, queue.NewJob{Queue: []string{"a", "b"}[i%2], Kind: "noop"})
		}
		for range 20 {
			b.outcome(t)
		}
		b.enqueue(t, queue.NewJob{Queue: "b", Kind: "block"})
		recv(t, b.ctx, h.started)
		require.ErrorIs(t, run.Stop(b.ctx), context.DeadlineExceeded)
		require.NoError(t, b.client.Close())
	}()
	goleak.VerifyNone(t, ignore)
}

// requireSoonAfter checks that got, a time Redis's clock decided, is want
// (on the fake clock) or a little after: under a fake clock Redis's clock
// reads as the fake one plus the real time the test has taken (see
// queue.Config.Clock).
func requireSoonAfter(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.False(t, got.Before(want.Truncate(time.Millisecond)), msgAndArgs...)
	require.Less(t, got.Sub(want), time.Second, msgAndArgs...)
}
