package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil/redisproc"
)

// BenchmarkCallInstructions counts the machine instructions Redis runs in
// one script call of each step of a job's path, one job a call, under
// valgrind's callgrind (instrumenting FCALL only: the script, the commands
// it calls, KEYS and ARGV made into Lua tables, the reply). Seconds on a
// shared machine vary by 2× from one hour to the next; these counts do
// not (the same binary and data give the same count within a percent), so
// a change to a script is measured here first, and in seconds after.
//
// The queue holds 3,000 jobs scheduled an hour ahead and 3,000 completed
// ones, so that its hashes and sorted sets have left Redis's small
// encodings, as a working queue's have. The steps, each calls times:
//
//   - enqueue-now, enqueue-later: Enqueue of one job due now, or in 3 s;
//   - claim-due: the Claim that promotes one of those, once due, and
//     claims it (the scheduled path: no promoter runs here);
//   - complete: Complete of that job, right after its claim;
//   - fail: Fail of a claimed job, its retry an hour later;
//   - fail-of-50: the same failure, of 50 jobs in one FailMany (its
//     figure is a job's share of the call).
//
// Each reported figure is instructions a call (x1000, "kinstr"). The
// counts need valgrind (Debian's package of that name) and are skipped
// without it. make bench-instr installs it and runs this benchmark.
func BenchmarkCallInstructions(b *testing.B) {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		b.Skip("valgrind is not installed (Debian: apt-get install valgrind)")
	}
	ctl, err := exec.LookPath("callgrind_control")
	if err != nil {
		b.Skip("callgrind_control is not installed (it comes with valgrind)")
	}
	srvBin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Skip("redis-server is not installed")
	}
	for range b.N {
		kinstr := callInstructions(b, vg, ctl, srvBin)
		for _, step := range []string{"enqueue-now", "enqueue-later", "claim-due", "complete", "fail", "fail-of-50"} {
			b.ReportMetric(kinstr[step], step+"-kinstr")
		}
		b.ReportMetric(kinstr["claim-due"]+kinstr["complete"], "due-job-kinstr")
	}
}

