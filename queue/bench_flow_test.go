package queue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Bounds of BenchmarkFlowClaim.
const (
	// flowPending is the fewest jobs pending in every sub-benchmark when
	// its timer starts: the same backlog whatever the keys, and one job
	// at least for each of the 100,000 keys.
	flowPending = 100_000
	// flowMaxN bounds b.N: a run asking more claims than this fails
	// rather than filling Redis without end.
	flowMaxN = 2_000_000
	// flowFillers enqueue the backlog at once, MaxBatch jobs a call.
	flowFillers = 4
)

// flowKeyCounts are the sub-benchmarks: 0 is jobs without a flow key,
// the baseline.
var flowKeyCounts = []int{0, 1, 1000, 100_000}

// BenchmarkFlowClaim measures what flow keys cost a claim: one claimer
// claims one job (Claim, Max 1) and completes it (Complete), b.N times,
// from a queue holding at least flowPending pending jobs spread evenly
// over 0 (no flow key), 1, 1,000 or 100,000 keys, the queue's FlowLimits
// a MaxInFlight of 2 (never reached: one job is in flight at a time, so
// the per-key check runs on every claim and never holds one back). The
// backlog is enqueued outside the timer, in batches of MaxBatch, and
// topped up outside it when b.N asks for more claims than are pending.
//
// Reported per op (a claim and a complete): ns/op, redis-µs/op (Redis's
// CPU, INFO cpu), script-µs/op (the time Redis counts to the script
// calls, INFO commandstats: the engine's own work, without the reading
// and writing of requests), and, for 1,000 and 100,000 keys, each as a
// ratio to keys=1 (ns-vs-keys1, redis-vs-keys1, script-vs-keys1), and
// for keys=1 ns/op to keys=0's (ns-vs-nokey): the goal is a claim whose
// cost does not grow with the keys, keys=100000 within ±20 % of keys=1.
// On a shared machine ns/op and redis-µs/op move by tens of percent from
// run to run; compare runs of one invocation, and several. Run it with
//
//	go test -run xxx -bench FlowClaim -benchtime 2000x ./queue/
//
// Each sub-benchmark has a redis-server of its own, flushed when it ends.
func BenchmarkFlowClaim(b *testing.B) {
	type result struct{ ns, redisUs, scriptUs float64 }
	results := map[int]result{}
	for _, keys := range flowKeyCounts {
		env := newFlowEnv(b, keys)
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			require.LessOrEqual(b, b.N, flowMaxN, "b.N is bounded")
			env.topUp(b, b.N)
			rdb := plumbing.Of(env.c).Redis()
			require.NoError(b, rdb.ConfigResetStat(env.ctx).Err())
			cpu0 := redisCPU(b, env.c)
			b.ResetTimer()
			for range b.N {
				got, err := env.c.Claim(env.ctx, env.q, queue.ClaimOptions{Max: 1})
				if err != nil || len(got) != 1 {
					b.Fatalf("claim: %d jobs, %v", len(got), err)
				}
				if err := env.c.Complete(env.ctx, env.q, got[0].ID, got[0].Token, queue.CompleteOptions{}); err != nil {
					b.Fatalf("complete: %v", err)
				}
			}
			b.StopTimer()
			env.pending -= b.N
			res := result{
				ns:       float64(b.Elapsed().Nanoseconds()) / float64(b.N),
				redisUs:  float64((redisCPU(b, env.c) - cpu0).Nanoseconds()) / 1000 / float64(b.N),
				scriptUs: scriptUsec(b, env.ctx, rdb) / float64(b.N),
			}
			results[keys] = res
			b.ReportMetric(res.redisUs, "redis-µs/op")
			b.ReportMetric(res.scriptUs, "script-µs/op")
			switch base, ok := results[1]; {
			case keys == 1:
				if nk, ok := results[0]; ok && nk.ns > 0 {
					b.ReportMetric(res.ns/nk.ns, "ns-vs-nokey")
				}
			case keys > 1 && ok && base.ns > 0 && base.redisUs > 0:
				b.ReportMetric(res.ns/base.ns, "ns-vs-keys1")
				b.ReportMetric(res.redisUs/base.redisUs, "redis-vs-keys1")
				b.ReportMetric(res.scriptUs/max(base.scriptUs, 0.001), "script-vs-keys1")
			}
		})
		env.flush(b)
	}
}

