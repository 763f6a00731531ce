package dispatch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

// flight counts the requests (or runs) under way at once, and the most.
type flight struct {
	now, most atomic.Int64
	done      atomic.Int64
	mu        sync.Mutex
	at        []time.Time
}

func (f *flight) begin() {
	n := f.now.Add(1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
}

func (f *flight) end() {
	f.now.Add(-1)
	f.done.Add(1)
	f.mu.Lock()
	f.at = append(f.at, time.Now())
	f.mu.Unlock()
}

// instances starts n dispatchers on namespace ns, each with a client of
// its own (as separate processes would have), stopped at cleanup.
func instances(tb testing.TB, ns string, n int) []*dispatch.Dispatcher {
	tb.Helper()
	out := make([]*dispatch.Dispatcher, n)
	for i := range out {
		c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(tb), Namespace: ns, DisableEvents: true})
		require.NoError(tb, err)
		tb.Cleanup(func() { _ = c.Close() })
		d, err := dispatch.New(dispatch.Config{Client: c, Guard: loopback, RefreshInterval: 50 * time.Millisecond})
		require.NoError(tb, err)
		h := lifecycle.Start(context.Background(), d)
		tb.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = h.Stop(sctx)
		})
		out[i] = d
	}
	return out
}

func enqueueMany(tb testing.TB, c *queue.Client, q string, n int) {
	tb.Helper()
	jobs := make([]queue.NewJob, 0, queue.MaxBatch)
	for i := range n {
		jobs = append(jobs, queue.NewJob{Queue: q, Kind: "k", Payload: json.RawMessage(`{}`)})
		if len(jobs) == queue.MaxBatch || i == n-1 {
			_, err := c.EnqueueBatch(context.Background(), jobs)
			require.NoError(tb, err)
			jobs = jobs[:0]
		}
	}
}

// Three dispatchers and a pull worker on one queue limited to 5 in
// flight: the receiver and the worker together never see more than 5 at
// once, although each dispatcher would run 50; and every job is done.
func TestLimitsMaxInFlightAcrossDispatchersAndWorkers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var f flight
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.begin()
		defer f.end()
		time.Sleep(5 * time.Millisecond)
	}))
	t.Cleanup(rc.Close)
	store := dispatch.NewStore(c, loopback)
	_, err = store.Put(ctx, "lim", dispatch.QueueConfig{Target: dispatch.Target{URL: rc.URL}, Concurrency: 50})
	require.NoError(t, err)
	_, err = c.SetLimits(ctx, "lim", queue.Limits{MaxInFlight: 5})
	require.NoError(t, err)
	instances(t, ns, 3)
	// A pull worker on the same queue: the limit is the queue's.
	w, err := worker.New(worker.Config{Client: c, Queues: []worker.QueueConfig{{Name: "lim"}}, Concurrency: 20,
		Handler: worker.HandlerFunc(func(context.Context, *queue.Job) (json.RawMessage, error) {
			f.begin()
			defer f.end()
			time.Sleep(5 * time.Millisecond)
			return nil, nil
		})})
	require.NoError(t, err)
	wh := lifecycle.Start(context.Background(), w)
	t.Cleanup(func() { _ = wh.Stop(context.Background()) })

	const n = 300
	enqueueMany(t, c, "lim", n)
	deadline := time.Now().Add(60 * time.Second)
	for f.done.Load() < n {
		require.True(t, time.Now().Before(deadline), "%d of %d done", f.done.Load(), n)
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, f.most.Load(), int64(5), "most in flight at once")
	require.GreaterOrEqual(t, f.most.Load(), int64(3), "the limit is used, not only respected")
}

// Three dispatchers on one queue limited to 100/s (burst 10): over any
// prefix of the run, deliveries never exceed burst + rate × elapsed (the
// bucket's bound, whatever the machine's load); and they keep up with the
// rate well enough to finish. The exact rate over 10 s is a benchmark
// (BenchmarkLimitedRate): a 2-core shared machine cannot promise ±5% in a
// unit test.
func TestLimitsRateAcrossDispatchers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var f flight
	rc := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { f.begin(); f.end() }))
	t.Cleanup(rc.Close)
	_, err = dispatch.NewStore(c, loopback).Put(ctx, "rate", dispatch.QueueConfig{Target: dispatch.Target{URL: rc.URL}})
	require.NoError(t, err)
	const rate, burst, n = 100, 10, 150
	_, err = c.SetLimits(ctx, "rate", queue.Limits{Rate: rate, Burst: burst})
	require.NoError(t, err)
	start := time.Now() // before any claim: the bucket's clock starts later
	enqueueMany(t, c, "rate", n)
	instances(t, ns, 3)
	deadline := time.Now().Add(60 * time.Second)
	for f.done.Load() < n {
		require.True(t, time.Now().Before(deadline), "%d of %d done", f.done.Load(), n)
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, at := range f.at {
		bound := burst + rate*at.Sub(start).Seconds() + 1 // +1: ms rounding of the bucket's clock
		require.LessOrEqual(t, float64(i+1), bound, "delivery %d at %s", i+1, at.Sub(start))
	}
}
