package workflow

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// fanGraph is a fan-out/fan-in of n nodes: a root, n-2 middles over four
// queues, a sink.
func fanGraph(n int) Spec {
	nodes := []Node{node("root", "bq-0")}
	mids := make([]string, 0, n-2)
	for i := range n - 2 {
		name := "m" + strconv.Itoa(i)
		mids = append(mids, name)
		nodes = append(nodes, node(name, "bq-"+strconv.Itoa(i%4), "root"))
	}
	return Spec{Nodes: append(nodes, node("sink", "bq-1", mids...))}
}

var benchQueues = []string{"bq-0", "bq-1", "bq-2", "bq-3"}

func benchEnv(b *testing.B) (*redis.Client, *Client, *Releaser) {
	srv := testutil.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	q, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: "bench", DisableEvents: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	wf, err := New(Config{Queue: q})
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewReleaser(ReleaserConfig{Client: wf})
	if err != nil {
		b.Fatal(err)
	}
	return rdb, wf, r
}

// BenchmarkEnqueue1000Nodes enqueues a fan-out/fan-in of 1,000 nodes over
// four queues: validation, the workflow's hash, the jobs, the start, the
// root's release, and the workflow read back (the goal is 50 ms).
// Reported: the wall time per enqueue (ms/op), and redis-µs/op, Redis's
// time in scripts.
//
// Run: go test -run '^$' -bench Enqueue1000Nodes -benchtime 20x ./workflow/
func BenchmarkEnqueue1000Nodes(b *testing.B) {
	rdb, wf, _ := benchEnv(b)
	ctx := context.Background()
	spec := fanGraph(MaxNodes)
	if _, err := wf.Enqueue(ctx, spec); err != nil { // the queues exist
		b.Fatal(err)
	}
	before := redisStats(b, rdb)
	b.ResetTimer()
	for range b.N {
		if _, err := wf.Enqueue(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := redisStats(b, rdb)
	b.ReportMetric((after.usec-before.usec)/float64(b.N), "redis-µs/op")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// BenchmarkFanOutFanInRelease runs a fan-out/fan-in of 1,000 nodes to its
// end, workers completing every job, and measures what releasing costs
// Redis per node (the goal is 100 µs of Redis CPU): the releaser's passes
// (outbox reads, records, releases, acks) and, measured apart, what the
// outbox entry adds to a node's complete (complete.lua of the same jobs
// without a workflow is the baseline). Reported per node:
//
//   - release-redis-µs, release-cpu-µs: the releaser's passes, Redis's
//     time in scripts and its CPU (INFO cpu)
//   - complete-extra-cpu-µs: Redis's CPU in complete.lua for a workflow's
//     jobs less for plain jobs (the outbox entry), per job
//
// Run: go test -run '^$' -bench FanOutFanInRelease -benchtime 3x ./workflow/
func BenchmarkFanOutFanInRelease(b *testing.B) {
	rdb, wf, r := benchEnv(b)
	ctx := context.Background()
	spec := fanGraph(MaxNodes)
	var release, cpu, wfComplete, plainComplete float64
	for range b.N {
		b.StopTimer()
		if _, err := wf.Enqueue(ctx, spec); err != nil {
			b.Fatal(err)
		}
		for done := 0; done < MaxNodes; {
			n, usec := completeAll(b, rdb, wf.q, benchQueues, false)
			done += n
			wfComplete += usec
			b.StartTimer()
			s0 := redisStats(b, rdb)
			r.Pass(ctx)
			s1 := redisStats(b, rdb)
			b.StopTimer()
			release += s1.usec - s0.usec
			cpu += s1.cpuUs - s0.cpuUs
			if n == 0 && done < MaxNodes {
				b.Fatalf("stuck after %d nodes", done)
			}
		}
		// the baseline: as many plain jobs, completed the same way
		var njs []queue.NewJob
		for i := range MaxNodes {
			njs = append(njs, queue.NewJob{Queue: benchQueues[i%4], Kind: "step"})
		}
		if _, err := wf.q.EnqueueBatch(ctx, njs); err != nil {
			b.Fatal(err)
		}
		_, usec := completeAll(b, rdb, wf.q, benchQueues, true)
		plainComplete += usec
	}
	nodes := float64(b.N * MaxNodes)
	b.ReportMetric(release/nodes, "release-redis-µs/node")
	b.ReportMetric(cpu/nodes, "release-cpu-µs/node")
	b.ReportMetric((wfComplete-plainComplete)/nodes, "complete-extra-cpu-µs/node")
}

// completeAll claims and completes what is pending in queues (all of it
// when all), and answers how many jobs and the µs Redis spent in the
// completes' scripts.
func completeAll(b *testing.B, rdb *redis.Client, q *queue.Client, queues []string, all bool) (int, float64) {
	ctx := context.Background()
	n := 0
	var usec float64
	for {
		got := 0
		for _, qn := range queues {
			jobs, err := q.Claim(ctx, qn, queue.ClaimOptions{Max: queue.MaxBatch})
			if err != nil {
				b.Fatal(err)
			}
			if len(jobs) == 0 {
				continue
			}
			acks := make([]queue.Ack, len(jobs))
			for i, j := range jobs {
				acks[i] = queue.Ack{ID: j.ID, Token: j.Token}
			}
			s0 := redisStats(b, rdb)
			if _, _, err := q.CompleteMany(ctx, qn, acks); err != nil {
				b.Fatal(err)
			}
			s1 := redisStats(b, rdb)
			usec += s1.cpuUs - s0.cpuUs
			got += len(jobs)
		}
		n += got
		if got == 0 || !all {
			return n, usec
		}
	}
}

type serverStats struct{ usec, cpuUs float64 }

// redisStats reads INFO: the µs Redis spent in scripts (commandstats of
// EVALSHA and EVAL, which hold the commands they call) and its CPU (user
// + system: everything, the commands sent outside scripts included).
func redisStats(b *testing.B, rdb *redis.Client) serverStats {
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var st serverStats
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			st.cpuUs += f * 1e6
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall":
			for f := range strings.SplitSeq(v, ",") {
				if name, val, _ := strings.Cut(f, "="); name == "usec" {
					x, _ := strconv.ParseFloat(val, 64)
					st.usec += x
				}
			}
		}
	}
	return st
}