// flowEnv is one sub-benchmark's queue: a redis-server of its own, kept
// across the sub-benchmark's runs (b.N 1, then the asked count), and the
// jobs pending in it.
type flowEnv struct {
	srv     *testutil.Server
	rdb     *redis.Client
	c       *queue.Client
	ctx     context.Context
	q       string
	keys    int
	next    int // the index of the next job enqueued: its key is next % keys
	pending int
}

func newFlowEnv(b *testing.B, keys int) *flowEnv {
	b.Helper()
	srv := testutil.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 2 * flowFillers})
	b.Cleanup(func() { _ = rdb.Close() })
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(b)})
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	e := &flowEnv{srv: srv, rdb: rdb, c: c, ctx: ctx, q: "flow", keys: keys}
	if keys > 0 {
		_, err := c.SetFlowLimits(ctx, e.q, queue.FlowLimits{MaxInFlight: 2})
		require.NoError(b, err)
	}
	return e
}

// topUp makes at least max(n, flowPending) jobs pending, enqueuing the
// missing ones (a whole number of rounds over the keys, so that every key
// keeps as many as the others, give or take one) from flowFillers
// goroutines in batches of MaxBatch. The timer is stopped meanwhile.
func (e *flowEnv) topUp(b *testing.B, n int) {
	b.Helper()
	want := max(n, flowPending)
	if e.pending >= want {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	missing := want - e.pending
	if e.keys > 0 {
		missing = (missing + e.keys - 1) / e.keys * e.keys
	}
	first := e.next
	batches := (missing + queue.MaxBatch - 1) / queue.MaxBatch
	var nextBatch atomic.Int64
	var wg sync.WaitGroup
	for range flowFillers {
		wg.Go(func() {
			nj := make([]queue.NewJob, 0, queue.MaxBatch)
			for range batches {
				i := int(nextBatch.Add(1)) - 1
				if i >= batches || e.ctx.Err() != nil {
					return
				}
				nj = nj[:0]
				for j := i * queue.MaxBatch; j < min((i+1)*queue.MaxBatch, missing); j++ {
					nj = append(nj, queue.NewJob{Queue: e.q, Kind: "flow", FlowKey: e.keyOf(first + j)})
				}
				if _, err := e.c.EnqueueBatch(e.ctx, nj); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	e.next += missing
	e.pending += missing
}

// scriptUsec is the µs Redis counted to script calls (FCALL, EVALSHA,
// EVAL, the commands they call included) since the last CONFIG
// RESETSTAT.
func scriptUsec(tb testing.TB, ctx context.Context, rdb redis.UniversalClient) float64 {
	tb.Helper()
	var us float64
	for name, st := range commandStats(tb, ctx, rdb) {
		if name == "fcall" || name == "evalsha" || name == "eval" {
			us += st.usec
		}
	}
	return us
}

// keyOf is the flow key of the i-th job enqueued ("" without keys).
func (e *flowEnv) keyOf(i int) string {
	if e.keys == 0 {
		return ""
	}
	return fmt.Sprintf("k%06d", i%e.keys)
}

// flush empties the sub-benchmark's server, so that the backlogs of the
// sub-benchmarks done do not weigh on the machine while the next runs.
func (e *flowEnv) flush(b *testing.B) {
	b.Helper()
	require.NoError(b, plumbing.Of(e.c).Redis().FlushAll(e.ctx).Err())
}
