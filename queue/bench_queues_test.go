package queue_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// BenchmarkTickWithIdleQueues measures what one promoter tick and one
// reclaimer sweep cost Redis, as the Promoter and Reclaimer run them: read
// the due and sweep indexes, then promote and reclaim the queues they
// name. It runs them in two namespaces on one server: "alone" holds one
// busy queue (100 jobs due and 100 lapsed leases each tick), "crowded" a
// busy queue likewise beside 1,000 idle ones (each with a job scheduled and a
// lease held an hour ahead, so each is in both indexes). A tick's cost
// follows the queues with work: crowded/alone is about 1. For scale it
// also reports the reconcile (every queue looked at, which the Promoter
// and Reclaimer do every ReconcileInterval, 5 minutes by default) of the
// crowded namespace.
func BenchmarkTickWithIdleQueues(b *testing.B) {
	const idle = 1000
	base, ctx := benchClient(b)
	client := func(ns string) *queue.Client {
		c, err := queue.NewClient(queue.Config{Redis: plumbing.Of(base).Redis(), Namespace: plumbing.Of(base).Namespace() + ns, MaxQueues: 2 * idle})
		require.NoError(b, err)
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	alone, crowded := client("alone"), client("crowded")
	for i := range idle {
		q := fmt.Sprintf("idle%04d", i)
		_, err := crowded.EnqueueBatch(ctx, []queue.NewJob{{Queue: q, Kind: "k", Delay: time.Hour}, {Queue: q, Kind: "k"}})
		require.NoError(b, err)
		_, err = crowded.Claim(ctx, q, queue.ClaimOptions{Visibility: time.Hour})
		require.NoError(b, err)
	}
	// busy readies a tick's work in a busy queue of c, a new one each
	// tick (the last one's is left with nothing scheduled or claimed): 100
	// jobs due and 100 lapsed leases.
	var busyQueue string
	busy := func(c *queue.Client, i int) {
		busyQueue = fmt.Sprintf("busy%04d", i)
		batch := make([]queue.NewJob, 100)
		for i := range batch {
			batch[i] = queue.NewJob{Queue: busyQueue, Kind: "k", Visibility: queue.MinVisibility}
		}
		_, err := c.EnqueueBatch(ctx, batch)
		require.NoError(b, err)
		_, err = c.Claim(ctx, busyQueue, queue.ClaimOptions{Max: 100})
		require.NoError(b, err)
		for i := range batch {
			batch[i] = queue.NewJob{Queue: busyQueue, Kind: "k", Delay: time.Millisecond}
		}
		_, err = c.EnqueueBatch(ctx, batch)
		require.NoError(b, err)
	}
	// tick is one promoter tick and one sweep: what they do between two
	// reconciles.
	tick := func(c *queue.Client) {
		due, err := plumbing.Of(c).Due(ctx, 2*time.Second, 0, 1000)
		require.NoError(b, err)
		promoted := 0
		for _, d := range due {
			n, _, err := c.Promote(ctx, d.Queue, 2*time.Second)
			require.NoError(b, err)
			promoted += n
		}
		require.Equal(b, 100, promoted)
		qs, err := c.SweepDue(ctx)
		require.NoError(b, err)
		require.Equal(b, []string{busyQueue}, qs)
		ids, err := c.Reclaim(ctx, busyQueue)
		require.NoError(b, err)
		require.Len(b, ids, 100)
	}
	// reconcile is what a reconcile of both does: every queue passed over.
	reconcile := func(c *queue.Client) {
		qs, err := c.Queues(ctx)
		require.NoError(b, err)
		for _, q := range qs {
			_, _, err := c.Promote(ctx, q, 2*time.Second)
			require.NoError(b, err)
		}
		work, _, err := c.SweepPlan(ctx, qs)
		require.NoError(b, err)
		for _, q := range work {
			_, err := c.Reclaim(ctx, q)
			require.NoError(b, err)
		}
	}
	commands := func() int64 {
		n, err := strconv.ParseInt(infoField(b, plumbing.Of(base).Redis(), "stats", "total_commands_processed"), 10, 64)
		require.NoError(b, err)
		return n
	}
	measure := func(c *queue.Client, i int, f func(*queue.Client)) (time.Duration, int64) {
		busy(c, i)
		time.Sleep(queue.MinVisibility + 10*time.Millisecond)
		cpu0, cmd0 := redisCPU(b, c), commands()
		f(c)
		return redisCPU(b, c) - cpu0, commands() - cmd0 - 2 // less the INFO calls of the measure
	}
	reconcile(crowded) // as a Reclaimer's and a Promoter's first pass: every queue is parked
	var cpuAlone, cpuCrowded, cpuReconcile time.Duration
	var cmdAlone, cmdCrowded, cmdReconcile int64
	for i := range b.N {
		cpu, cmd := measure(alone, i, tick)
		cpuAlone, cmdAlone = cpuAlone+cpu, cmdAlone+cmd
		cpu, cmd = measure(crowded, i, tick)
		cpuCrowded, cmdCrowded = cpuCrowded+cpu, cmdCrowded+cmd
		cpu, cmd = measure(crowded, b.N+i, reconcile)
		cpuReconcile, cmdReconcile = cpuReconcile+cpu, cmdReconcile+cmd
	}
	n := float64(b.N)
	b.ReportMetric(float64(cpuAlone.Microseconds())/n, "alone-redis-µs/tick")
	b.ReportMetric(float64(cpuCrowded.Microseconds())/n, "crowded-redis-µs/tick")
	b.ReportMetric(float64(cpuCrowded)/float64(cpuAlone), "crowded/alone")
	b.ReportMetric(float64(cmdAlone)/n, "alone-commands/tick")
	b.ReportMetric(float64(cmdCrowded)/n, "crowded-commands/tick")
	b.ReportMetric(float64(cpuReconcile.Microseconds())/n, "crowded-reconcile-redis-µs")
	b.ReportMetric(float64(cmdReconcile)/n, "crowded-reconcile-commands")
}
