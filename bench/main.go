// Command bench runs the same scenarios on chronoq and on
// github.com/hibiken/asynq against one redis-server, in one run, and
// prints the figures side by side with their ratio. See README.md.
//
//	go run . [-n 100000] [-only e2e,drain,enqueue,late,retry,mem] [-deadline 120s] [-redis host:port]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	concurrency      = 50          // handlers running at once, on both sides
	e2eProducers     = 4           // scenario 1
	fillProducers    = 8           // scenarios 2, 3 and 6, and the fill of 2
	lateProducers    = 4           // scenario 4
	enqueueBatch     = 100         // jobs per chronoq EnqueueBatch
	lateSpread       = time.Second // scenario 4: due times spread over this
	lateLead         = time.Second // scenario 4: the first due this long after the enqueues start
	retryDelay       = 100 * time.Millisecond
	tunedCheck       = 100 * time.Millisecond // asynq's DelayedTaskCheckInterval, tuned
	memAhead         = time.Hour              // scenario 6: how far ahead the jobs are due
	stopTimeout      = 15 * time.Second       // a worker's, server's or promoter's stop
	maxJobs          = 10_000_000             // the largest -n accepted
	fallbackDeadline = 10 * time.Minute       // bounds a loop whose ctx has no deadline
)

// scenarios are the benchmark's scenarios, in the order they run; each
// runs on both sides and adds its rows to the table.
var scenarios = []struct {
	name string
	run  func(*bench, context.Context, *table)
}{
	{"e2e", (*bench).e2e}, {"drain", (*bench).drain}, {"enqueue", (*bench).enqueue},
	{"late", (*bench).late}, {"retry", (*bench).retry}, {"mem", (*bench).mem}, {"fair", (*bench).fair},
}

// scenarioNames are the scenarios' names, in order.
var scenarioNames = func() []string {
	names := make([]string, 0, len(scenarios))
	for _, sc := range scenarios {
		names = append(names, sc.name)
	}
	return names
}()

// bench holds the run's settings and the control connection (INFO,
// FLUSHALL) to the shared redis-server.
type bench struct {
	addr     string
	ctl      *redis.Client
	ctlAddr  string // the control connection as Redis sees it
	deadline time.Duration
	n        int // scenarios 1, 2, 3
	lateN    int
	retryN   int
	memN     int
	fairHot  int    // scenario 7: jobs of the hot key
	fairKeys int    // scenario 7: cold keys, fairPerKey jobs each
	runtime  string // chronoq's consumer: runtimeWorker or runtimeLoop
	prof     profiler
	// promoterSkew is how far the promoter's clock is off the true time.
	promoterSkew time.Duration
}

func main() {
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(runChild(addr)) // a worker child of scenario 4 (procs.go)
	}
	os.Exit(run())
}

// run runs the selected scenarios and prints their table, and answers the
// exit code: 2 for bad flags, 1 when Redis is unusable, 130 on Ctrl-C.
func run() int {
	b := &bench{}
	f := b.parseFlags()
	selected, err := b.check(f.only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}

	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	disconnect, err := b.connect(ctx, f.redisAddr, f.force)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer disconnect()
	srvInfo, _ := info(b.ctl, "server")

	t := &table{}
	for _, sc := range scenarios {
		if !selected[sc.name] {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		logf("scenario %s", sc.name)
		sc.run(b, ctx, t)
	}
	_ = flushAll(b.ctl)

	b.printResults(t, srvInfo, selected)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		return 130
	}
	return 0
}

// runFlags are the flags that choose the run but are no setting of bench.
type runFlags struct {
	redisAddr, only string
	force           bool
}

