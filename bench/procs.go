package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil/redisproc"
	"github.com/chronoq/chronoq/worker"
)

// Scenario 4's second part: the cost of being on time with several worker
// processes. The same jobs as the first part (lateN due evenly over 1 s,
// and, for comparison, the same number due now) are run by 1, 4 and 16
// worker processes of 50 handlers each (package worker, Concurrency 50):
// this program run again as a child (childEnv names the Redis address),
// on loopback, each stopped when its standard input closes and in any
// case after childLife. The promoter runs in this process. Reported per
// job: Redis's CPU (INFO cpu, from just before the enqueues to the last
// completion) and the Redis commands by INFO commandstats (calls a job,
// scripts counted once as FCALL, or EVALSHA, and their commands again
// under their own names).

const (
	childEnv     = "CHRONOQ_BENCH_LATE_CHILD" // the Redis address; set: run as a worker child
	childLife    = 3 * time.Minute            // a child stops by itself after this
	childStart   = 30 * time.Second           // the most a child may take to say it is ready
	childStop    = 20 * time.Second           // the most a child may take to exit once told
	childReady   = "ready"
	pollComplete = 20 * time.Millisecond // how often the parent reads the completed count
)

// procCounts are the numbers of worker processes scenario 4 runs with.
var procCounts = []int{1, 4, 16}

// runChild is main for a worker child: it serves the queue until its
// standard input closes or childLife passes, then prints the lateness of
// each job it ran (µs, handler start − requested run time) as one JSON
// line, and answers the exit code.
func runChild(addr string) int {
	ctx, cancel := context.WithTimeout(context.Background(), childLife)
	defer cancel()
	s, err := openChronoq(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	defer s.close()
	var mu sync.Mutex
	late := []int64{}
	w, err := worker.New(worker.Config{
		Client:      s.c,
		Queues:      []worker.QueueConfig{{Name: chronoqQueue}},
		Concurrency: concurrency,
		Handler: worker.HandlerFunc(func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
			now := time.Now()
			if p := parsePayload(j.Payload); p.At != 0 {
				mu.Lock()
				late = append(late, now.Sub(time.Unix(0, p.At)).Microseconds())
				mu.Unlock()
			}
			return nil, nil
		}),
		ShutdownTimeout: stopTimeout,
		DisableRegistry: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	working := lifecycle.Start(ctx, w)
	fmt.Println(childReady)
	stdinDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinDone)
	}()
	select {
	case <-stdinDone:
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), stopTimeout)
	defer scancel()
	_ = working.Stop(sctx)
	mu.Lock()
	defer mu.Unlock()
	b, _ := json.Marshal(late)
	fmt.Println(string(b))
	return 0
}

// child is a running worker child.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startChildren starts n worker children and waits until each is ready.
func (b *bench) startChildren(ctx context.Context, n int) ([]*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var kids []*child
	for range n {
		cmd := exec.CommandContext(ctx, self)
		cmd.Env = append(os.Environ(), childEnv+"="+b.addr)
		cmd.Stderr = os.Stderr
		cmd.WaitDelay = childStop
		in, err := cmd.StdinPipe()
		if err != nil {
			stopChildren(kids)
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			stopChildren(kids)
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			stopChildren(kids)
			return nil, err
		}
		kids = append(kids, &child{cmd: cmd, stdin: in, out: bufio.NewReader(out)})
	}
	ready := make(chan error, len(kids))
	for _, k := range kids {
		go func() {
			line, err := k.out.ReadString('\n')
			if err == nil && strings.TrimSpace(line) != childReady {
				err = fmt.Errorf("a worker child said %q", line)
			}
			ready <- err
		}()
	}
	t := time.NewTimer(childStart)
	defer t.Stop()
	for range kids {
		select {
		case err := <-ready:
			if err != nil {
				stopChildren(kids)
				return nil, err
			}
		case <-t.C:
			stopChildren(kids)
			return nil, errors.New("the worker children did not start in time")
		}
	}
	return kids, nil
}

