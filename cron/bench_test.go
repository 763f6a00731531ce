package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// BenchmarkSchedulerPass measures what one scheduler pass costs Redis
// with 1,000 and with 100,000 entries that are not due (they fire at
// noon), and 0 or 5 more that fire every second, so are due at every
// pass. Each iteration moves the fake clock one second and runs one pass,
// which enqueues the due ticks. Reported per pass:
//
//   - redis-µs: the time Redis spent in commands (INFO commandstats: the
//     sum of usec, scripts counted once with what they call)
//   - redis-cpu-µs: Redis's CPU time (INFO cpu: used_cpu_sys +
//     used_cpu_user), its event loop and background work included
//   - cmds-sent: the commands the pass sent (a client hook; a script
//     call is one)
//   - redis-calls: the commands Redis ran (INFO commandstats; those a
//     script calls count each)
//
// Run: go test -run '^$' -bench SchedulerPass -benchtime 2000x ./cron/
func BenchmarkSchedulerPass(b *testing.B) {
	srv := testutil.StartServer(b)
	for _, due := range []int{0, 5} {
		for _, n := range []int{1000, 100_000} {
			b.Run(fmt.Sprintf("due=%d/entries=%d", due, n), func(b *testing.B) {
				benchPass(b, srv.Addr(), n, due)
			})
		}
	}
}

func benchPass(b *testing.B, addr string, entries, due int) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = rdb.Close() }()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	start := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: "bench", Clock: clock, FollowClock: true, DisableEvents: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	sched, err := NewScheduler(Config{Client: c, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := loadEntries(ctx, sched.store, entries, due, start.Add(-time.Second)); err != nil {
		b.Fatal(err)
	}
	if n, err := rdb.HLen(ctx, entriesKey("bench")).Result(); err != nil || n != int64(entries+due) {
		b.Fatalf("loaded %d entries (%v), want %d", n, err, entries+due)
	}
	b.Logf("%d entries stored in %s", entries+due, time.Since(t0).Round(time.Millisecond))

	var sent atomic.Int64
	rdb.AddHook(countHook{&sent})
	l := newLoop(sched, clock.Now())
	l.pass(ctx) // warm up: the queue made, the scripts loaded
	before := redisStats(b, rdb)
	sent.Store(0)
	b.ResetTimer()
	for range b.N {
		clock.Advance(time.Second)
		if wait := l.pass(ctx); wait != time.Second {
			b.Fatalf("pass answered a wait of %s, want 1s", wait)
		}
	}
	b.StopTimer()
	after := redisStats(b, rdb)
	if due > 0 {
		st, err := c.Stats(ctx, "due")
		if err != nil {
			b.Fatal(err)
		}
		if want := int64(due * (b.N + 1)); st.EnqueuedTotal != want {
			b.Fatalf("enqueued %d jobs, want %d", st.EnqueuedTotal, want)
		}
	}
	perPass := func(v float64) float64 { return v / float64(b.N) }
	b.ReportMetric(perPass(after.usec-before.usec), "redis-µs/pass")
	b.ReportMetric(perPass(after.cpuUs-before.cpuUs), "redis-cpu-µs/pass")
	b.ReportMetric(perPass(float64(sent.Load())), "cmds-sent/pass")
	b.ReportMetric(perPass(after.calls-before.calls), "redis-calls/pass")
}

// loadEntries stores n entries that fire at noon and due that fire every
// second, all changed at since, with their index: what Put writes,
// pipelined a thousand commands a round trip.
func loadEntries(ctx context.Context, s *Store, n, due int, since time.Time) error {
	last, err := s.rdb.IncrBy(ctx, seqKey(s.ns), int64(n+due)).Result()
	if err != nil {
		return err
	}
	version := last - int64(n+due)
	pipe := s.rdb.Pipeline()
	for i := range n + due {
		e := Entry{Name: fmt.Sprintf("idle-%06d", i), Schedule: "0 12 * * *", Queue: "idle", Kind: "report",
			Payload: json.RawMessage(`{"report":"daily","to":"ops@example.com"}`)}
		if i >= n {
			e = Entry{Name: fmt.Sprintf("due-%d", i-n), Schedule: "@every 1s", Queue: "due", Kind: "tick"}
		}
		e, sched, err := normalize(e)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(stored{Entry: e, UpdatedAtMs: since.UnixMilli()})
		if err != nil {
			return err
		}
		version++
		s.writeEntry(ctx, pipe, e.Name, string(raw), version, cursorAfter(e, sched, since))
		if pipe.Len() >= 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	_, err = pipe.Exec(ctx)
	return err
}

type serverStats struct{ usec, cpuUs, calls float64 }

// redisStats sums INFO commandstats (usec, calls) and INFO cpu (user and
// system, in µs).
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
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			st.cpuUs += f * 1e6
		case strings.HasPrefix(k, "cmdstat_"):
			for f := range strings.SplitSeq(v, ",") {
				name, val, _ := strings.Cut(f, "=")
				x, _ := strconv.ParseFloat(val, 64)
				switch name {
				case "usec":
					st.usec += x
				case "calls":
					st.calls += x
				}
			}
		}
	}
	return st
}

// countHook counts the commands sent, those of pipelines each.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
