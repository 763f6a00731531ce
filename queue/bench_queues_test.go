package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// BenchmarkSweepWithIdleQueues measures what a reclaim sweep costs Redis
// when 1,000 idle queues (each with a job scheduled an hour ahead) sit
// beside one busy queue with lapsed leases: the planned sweep (what the
// Reclaimer runs) against the sweep of every queue (what it ran before,
// and still runs one sweep in twelve). The planned sweep's cost follows
// the queues with work, not the queues ever used.
func BenchmarkSweepWithIdleQueues(b *testing.B) {
	const idle = 1000
	base, ctx := benchClient(b)
	c, err := queue.NewClient(queue.Config{Redis: base.Redis(), Namespace: base.Namespace(), MaxQueues: 2 * idle})
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	qs := make([]string, 0, idle+1)
	for i := range idle {
		q := fmt.Sprintf("idle%04d", i)
		qs = append(qs, q)
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k", Delay: time.Hour})
		require.NoError(b, err)
	}
	qs = append(qs, "busy")
	lapse := func() {
		batch := make([]queue.NewJob, 100)
		for i := range batch {
			batch[i] = queue.NewJob{Queue: "busy", Kind: "k", Visibility: queue.MinVisibility}
		}
		_, err := c.EnqueueBatch(ctx, batch)
		require.NoError(b, err)
		_, err = c.Claim(ctx, "busy", queue.ClaimOptions{Max: 100})
		require.NoError(b, err)
		time.Sleep(queue.MinVisibility + 10*time.Millisecond)
	}
	var planned, full time.Duration
	for range b.N {
		lapse()
		cpu0 := redisCPU(b, c)
		work, _, err := c.SweepPlan(ctx, qs)
		require.NoError(b, err)
		require.Equal(b, []string{"busy"}, work)
		for _, q := range work {
			ids, err := c.Reclaim(ctx, q)
			require.NoError(b, err)
			require.Len(b, ids, 100)
		}
		planned += redisCPU(b, c) - cpu0

		lapse()
		cpu0 = redisCPU(b, c)
		for _, q := range qs {
			_, err := c.Reclaim(ctx, q)
			require.NoError(b, err)
		}
		full += redisCPU(b, c) - cpu0
	}
	b.ReportMetric(float64(planned.Microseconds())/float64(b.N), "planned-redis-µs/sweep")
	b.ReportMetric(float64(full.Microseconds())/float64(b.N), "every-queue-redis-µs/sweep")
	b.ReportMetric(float64(full)/float64(planned), "x-cheaper")
}