// stopChildren closes the children's standard input, collects the
// lateness each reports, and waits for them to exit (killing any that
// outlive childStop).
func stopChildren(kids []*child) []time.Duration {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	for _, k := range kids {
		_ = k.stdin.Close()
		wg.Go(func() {
			done := make(chan []int64, 1)
			go func() {
				var late []int64
				if line, err := k.out.ReadString('\n'); err == nil {
					_ = json.Unmarshal([]byte(line), &late)
				}
				done <- late
			}()
			var late []int64
			select {
			case late = <-done:
			case <-time.After(childStop):
				_ = k.cmd.Process.Kill()
			}
			_ = k.cmd.Wait()
			mu.Lock()
			for _, us := range late {
				all = append(all, time.Duration(us)*time.Microsecond)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return all
}

// procRun is one pass with n worker children.
type procRun struct {
	jobs       int
	cpu        time.Duration
	cmds       map[string]cmdStat // commandstats deltas
	late       delays
	incomplete bool
}

func (r procRun) cpuPerJob() float64 {
	if r.jobs == 0 {
		return 0
	}
	return float64(r.cpu) / float64(time.Microsecond) / float64(r.jobs)
}

// lateProcs runs lateN jobs with n worker children: due evenly over 1 s
// from 1 s on when scheduled, else due now.
func (b *bench) lateProcs(ctx context.Context, n int, scheduled bool) procRun {
	ctx, cancel := context.WithTimeout(ctx, b.deadline)
	defer cancel()
	res := procRun{incomplete: true}
	if !b.reset() {
		return res
	}
	s, err := openChronoq(b.addr)
	if err != nil {
		logf("chronoq: %v", err)
		return res
	}
	defer s.close()
	stopP, err := promote(ctx, b.addr, b.promoterSkew)
	if err != nil {
		logf("chronoq: %v", err)
		return res
	}
	defer stopP()
	kids, err := b.startChildren(ctx, n)
	if err != nil {
		logf("chronoq: %d worker processes: %v", n, err)
		return res
	}
	stats0, _ := commandStats(b.ctl)
	cpu0 := b.cpu()
	base := time.Now()
	due := b.lateJobs(base)
	sent, err := produce(ctx, lateProducers, b.lateN, enqueueBatch, s.send(false, func(i int) queue.NewJob {
		if !scheduled {
			return chronoqJob(indexPayload(i, base), time.Time{})
		}
		return chronoqJob(indexPayload(i, due[i]), due[i])
	}))
	if err != nil {
		logf("chronoq: %d worker processes: enqueue: %d of %d: %v", n, sent, b.lateN, err)
	}
	done := false
	for range roundsUntil(ctx, pollComplete) {
		if s.completedTotal() >= b.lateN {
			done = true
			break
		}
		if !redisproc.Sleep(ctx, pollComplete) {
			break
		}
	}
	res.cpu = b.cpu() - cpu0
	stats1, _ := commandStats(b.ctl)
	res.cmds = diffStats(stats0, stats1)
	res.jobs = b.lateN
	late := stopChildren(kids)
	if !scheduled {
		late = nil // due now: lateness is the queue's wait, not the point
	}
	res.incomplete = !done
	res.late = newDelays(b.lateN, late, !done)
	if !done {
		logf("chronoq: %d worker processes: not every job completed by the deadline", n)
	}
	return res
}

// lateProcRows runs scenario 4 with each of procCounts worker children and
// adds its rows: Redis CPU a job, scheduled and due now, the lateness, and
// the commands a scheduled job cost.
func (b *bench) lateProcRows(ctx context.Context, t *table) {
	t.add(fmt.Sprintf("4b. the same %d jobs, N worker processes of 50 handlers (chronoq only)", b.lateN), "", "", "")
	for _, n := range procCounts {
		if ctx.Err() != nil {
			return
		}
		sch := b.lateProcs(ctx, n, true)
		now := b.lateProcs(ctx, n, false)
		t.incomplete = t.incomplete || sch.incomplete || now.incomplete
		star := func(r procRun) string {
			if r.incomplete {
				return "*"
			}
			return ""
		}
		t.add(fmt.Sprintf("   %d: redis CPU µs/job, due over 1 s", n), fmt.Sprintf("%.0f%s", sch.cpuPerJob(), star(sch)), "", "")
		t.add(fmt.Sprintf("   %d: redis CPU µs/job, due now", n), fmt.Sprintf("%.0f%s", now.cpuPerJob(), star(now)),
			"", fmt.Sprintf("%.2f× (due/now)", sch.cpuPerJob()/max(now.cpuPerJob(), 1e-9)))
		p50, _ := sch.late.pct(0.50)
		p99, _ := sch.late.pct(0.99)
		t.add(fmt.Sprintf("   %d: lateness p50 / p99, early", n), fmt.Sprintf("%s / %s, %d", dur(p50), dur(p99), sch.late.early()), "", "")
		t.add(fmt.Sprintf("   %d: commands a due job", n), sch.cmdSummary(), "", "")
		logf("chronoq: %d worker processes: commands a due job: %s", n, sch.cmdDetail())
		logf("chronoq: %d worker processes: commands a job due now: %s", n, now.cmdDetail())
	}
}

// cmdStat is one command's INFO commandstats line.
type cmdStat struct {
	calls int64
	usec  int64
}

// commandStats reads INFO commandstats.
func commandStats(ctl *redis.Client) (map[string]cmdStat, error) {
	m, err := info(ctl, "commandstats")
	if err != nil {
		return nil, err
	}
	return parseCommandStats(m), nil
}

// diffStats is b − a, commands that ran only.
func diffStats(a, b map[string]cmdStat) map[string]cmdStat {
	d := map[string]cmdStat{}
	for k, v := range b {
		x := cmdStat{calls: v.calls - a[k].calls, usec: v.usec - a[k].usec}
		if x.calls > 0 {
			d[k] = x
		}
	}
	return d
}

// cmdOrder is the commands of r by calls, most first, but the control
// connection's own INFO.
func (r procRun) cmdOrder() []string {
	names := make([]string, 0, len(r.cmds))
	for k := range r.cmds {
		if k != "info" {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if r.cmds[names[i]].calls != r.cmds[names[j]].calls {
			return r.cmds[names[i]].calls > r.cmds[names[j]].calls
		}
		return names[i] < names[j]
	})
	return names
}

// cmdSummary is the commands a job, the script calls first: "fcall 1.3, ...".
func (r procRun) cmdSummary() string {
	if r.jobs == 0 {
		return ""
	}
	names := r.cmdOrder()
	for _, script := range []string{"evalsha", "fcall"} { // the script calls first: FCALL's on Redis 7, EVALSHA's before
		if i := slices.Index(names, script); i > 0 && float64(r.cmds[script].calls)/float64(r.jobs) >= 0.05 {
			names = append([]string{script}, slices.Delete(names, i, i+1)...)
		}
	}
	var parts []string
	for _, k := range names[:min(len(names), 6)] {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(r.cmds[k].calls)/float64(r.jobs)))
	}
	return strings.Join(parts, ", ")
}

// cmdDetail is every command: calls and µs (Redis's own, in the command) a job.
func (r procRun) cmdDetail() string {
	if r.jobs == 0 {
		return ""
	}
	var parts []string
	for _, k := range r.cmdOrder() {
		c := r.cmds[k]
		parts = append(parts, fmt.Sprintf("%s %.2f (%.1f µs)", k, float64(c.calls)/float64(r.jobs), float64(c.usec)/float64(r.jobs)))
	}
	return strings.Join(parts, ", ")
}

// parseCommandStats reads INFO commandstats lines
// ("cmdstat_get:calls=1,usec=2,...").
func parseCommandStats(m map[string]string) map[string]cmdStat {
	out := map[string]cmdStat{}
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var c cmdStat
		for _, f := range strings.Split(v, ",") {
			key, val, _ := strings.Cut(f, "=")
			switch key {
			case "calls":
				c.calls, _ = strconv.ParseInt(val, 10, 64)
			case "usec":
				c.usec, _ = strconv.ParseInt(val, 10, 64)
			}
		}
		out[name] = c
	}
	return out
}