// callInstructions runs the steps against a redis-server under callgrind
// and answers thousands of instructions a call by step.
func callInstructions(b *testing.B, vg, ctl, srvBin string) map[string]float64 {
	// redis-server under valgrind, started as redisproc starts any
	// redis-server (a free port, its arguments, ready when it answers as
	// the process started: valgrind runs it in its own process) through a
	// script that puts valgrind in front.
	dir := b.TempDir()
	out := filepath.Join(dir, "cg.out")
	wrapper := filepath.Join(dir, "redis-under-callgrind")
	script := fmt.Sprintf("#!/bin/sh\nexec %q --tool=callgrind --toggle-collect=fcallCommand --callgrind-out-file=%q %q \"$@\"\n",
		vg, out, srvBin)
	require.NoError(b, os.WriteFile(wrapper, []byte(script), 0o755))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := redisproc.Start(ctx, "callgrind redis-server", wrapper, dir, nil, false)
	require.NoError(b, err)
	b.Cleanup(srv.Stop)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: "instr"})
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })

	payload := func(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)) }
	for r := range 30 { // a working queue's size: see the doc above
		jobs := make([]queue.NewJob, 100)
		for i := range jobs {
			jobs[i] = queue.NewJob{Queue: "q", Kind: "bench", Payload: payload(r*100 + i), RunAt: time.Now().Add(time.Hour)}
		}
		_, err := c.EnqueueBatch(ctx, jobs)
		require.NoError(b, err)
		for i := range jobs {
			jobs[i].RunAt = time.Time{}
		}
		_, err = c.EnqueueBatch(ctx, jobs)
		require.NoError(b, err)
		js, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: 100})
		require.NoError(b, err)
		acks := make([]queue.Ack, len(js))
		for i, j := range js {
			acks[i] = queue.Ack{ID: j.ID, Token: j.Token}
		}
		_, _, err = c.CompleteMany(ctx, "q", acks)
		require.NoError(b, err)
	}

	// dump has callgrind write what it counted since the last dump, and
	// reset its counters; what it counted goes to step's total ("setup":
	// nowhere).
	total := map[string]int64{}
	summary := regexp.MustCompile(`(?m)^summary: (\d+)$`)
	seq := 0
	dump := func(step string) {
		outp, err := exec.CommandContext(ctx, ctl, "-d", step, strconv.Itoa(srv.Pid())).CombinedOutput()
		require.NoError(b, err, "callgrind_control: %s", outp)
		seq++
		if step == "setup" {
			return
		}
		text, err := os.ReadFile(out + "." + strconv.Itoa(seq))
		require.NoError(b, err)
		m := summary.FindSubmatch(text)
		require.NotNil(b, m, "no summary in callgrind's dump %d", seq)
		v, err := strconv.ParseInt(string(m[1]), 10, 64)
		require.NoError(b, err)
		total[step] += v
		if step == "fail" {
			_ = os.WriteFile(os.Getenv("CG_KEEP"), text, 0o644)
		}
	}
	dump("setup")
	const calls = 40
	for i := range calls {
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "bench", Payload: payload(i)})
		require.NoError(b, err)
	}
	dump("enqueue-now")
	js, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: calls})
	require.NoError(b, err)
	require.Len(b, js, calls)
	for _, j := range js {
		require.NoError(b, c.Complete(ctx, "q", j.ID, j.Token, queue.CompleteOptions{}))
	}
	dump("setup")
	due := time.Now().Add(3 * time.Second) // the enqueues under valgrind take about a second
	for i := range calls {
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "bench", Payload: payload(i), RunAt: due})
		require.NoError(b, err)
	}
	dump("enqueue-later")
	require.True(b, redisproc.Sleep(ctx, time.Until(due)+200*time.Millisecond))
	for range calls {
		js, err := c.Claim(ctx, "q", queue.ClaimOptions{})
		require.NoError(b, err)
		require.Len(b, js, 1)
		dump("claim-due")
		require.NoError(b, c.Complete(ctx, "q", js[0].ID, js[0].Token, queue.CompleteOptions{}))
		dump("complete")
	}
	for i := range calls {
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "bench", Payload: payload(i)})
		require.NoError(b, err)
	}
	js, err = c.Claim(ctx, "q", queue.ClaimOptions{Max: calls})
	require.NoError(b, err)
	require.Len(b, js, calls)
	dump("setup")
	for _, j := range js {
		res, err := c.Fail(ctx, "q", j.ID, j.Token, queue.FailOptions{Error: "smtp: 421 try again", RetryIn: time.Hour})
		require.NoError(b, err)
		require.Equal(b, queue.StatusScheduled, res.Status)
	}
	dump("fail")
	const batch = 50
	for range calls / 10 {
		jobs := make([]queue.NewJob, batch)
		for i := range jobs {
			jobs[i] = queue.NewJob{Queue: "q", Kind: "bench", Payload: payload(i)}
		}
		_, err := c.EnqueueBatch(ctx, jobs)
		require.NoError(b, err)
		js, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: batch})
		require.NoError(b, err)
		require.Len(b, js, batch)
		fails := make([]queue.Failed, len(js))
		for i, j := range js {
			fails[i] = queue.Failed{ID: j.ID, Token: j.Token, FailOptions: queue.FailOptions{Error: "smtp: 421 try again", RetryIn: time.Hour}}
		}
		dump("setup")
		res, errs, err := c.FailMany(ctx, "q", fails)
		require.NoError(b, err)
		for i := range res {
			require.NoError(b, errs[i])
			require.Equal(b, queue.StatusScheduled, res[i].Status)
		}
		dump("fail-of-50")
	}

	per := map[string]float64{}
	for step, v := range total {
		per[step] = float64(v) / calls / 1000
	}
	per["fail-of-50"] = float64(total["fail-of-50"]) / (calls / 10 * batch) / 1000
	return per
}
