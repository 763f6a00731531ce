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
	"github.com/chronoq/chronoq/internal/plumbing"
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
					if _, _, err := c.CompleteMany(ctx, q, acks); err != nil {
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
			info, _ := plumbing.Of(c).Redis().Info(ctx, "commandstats", "cpu").Result()
			b.Log(info)
		}
	}
}

// redisCPU is the CPU time redis-server has used (user + system).
func redisCPU(b *testing.B, c *queue.Client) time.Duration {
	b.Helper()
	var total float64
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(infoField(b, plumbing.Of(c).Redis(), "cpu", f), 64)
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
// for each, how late a worker received it after its run-at, by Redis's
// clock: a promoter (an instance of its own) sleeps until the next due
// job, and 8 claimers wait on the queue's wake stream. A round of 400 jobs
// over 200 ms warms the process up first, unmeasured. Every clock is
// true; BenchmarkLatenessSkewedPromoter is the same with the promoter's
// clock 30 s ahead.
func BenchmarkLateness(b *testing.B) { benchLateness(b, 0) }

// BenchmarkLatenessSkewedPromoter is BenchmarkLateness with the promoting
// instance's clock 30 s ahead of Redis's: it sleeps until each due time on
// Redis's clock less its estimate of the skew, and Redis's clock decides
// what is due, so it must be neither early nor later than with a true
// clock.
func BenchmarkLatenessSkewedPromoter(b *testing.B) { benchLateness(b, 30*time.Second) }

// benchLateness runs the lateness benchmark with the promoter's clock skew
// off the true time. Lateness is measured on Redis's clock: the claimers'
// true clock (on this host the one TIME reads) corrected by its measured
// distance to TIME. It also reports Redis's CPU per job over the run, the
// TIME calls the scripts made per job, and what those cost, from the cost
// of one redis.call('TIME') measured on the same server (timeCallCost).
func benchLateness(b *testing.B, skew time.Duration) {
	const (
		jobs     = 2000
		spread   = time.Second
		claimers = 8
	)
	for range b.N {
		c, ctx := benchClient(b)
		q := "late"
		pc, err := queue.NewClient(queue.Config{Redis: plumbing.Of(c).Redis(), Namespace: plumbing.Of(c).Namespace(), Clock: testutil.SkewedClock(skew)})
		require.NoError(b, err)
		b.Cleanup(func() { _ = pc.Close() })
		perTime := timeCallCost(b, plumbing.Of(c).Redis())
		off := redisAhead(b, plumbing.Of(c).Redis())
		var promoted atomic.Int64 // by the promoter; the claimers' claims promote the rest
		p, err := delayed.NewPromoter(delayed.Config{Source: pc.Source(), Clock: plumbing.Of(pc).Clock(), Queues: []string{q},
			OnPromote: func(_ string, n int) { promoted.Add(int64(n)) }})
		require.NoError(b, err)
		promoting := lifecycle.Start(ctx, p)

		// round schedules n jobs due evenly over spread, starting 500 ms
		// from now on Redis's clock, has the claimers take them all, and
		// answers how late each was received and how many were claimed
		// before their run_at.
		round := func(n int, spread time.Duration) ([]time.Duration, int64) {
			lateness := make(chan time.Duration, n)
			base := time.Now().Add(off).Add(500 * time.Millisecond)
			asked := make([]time.Time, n)
			for i := range asked {
				asked[i] = base.Add(spread * time.Duration(i) / time.Duration(n))
			}
			var got, earlyClaims atomic.Int64
			var wg sync.WaitGroup
			for range claimers {
				wg.Go(func() {
					for got.Load() < int64(n) && ctx.Err() == nil {
						js, err := c.Claim(ctx, q, queue.ClaimOptions{Max: 16, Wait: 200 * time.Millisecond})
						if err != nil {
							b.Error(err)
							return
						}
						now := time.Now().Add(off)
						acks := make([]queue.Ack, 0, len(js))
						for _, j := range js {
							// Against the time asked for, which the schedule
							// keeps to the microsecond (j.RunAt is its
							// millisecond).
							i, err := strconv.Atoi(string(j.Payload))
							if err != nil || i < 0 || i >= n {
								b.Errorf("payload %q", j.Payload)
								return
							}
							lateness <- now.Sub(asked[i])
							if j.ClaimedAt.Before(j.RunAt) { // both Redis's, to the ms
								earlyClaims.Add(1)
							}
							acks = append(acks, queue.Ack{ID: j.ID, Token: j.Token})
						}
						if len(acks) > 0 {
							got.Add(int64(len(acks)))
							if _, _, err := c.CompleteMany(ctx, q, acks); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
			}
			// Enqueued in batches.
			nj := make([]queue.NewJob, 0, n)
			for i := range n {
				nj = append(nj, queue.NewJob{Queue: q, Kind: "late", RunAt: asked[i], Payload: json.RawMessage(strconv.Itoa(i))})
			}
			for chunk := range slices.Chunk(nj, 250) {
				_, err := c.EnqueueBatch(ctx, chunk)
				require.NoError(b, err)
			}
			wg.Wait()
			close(lateness)
			var all []time.Duration
			for d := range lateness {
				all = append(all, d)
			}
			return all, earlyClaims.Load()
		}
		// A warm-up round first, not measured: a process's first second
		// (new connections, the runtime's and Redis's first allocations)
		// is not the steady state a scheduler lives in. Its jobs must not
		// be early either.
		warm, warmEarlyClaims := round(jobs/5, spread/5)
		promoted.Store(0)
		cpu0, time0 := redisCPU(b, c), timeCalls(b, plumbing.Of(c).Redis())
		all, earlyClaims := round(jobs, spread)
		require.NoError(b, promoting.Stop(ctx))
		cpu, calls := redisCPU(b, c)-cpu0, timeCalls(b, plumbing.Of(c).Redis())-time0
		early := 0
		for _, d := range append(warm, all...) {
			if d < 0 {
				early++
			}
		}
		require.Len(b, all, jobs)
		slices.Sort(all)
		pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(early), "early")
		b.ReportMetric(float64(cpu.Microseconds())/jobs, "redis-µs/job")
		b.ReportMetric(float64(calls)/jobs, "TIME-calls/job")
		b.ReportMetric(float64(calls)/jobs*perTime.Seconds()*1e6, "TIME-µs/job")
		b.ReportMetric(perTime.Seconds()*1e6, "µs/TIME-call")
		b.ReportMetric(plumbing.Of(pc).RedisClock().Offset.Seconds(), "promoter-offset-s")
		b.ReportMetric(float64(promoted.Load())/jobs, "promoter-share")
		if early > 0 || earlyClaims+warmEarlyClaims > 0 {
			b.Errorf("%d jobs ran early (%d claimed before their run_at by Redis's clock); the earliest by %s",
				early, earlyClaims+warmEarlyClaims, -min(all[0], slices.Min(warm)))
		}
	}
}

// redisAhead is how far Redis's clock (TIME) is ahead of this process's,
// from the TIME round trip with the shortest of 20, within half of it (a
// few µs on loopback).
func redisAhead(b *testing.B, rdb redis.UniversalClient) time.Duration {
	b.Helper()
	best, ahead := time.Duration(1<<62), time.Duration(0)
	for range 20 {
		t0 := time.Now()
		tm, err := rdb.Time(context.Background()).Result()
		t1 := time.Now()
		require.NoError(b, err)
		if rtt := t1.Sub(t0); rtt < best {
			best, ahead = rtt, tm.Sub(t0.Add(rtt/2))
		}
	}
	return ahead
}

// timeCalls is how many TIME commands Redis has run, the scripts' included
// (INFO commandstats counts the commands a script calls).
func timeCalls(b *testing.B, rdb redis.UniversalClient) int64 {
	b.Helper()
	return commandStats(b, context.Background(), rdb)["time"].calls
}

// timeCallCost is what one redis.call('TIME') costs a script on rdb's
// server, Lua's side of the call included: the difference in Redis's own
// time (INFO commandstats, eval's usec) between a script that calls TIME
// 1,000 times in a loop and one that loops as long without it, over 200
// runs of each.
func timeCallCost(b *testing.B, rdb redis.UniversalClient) time.Duration {
	b.Helper()
	ctx := context.Background()
	const runs, loops = 200, 1000
	with := redis.NewScript(`local t for i = 1, tonumber(ARGV[1]) do t = redis.call('TIME') end return 1`)
	without := redis.NewScript(`local t for i = 1, tonumber(ARGV[1]) do t = i end return 1`)
	usec := func(sc *redis.Script) int64 {
		require.NoError(b, sc.Load(ctx, rdb).Err())
		require.NoError(b, rdb.ConfigResetStat(ctx).Err())
		for range runs {
			require.NoError(b, sc.EvalSha(ctx, rdb, nil, loops).Err())
		}
		st, ok := commandStats(b, ctx, rdb)["evalsha"]
		require.True(b, ok, "INFO commandstats has no evalsha")
		return int64(st.usec)
	}
	d := usec(with) - usec(without)
	require.NoError(b, rdb.ConfigResetStat(ctx).Err())
	return time.Duration(d) * time.Microsecond / (runs * loops)
}

// BenchmarkClaimLabels compares the claim with labels to the claim without,
// in one run: one Redis server holds a queue of jobs without labels, another
// a queue whose jobs require four label sets (three of which the claimer
// has, one it has not: those jobs stay), and one claimer claims a job at a
// time from each in turn, so that both see the same machine. It reports
// each side's claims a second (by the time its own calls took) and Redis
// CPU per claim, and the ratios labeled/plain: claims-ratio near 1 (the
// goal is within 10 %), redis-cpu-ratio how much more Redis works per
// labeled claim (it peeks the head of each list the claimer may take from).
func BenchmarkClaimLabels(b *testing.B) {
	const jobs = 10_000 // claimed from each side
	sets := [][]string{{"gpu"}, {"gpu", "linux"}, {"region=eu"}, {"arch=arm64"}}
	claimer := []string{"gpu", "linux", "region=eu"}
	for range b.N {
		plain, ctx := benchClient(b)
		labeled, _ := benchClient(b)
		fill := func(c *queue.Client, labels func(i int) []string, n int) {
			nj := make([]queue.NewJob, 0, queue.MaxBatch)
			for i := range n {
				nj = append(nj, queue.NewJob{Queue: "q", Kind: "noop", Labels: labels(i)})
				if len(nj) == cap(nj) || i == n-1 {
					_, err := c.EnqueueBatch(ctx, nj)
					require.NoError(b, err)
					nj = nj[:0]
				}
			}
		}
		fill(plain, func(int) []string { return nil }, jobs)
		// Three quarters of them the claimer may take: enough for jobs
		// claims, and the rest (arch=arm64) stays behind.
		fill(labeled, func(i int) []string { return sets[i%len(sets)] }, jobs*len(sets)/(len(sets)-1)+len(sets))
		var took [2]time.Duration
		var cpu [2]time.Duration
		var lat [2][]time.Duration // each call's round trip
		clients := [2]*queue.Client{plain, labeled}
		opts := [2]queue.ClaimOptions{{}, {Labels: claimer}}
		for side, c := range clients {
			require.NoError(b, plumbing.Of(c).Redis().ConfigResetStat(ctx).Err())
			cpu[side] = -redisCPU(b, c)
		}
		for range jobs {
			for side, c := range clients {
				t0 := time.Now()
				got, err := c.Claim(ctx, "q", opts[side])
				d := time.Since(t0)
				took[side] += d
				lat[side] = append(lat[side], d)
				require.NoError(b, err)
				require.Len(b, got, 1)
			}
		}
		for side, c := range clients {
			cpu[side] += redisCPU(b, c)
		}
		rate := func(side int) float64 { return jobs / took[side].Seconds() }
		median := func(side int) time.Duration { slices.Sort(lat[side]); return lat[side][len(lat[side])/2] }
		perClaim := func(side int) float64 { return float64(cpu[side].Microseconds()) / jobs }
		b.ReportMetric(rate(0), "plain-claims/s")
		b.ReportMetric(rate(1), "labeled-claims/s")
		b.ReportMetric(rate(1)/rate(0), "claims-ratio")
		// The same by each side's median call, which the other processes of
		// a busy machine move less than the sums.
		b.ReportMetric(float64(median(0))/float64(median(1)), "median-claims-ratio")
		b.ReportMetric(perClaim(0), "plain-redis-µs/claim")
		b.ReportMetric(perClaim(1), "labeled-redis-µs/claim")
		b.ReportMetric(perClaim(1)/max(perClaim(0), 0.001), "redis-cpu-ratio")
	}
}

// BenchmarkCallCost shows where Redis's CPU goes on the path a producer
// and a worker sending one job a call take: 5,000 enqueues one at a time,
// then 5,000 claims of one job, then 5,000 completes, each phase measured
// by itself, and as a yardstick an EVALSHA of `return 0` with as many
// keys as the enqueue. For each it reports, per call:
//
//   - <phase>-cpu-µs: Redis's CPU (INFO cpu), everything included;
//   - <phase>-script-µs: the time Redis counts to the script calls
//     (INFO commandstats, EVALSHA and EVAL: the phase's own script and the
//     attention marks its reply asks for), the commands they call included;
//   - <phase>-calls-µs: of that, the commands the scripts call;
//
// so that script-µs less calls-µs is the Lua (the interpreter, the set-up
// of the script's helpers, the conversions of each call's arguments and
// reply), and cpu-µs less script-µs is the rest of a request: reading it,
// writing the reply, the event loop and the kernel's network work.
//
// empty4 is the yardstick's 5,000 calls again, from 4 goroutines at once:
// what a call costs Redis when requests arrive together.
//
// Then the same 5,000 jobs again in batches (enqueue100: EnqueueBatch of
// 100; claim50: Claim of Max 50; complete50: CompleteMany of 50), whose
// figures are per job: what one more job in a call costs, where the
// single phases show what a call costs.
func BenchmarkCallCost(b *testing.B) {
	const n = 5000
	for range b.N {
		c, ctx := benchClient(b)
		rdb := plumbing.Of(c).Redis()
		// usec answers the usec INFO commandstats counts to script calls
		// and to the other commands (INFO and CONFIG aside).
		usec := func() (scripts, calls float64) {
			for name, st := range commandStats(b, ctx, rdb) {
				switch {
				case name == "evalsha" || name == "eval" || name == "fcall":
					scripts += st.usec
				case name != "info" && !strings.HasPrefix(name, "config"):
					calls += st.usec
				}
			}
			return scripts, calls
		}
		// batch runs calls = n/per calls of per jobs each, and reports per
		// job.
		batch := func(name string, per int, run func(i int)) {
			require.NoError(b, rdb.ConfigResetStat(ctx).Err())
			cpu0 := redisCPU(b, c)
			for i := range n / per {
				run(i)
			}
			cpu := redisCPU(b, c) - cpu0
			scripts, calls := usec()
			b.ReportMetric(float64(cpu.Microseconds())/n, name+"-cpu-µs")
			b.ReportMetric(scripts/n, name+"-script-µs")
			b.ReportMetric(calls/n, name+"-calls-µs")
		}
		phase := func(name string, run func(i int)) { batch(name, 1, run) }
		empty := redis.NewScript("return 0")
		emptyKeys := make([]string, 9) // as many as enqueue.lua's
		for i := range emptyKeys {
			emptyKeys[i] = "{q}:k" + strconv.Itoa(i)
		}
		phase("empty", func(int) { require.NoError(b, empty.Run(ctx, rdb, emptyKeys, 0, "", "", "").Err()) })
		// The same calls, from 4 goroutines at once: Redis reads and
		// answers the requests that arrive together in one turn of its
		// event loop, whose own cost (waking up, epoll) is most of a lone
		// call's.
		batch("empty4", n, func(int) {
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for range n / 4 {
						if err := empty.Run(ctx, rdb, emptyKeys, 0, "", "", "").Err(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
		phase("enqueue", func(int) {
			_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "noop"})
			require.NoError(b, err)
		})
		claimed := make([]*queue.Job, n)
		phase("claim", func(i int) {
			js, err := c.Claim(ctx, "q", queue.ClaimOptions{})
			require.NoError(b, err)
			require.Len(b, js, 1)
			claimed[i] = js[0]
		})
		phase("complete", func(i int) {
			require.NoError(b, c.Complete(ctx, "q", claimed[i].ID, claimed[i].Token, queue.CompleteOptions{}))
		})

		jobs := make([]queue.NewJob, 100)
		for i := range jobs {
			jobs[i] = queue.NewJob{Queue: "q", Kind: "noop"}
		}
		batch("enqueue100", len(jobs), func(int) {
			_, err := c.EnqueueBatch(ctx, jobs)
			require.NoError(b, err)
		})
		const per = 50
		acks := make([][]queue.Ack, n/per)
		batch("claim50", per, func(i int) {
			js, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: per})
			require.NoError(b, err)
			require.Len(b, js, per)
			for _, j := range js {
				acks[i] = append(acks[i], queue.Ack{ID: j.ID, Token: j.Token})
			}
		})
		batch("complete50", per, func(i int) {
			_, errs, err := c.CompleteMany(ctx, "q", acks[i])
			require.NoError(b, err)
			for _, err := range errs {
				require.NoError(b, err)
			}
		})
	}
}

// BenchmarkScriptCallModes compares, on one redis-server, the per-queue
// scripts called as functions of the library (FCALL, see library.go in
// internal/store) with the same scripts sent by EVALSHA: two clients, one
// of them made to use EVALSHA, enqueue into queues of their own in turn,
// 10 rounds of 500 one-job enqueues and of 5 enqueues of 100 jobs each,
// and it reports the least time Redis spent in each mode's scripts a job
// in a round (INFO commandstats, the commands they call included): the
// least, because the machine's other work only ever adds to it.
func BenchmarkScriptCallModes(b *testing.B) {
	for range b.N {
		c, ctx := benchClient(b)
		rdb := plumbing.Of(c).Redis()
		ev, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: plumbing.Of(c).Namespace() + "e"})
		require.NoError(b, err)
		b.Cleanup(func() { _ = ev.Close() })
		plumbing.Of(ev).Engine().UseEval()
		best := map[string]float64{}
		round := func(name, stat string, client *queue.Client, per, calls int) {
			jobs := make([]queue.NewJob, per)
			for i := range jobs {
				jobs[i] = queue.NewJob{Queue: "q", Kind: "noop"}
			}
			require.NoError(b, rdb.ConfigResetStat(ctx).Err())
			for range calls {
				_, err := client.EnqueueBatch(ctx, jobs)
				require.NoError(b, err)
			}
			us := commandStats(b, ctx, rdb)[stat].usec / float64(per*calls)
			if old, ok := best[name]; !ok || us < old {
				best[name] = us
			}
		}
		for range 10 {
			round("fcall-1", "fcall", c, 1, 500)
			round("evalsha-1", "evalsha", ev, 1, 500)
			round("fcall-100", "fcall", c, 100, 5)
			round("evalsha-100", "evalsha", ev, 100, 5)
		}
		for name, us := range best {
			b.ReportMetric(us, name+"-µs/job")
		}
		b.ReportMetric(best["evalsha-1"]/best["fcall-1"], "ratio-1")
		b.ReportMetric(best["evalsha-100"]/best["fcall-100"], "ratio-100")
	}
}