// parseFlags reads the command line into b, and answers the other flags.
func (b *bench) parseFlags() runFlags {
	var f runFlags
	flag.StringVar(&f.redisAddr, "redis", "", "an EMPTY redis-server to use (it is FLUSHALLed between scenarios); empty: start one on a free loopback port")
	flag.BoolVar(&f.force, "force", false, "with -redis: run even if the server holds keys (they are deleted)")
	flag.StringVar(&f.only, "only", "", "comma-separated scenarios to run, of "+strings.Join(scenarioNames, ",")+"; empty: all")
	flag.IntVar(&b.n, "n", 100_000, "jobs in the end-to-end, drain and enqueue scenarios")
	flag.IntVar(&b.lateN, "late-n", 2000, "scheduled jobs in the lateness scenario, due evenly over 1 s")
	flag.IntVar(&b.retryN, "retry-n", 500, "jobs in the retry-delay scenario")
	flag.IntVar(&b.memN, "mem-n", 50_000, "jobs scheduled 1 h ahead in the memory scenario")
	flag.IntVar(&b.fairHot, "fair-hot", 50_000, "jobs of the hot key in the fairness scenario, enqueued first")
	flag.IntVar(&b.fairKeys, "fair-keys", 1000, "cold keys in the fairness scenario, 5 jobs each, enqueued while the hot key's jobs drain")
	flag.DurationVar(&b.deadline, "deadline", 120*time.Second, "the most one side of one scenario may run; then it stops and reports what it got (marked *)")
	flag.DurationVar(&b.promoterSkew, "promoter-skew", 0, "how far chronoq's promoter's clock is off the true time (say 30s) in the scenarios that run one (late, retry); at most 24h either way")
	flag.StringVar(&b.runtime, "runtime", runtimeWorker, "chronoq's consumer: worker (package worker, concurrency 50) or loop (50 goroutines: Claim(Max 32, Wait 50 ms) + CompleteMany)")
	flag.StringVar(&b.prof.dir, "cpuprofile", "", "a directory to write a CPU profile of this process into for each timed end-to-end, drain and enqueue pass (<side>-<flow>.pprof)")
	flag.Parse()
	return f
}

// check refuses settings out of their bounds, and answers the scenarios
// -only selects.
func (b *bench) check(only string) (map[string]bool, error) {
	selected, err := parseOnly(only)
	if err != nil {
		return nil, err
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"-n", b.n}, {"-late-n", b.lateN}, {"-retry-n", b.retryN}, {"-mem-n", b.memN}, {"-fair-hot", b.fairHot}} {
		if v.n < 1 || v.n > maxJobs {
			return nil, fmt.Errorf("%s must be in [1, %d]", v.name, maxJobs)
		}
	}
	if b.fairKeys < 1 || b.fairKeys > maxFairKeys {
		return nil, fmt.Errorf("-fair-keys must be in [1, %d]", maxFairKeys)
	}
	if b.deadline <= 0 || b.deadline > time.Hour {
		return nil, errors.New("-deadline must be in (0, 1h]")
	}
	if b.promoterSkew < -24*time.Hour || b.promoterSkew > 24*time.Hour {
		return nil, errors.New("-promoter-skew must be in [-24h, 24h]")
	}
	if err := b.prof.check(); err != nil {
		return nil, err
	}
	if b.runtime != runtimeWorker && b.runtime != runtimeLoop {
		return nil, fmt.Errorf("-runtime must be %s or %s", runtimeWorker, runtimeLoop)
	}
	return selected, nil
}

// connect opens b's control connection to the redis-server at addr, or to
// one it starts when addr is empty, and refuses a server that holds keys
// unless force. disconnect closes the connection and stops the server
// it started.
func (b *bench) connect(ctx context.Context, addr string, force bool) (disconnect func(), err error) {
	stopRedis := func() {}
	b.addr = addr
	if b.addr == "" {
		srv, err := startRedis(ctx)
		if err != nil {
			return nil, err
		}
		stopRedis, b.addr = srv.stop, srv.proc.Addr
	}
	b.ctl = redis.NewClient(&redis.Options{Addr: b.addr, PoolSize: 1})
	disconnect = func() {
		_ = b.ctl.Close()
		stopRedis()
	}
	b.ctlAddr = clientAddr(b.ctl)
	keys, err := keyCount(b.ctl)
	if err != nil {
		disconnect()
		return nil, fmt.Errorf("redis at %s: %w", b.addr, err)
	}
	if keys > 0 && !force {
		disconnect()
		return nil, fmt.Errorf("the redis-server at %s holds %d keys and the benchmark FLUSHALLs it: use an empty server, or -force", b.addr, keys)
	}
	return disconnect, nil
}

