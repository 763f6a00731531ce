package queue_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The engine's benchmarks run on the real clock against a real
// redis-server on loopback. Each is bounded in jobs and in time. Run them
// with `make bench`.

// benchClient answers a client on a redis-server of the benchmark's own, so
// that one benchmark's keys (200,000 finished jobs after the end-to-end
// run) do not weigh on the next one's figures.
func benchClient(b *testing.B) (*queue.Client, context.Context) {
	b.Helper()
	srv := testutil.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(b), BlockingPoolSize: 128})
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	b.Cleanup(cancel)
	return c, ctx
}

// BenchmarkEndToEnd measures no-op jobs per second from enqueue to
// complete: 4 producers enqueue batches of 100 while 50 claimers claim up to
// 32 jobs a round trip and complete them with one CompleteMany.
func BenchmarkEndToEnd(b *testing.B) {
	const (
		jobs      = 200_000
		producers = 4
		claimers  = 50
		batch     = 100
	)
	for range b.N {
		c, ctx := benchClient(b)
		q := "bench"
		var done atomic.Int64
		cpu0 := redisCPU(b, c)
		start := time.Now()
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				nj := make([]queue.NewJob, batch)
				for i := range nj {
					nj[i] = queue.NewJob{Queue: q, Kind: "noop"}
				}
				for n := p * batch; n < jobs; n += producers * batch {
					if _, err := c.EnqueueBatch(ctx, nj); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		for range claimers {
			wg.Go(func() {
				acks := make([]queue.Ack, 0, 32)
				for done.Load() < jobs && ctx.Err() == nil {
					got, err := c.Claim(ctx, q, queue.ClaimOptions{Max: 32, Wait: 50 * time.Millisecond})
					if err != nil {
						b.Error(err)
						return
					}
					if len(got) == 0 {
						continue
					}
					acks = acks[:0]
					for _, j := range got {
						acks = append(acks, queue.Ack{ID: j.ID, Token: j.Token})
					}
					if _, err := c.CompleteMany(ctx, q, acks); err != nil {
						b.Error(err)
						return
					}
					done.Add(int64(len(got)))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		s, err := c.Stats(ctx, q)
		require.NoError(b, err)
		require.Equal(b, int64(jobs), s.CompletedTotal)
		b.ReportMetric(float64(jobs)/elapsed.Seconds(), "jobs/s")
		// Redis is the shared bottleneck: its CPU time per job is the figure
		// that noisy neighbours on this machine do not move.
		b.ReportMetric(float64((redisCPU(b, c)-cpu0).Microseconds())/jobs, "redis-µs/job")
		if testing.Verbose() {
			info, _ := c.Redis().Info(ctx, "commandstats", "cpu").Result()
			b.Log(info)
		}
	}
}

// redisCPU is the CPU time redis-server has used (user + system).
func redisCPU(b *testing.B, c *queue.Client) time.Duration {
	b.Helper()
	var total float64
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(infoField(b, c.Redis(), "cpu", f), 64)
		require.NoError(b, err)
		total += v
	}
	return time.Duration(total * float64(time.Second))
}

// infoField answers one field of an INFO section.
func infoField(b *testing.B, rdb redis.UniversalClient, section, field string) string {
	b.Helper()
	info, err := rdb.Info(context.Background(), section).Result()
	require.NoError(b, err)
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	b.Fatalf("INFO %s has no %s", section, field)
	return ""
}

// BenchmarkLateness schedules 2,000 jobs due over one second and measures,
// for each, how late a worker received it after its run-at: the promoter
// sleeps until the next due job, and 8 claimers wait on the queue's wake
// stream.
func BenchmarkLateness(b *testing.B) {
	const (
		jobs     = 2000
		spread   = time.Second
		claimers = 8
	)
	for range b.N {
		c, ctx := benchClient(b)
		q := "late"
		p, err := delayed.NewPromoter(delayed.Config{Source: c, Queues: []string{q}})
		require.NoError(b, err)
		promoting := lifecycle.Start(ctx, p)

		lateness := make(chan time.Duration, jobs)
		// Due times spread evenly over one second, starting 500 ms from now.
		base := time.Now().Add(500 * time.Millisecond)
		asked := make([]time.Time, jobs)
		for i := range asked {
			asked[i] = base.Add(spread * time.Duration(i) / jobs)
		}
		var got atomic.Int64
		var wg sync.WaitGroup
		for range claimers {
			wg.Go(func() {
				for got.Load() < jobs && ctx.Err() == nil {
					js, err := c.Claim(ctx, q, queue.ClaimOptions{Max: 16, Wait: 200 * time.Millisecond})
					if err != nil {
						b.Error(err)
						return
					}
					now := time.Now()
					acks := make([]queue.Ack, 0, len(js))
					for _, j := range js {
						// Against the time asked for, which the schedule keeps
						// to the microsecond (j.RunAt is its millisecond).
						i, err := strconv.Atoi(string(j.Payload))
						if err != nil || i < 0 || i >= jobs {
							b.Errorf("payload %q", j.Payload)
							return
						}
						lateness <- now.Sub(asked[i])
						acks = append(acks, queue.Ack{ID: j.ID, Token: j.Token})
					}
					if len(acks) > 0 {
						got.Add(int64(len(acks)))
						if _, err := c.CompleteMany(ctx, q, acks); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
		}
		// Enqueued in batches.
		nj := make([]queue.NewJob, 0, jobs)
		for i := range jobs {
			nj = append(nj, queue.NewJob{Queue: q, Kind: "late", RunAt: asked[i], Payload: json.RawMessage(strconv.Itoa(i))})
		}
		for i := 0; i < len(nj); i += 250 {
			_, err := c.EnqueueBatch(ctx, nj[i:i+250])
			require.NoError(b, err)
		}
		wg.Wait()
		require.NoError(b, promoting.Stop(ctx))
		close(lateness)
		var all []time.Duration
		early := 0
		for d := range lateness {
			if d < 0 {
				early++
			}
			all = append(all, d)
		}
		require.Len(b, all, jobs)
		slices.Sort(all)
		pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(early), "early")
		if early > 0 {
			b.Errorf("%d jobs ran early; the earliest by %s", early, -all[0])
		}
	}
}