// printResults prints the run's settings, the table t, and what its rows
// mean.
func (b *bench) printResults(t *table, srvInfo map[string]string, selected map[string]bool) {
	chronoqRuntime := "package worker (worker.Worker, Concurrency 50)"
	if b.runtime == runtimeLoop {
		chronoqRuntime = "no worker package: 50 goroutines doing Claim(Max 32, Wait 50 ms) + CompleteMany"
	}
	fmt.Printf("chronoq vs asynq %s, redis-server %s at %s, %s, GOMAXPROCS %d, %s\n",
		depVersion("github.com/hibiken/asynq"), srvInfo["redis_version"], b.addr, runtime.Version(),
		runtime.GOMAXPROCS(0), time.Now().Format(time.DateTime))
	fmt.Printf("chronoq's consumer: %s; asynq: Server{Concurrency: 50}, defaults otherwise\n", chronoqRuntime)
	fmt.Printf("n=%d late-n=%d retry-n=%d mem-n=%d fair-hot=%d fair-keys=%d deadline=%s promoter-skew=%s\n\n", b.n, b.lateN, b.retryN, b.memN,
		b.fairHot, b.fairKeys, b.deadline, b.promoterSkew)
	t.print(os.Stdout)
	fmt.Println()
	fmt.Println("ratio: how many times better chronoq did. (c/a) = chronoq/asynq, for higher-is-better rows;")
	fmt.Println("(a/c) = asynq/chronoq, for lower-is-better rows (times, CPU, bytes). n/a: no meaningful ratio")
	fmt.Println("(a side ran early, or has no such call).")
	printNotes(b, selected)
	if t.incomplete {
		fmt.Println("* incomplete: that side stopped at the deadline, on an error or on Ctrl-C; the figure is what it got.")
	}
}

// printNotes says, for each scenario run, what its rows measure.
func printNotes(b *bench, selected map[string]bool) {
	notes := map[string][]string{
		"e2e": {"1. n no-op jobs enqueued by 4 producers while 50 handlers run; first enqueue to last completion. First",
			"   one Enqueue call a job on both sides, then chronoq's EnqueueBatch of 100 against the same asynq run (asynq",
			"   has no batch or pipelined enqueue). \"of which\": the first pass's redis CPU/job split by phase, in the",
			"   shares a second one-a-call pass measured by logging every command (SLOWLOG: each command's execution",
			"   time, plus the rest of that pass's CPU, I/O and event loop, shared out by number of commands). \"calls a",
			"   job\": that pass's commands a job, by phase. client CPU: this process's (producers and consumer) user+sys / jobs."},
		"drain":   {"2. n jobs enqueued first, untimed; then the consumer starts; time until all are completed."},
		"enqueue": {"3. n jobs by 8 producers. redis CPU µs/job (1-3): INFO cpu user+sys delta over the run / jobs."},
		"late": {fmt.Sprintf("4. %d jobs due evenly over 1 s from 1 s after the enqueues start (4 producers). Lateness =", b.lateN),
			"   handler start − requested run time; negative = early. chronoq: a delayed.Promoter, and the worker's own claims at due times it knows."},
		"retry": {fmt.Sprintf("5. %d jobs fail their first run asking a retry 100 ms later (chronoq: worker.RetryAfter or", b.retryN),
			"   FailOptions.RetryAt; asynq: RetryDelayFunc). Second run's start − (failure + 100 ms)."},
		"mem": {fmt.Sprintf("6. %d jobs due 1 h ahead, payload {\"i\":n}: INFO used_memory delta / jobs.", b.memN)},
		"fair": {fmt.Sprintf("7. %d jobs of one key enqueued first; the 50 handlers start; %d keys x %d jobs enqueued (8 producers,", b.fairHot, b.fairKeys, fairPerKey),
			"   100 a call). Per cold key, its first job to start: wait = handler start - start of its enqueue call; jobs",
			"   started before it = handler starts between the two. Bound: keys with work at its enqueue + 50 in flight",
			"   (\"within one turn of the keys\"); keys over it: cold keys with more jobs started before. First chronoq with",
			"   NewJob.FlowKey, then the same jobs without a key (FIFO); asynq (no keys) is one plain queue in both."},
	}
	for _, name := range scenarioNames {
		if selected[name] {
			for _, l := range notes[name] {
				fmt.Println(l)
			}
		}
	}
}

func parseOnly(s string) (map[string]bool, error) {
	sel := map[string]bool{}
	if strings.TrimSpace(s) == "" {
		for _, n := range scenarioNames {
			sel[n] = true
		}
		return sel, nil
	}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(scenarioNames, n) {
			return nil, fmt.Errorf("-only: unknown scenario %q (have %s)", n, strings.Join(scenarioNames, ","))
		}
		sel[n] = true
	}
	return sel, nil
}

// depVersion is the version of module path this program was built with.
func depVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "(unknown version)"
}

var started = time.Now()

// logf prints progress to stderr; the table goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

// roundsUntil bounds a loop that waits every per round: the rounds until
// ctx's deadline (fallbackDeadline when it has none), plus one.
func roundsUntil(ctx context.Context, every time.Duration) int {
	left := fallbackDeadline
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	return max(int(left/every), 0) + 1
}

// errStopped says a run ended by its deadline or Ctrl-C.
var errStopped = errors.New("stopped by the deadline or Ctrl-C")
