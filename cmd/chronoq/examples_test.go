//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// exampleWorker is one of the example workers in another language.
type exampleWorker struct {
	name string
	dir  string // from this package's directory
	// tools are the programs it needs; prepare builds and checks it;
	// command is how it runs, from dir.
	tools   []string
	prepare func(t *testing.T, dir string)
	command []string
	version string // what it registers as its version
}

var exampleWorkers = []exampleWorker{{
	name:  "typescript",
	dir:   "../../examples/worker-ts",
	tools: []string{"node", "npm"},
	prepare: func(t *testing.T, dir string) {
		if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
			t.Fatalf("%s/node_modules is missing: run make examples-deps (npm ci) first", dir)
		}
		// The types from the document as it is now, and the worker
		// compiled, so type-checked, against them.
		runIn(t, dir, "npm", "run", "--silent", "generate")
		runIn(t, dir, "npm", "run", "--silent", "build")
	},
	command: []string{"node", "dist/main.js"},
	version: "worker-ts",
}, {
	name:  "python",
	dir:   "../../examples/worker-py",
	tools: []string{"python3"},
	prepare: func(t *testing.T, dir string) {
		// Its dataclasses against the document's schemas.
		runIn(t, dir, "python3", "-m", "unittest", "--quiet")
	},
	command: []string{"python3", "main.py"},
	version: "worker-py",
}}

// runIn runs a command in dir, failing the test with its output when it
// fails.
func runIn(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s in %s:\n%s", name, strings.Join(args, " "), dir, out)
}

// TestExampleWorkers runs the example workers in TypeScript and Python
// (examples/worker-ts, examples/worker-py) against a real serve, on a
// real Redis and with a token: jobs that succeed, that fail then succeed
// (by the job's backoff, and by the worker's retry_after), one that dies
// at once, one that runs past its visibility on heartbeats, one whose
// lease the worker loses while it is stopped (SIGSTOP), one canceled while
// it runs; then a SIGTERM, after which the worker claims nothing more,
// lets its running job finish, deregisters and exits 0.
//
// A worker whose language is not installed skips, unless
// CHRONOQ_REQUIRE_EXAMPLES=1 (as in CI), when it fails.
func TestExampleWorkers(t *testing.T) {
	t.Parallel()
	for _, w := range exampleWorkers {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			for _, tool := range w.tools {
				if _, err := exec.LookPath(tool); err != nil {
					msg := fmt.Sprintf("%s not found: the %s example worker needs it (scripts/ensure-deps.sh --examples installs it on Debian)", tool, w.name)
					if os.Getenv("CHRONOQ_REQUIRE_EXAMPLES") == "1" {
						t.Fatal(msg)
					}
					t.Skip(msg)
				}
			}
			w.prepare(t, w.dir)
			testExampleWorker(t, w)
		})
	}
}

// workerProcess is an example worker running as a child process, with
// the events it logs (one JSON object a line on stdout).
type workerProcess struct {
	cmd    *exec.Cmd
	stderr *testutil.LogBuffer
	exited chan struct{} // closed when it has exited
	err    error         // its exit, once exited is closed

	mu      sync.Mutex
	events  []map[string]any
	changed chan struct{} // closed and replaced at each new event
}

func startWorker(t *testing.T, w exampleWorker, env ...string) *workerProcess {
	t.Helper()
	// Killed, if still running, when the test ends.
	cmd := exec.CommandContext(t.Context(), w.command[0], w.command[1:]...)
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), append([]string{"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1"}, env...)...)
	p := &workerProcess{cmd: cmd, stderr: &testutil.LogBuffer{}, exited: make(chan struct{}), changed: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e map[string]any
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = map[string]any{"event": "unparsed", "line": sc.Text()}
			}
			p.mu.Lock()
			p.events = append(p.events, e)
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	go func() {
		<-lines // Wait closes stdout: read it all first
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		<-p.exited
		if t.Failed() {
			t.Logf("%s worker's events:\n%s\nits stderr:\n%s", w.name, p.dump(), p.stderr)
		}
	})
	return p
}

func (p *workerProcess) dump() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b bytes.Buffer
	for _, e := range p.events {
		line, _ := json.Marshal(e)
		b.Write(append(line, '\n'))
	}
	return b.String()
}

// find returns the events that match.
func (p *workerProcess) find(match func(map[string]any) bool) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, e := range p.events {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits until an event matches and returns it.
func (p *workerProcess) waitFor(t *testing.T, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if found := p.find(match); len(found) > 0 {
			return found[0]
		}
		select {
		case <-changed:
		case <-p.exited:
			if found := p.find(match); len(found) > 0 {
				return found[0]
			}
			t.Fatalf("the worker exited (%v) before %s", p.err, what)
		case <-deadline:
			t.Fatalf("no %s in a minute", what)
		}
	}
}

// event matches the events named so, of job id when id is not empty.
func event(name, id string) func(map[string]any) bool {
	return func(e map[string]any) bool { return e["event"] == name && (id == "" || e["job"] == id) }
}

// failure matches the events that tell something went wrong: an error the
// worker met, or a line that is no event.
func failure(e map[string]any) bool {
	name, _ := e["event"].(string)
	return name == "unparsed" || strings.HasSuffix(name, "_error")
}

// signal sends sig to the worker.
func (p *workerProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// enqueue enqueues jobs in one batch and returns their ids in order.
func (s *served) enqueue(t *testing.T, q string, jobs ...string) []string {
	t.Helper()
	for i, j := range jobs {
		jobs[i] = `{"queue":"` + q + `",` + strings.TrimPrefix(j, "{")
	}
	status, body := s.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[`+strings.Join(jobs, ",")+`]}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	var ids []string
	for _, j := range body["jobs"].([]any) {
		ids = append(ids, j.(map[string]any)["id"].(string))
	}
	return ids
}

// ended waits until the job has ended (completed, dead or canceled) and
// returns it.
func (s *served) ended(t *testing.T, q, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		status, job := s.do(t, http.MethodGet, "/v1/queues/"+q+"/jobs/"+id, "")
		require.Equal(t, http.StatusOK, status, "%v", job)
		switch job["status"] {
		case "completed", "dead", "canceled":
			return job
		}
		require.True(t, time.Now().Before(deadline), "job %s still %s after a minute: %v", id, job["status"], job)
		time.Sleep(50 * time.Millisecond)
	}
}

func testExampleWorker(t *testing.T, w exampleWorker) {
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
		"--namespace", testutil.Namespace(t), "--token", "tok"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.logs)
		}
	})
	const q = "examples"
	id := "example-" + w.name
	p := startWorker(t, w, "CHRONOQ_URL="+s.base, "CHRONOQ_TOKEN=tok", "CHRONOQ_QUEUE="+q,
		"CHRONOQ_WORKER_ID="+id, "CHRONOQ_CONCURRENCY=4", "CHRONOQ_POLL_WAIT=1s")
	p.waitFor(t, "started", event("started", ""))
	status, reg := s.do(t, http.MethodGet, "/v1/workers/"+id, "")
	require.Equal(t, http.StatusOK, status, "%v", reg)
	require.Equal(t, w.version, reg["version"])
	require.Equal(t, []any{q}, reg["queues"])

	// Jobs that succeed, fail then succeed, die, and run past their
	// visibility. The retry_after job's own backoff is an hour: it is
	// retried in time only if the worker's retry_after is taken.
	ids := s.enqueue(t, q,
		`{"kind":"greet","payload":{"name":"Ada"}}`,
		`{"kind":"greet","payload":{"name":"Grace"}}`,
		`{"kind":"greet","payload":{"name":"Edsger"}}`,
		`{"kind":"flaky","payload":{"fail_times":1},"backoff":{"initial":"100ms","jitter":0}}`,
		`{"kind":"flaky","payload":{"fail_times":1,"retry_after":"200ms"},"backoff":{"initial":"1h"}}`,
		`{"kind":"slow","payload":{"seconds":4},"visibility":"1500ms"}`,
		`{"kind":"poison"}`,
	)
	for i, name := range []string{"Ada", "Grace", "Edsger"} {
		job := s.ended(t, q, ids[i])
		require.Equal(t, "completed", job["status"], "%v", job)
		require.Equal(t, map[string]any{"greeting": "Hello, " + name + "!"}, job["result"])
		require.Equal(t, float64(1), job["attempts"])
	}
	for _, fid := range ids[3:5] {
		job := s.ended(t, q, fid)
		require.Equal(t, "completed", job["status"], "%v", job)
		require.Equal(t, map[string]any{"attempts": float64(2)}, job["result"])
		require.Equal(t, float64(2), job["attempts"])
		require.Len(t, p.find(func(e map[string]any) bool {
			return e["event"] == "failed" && e["job"] == fid && e["error"] == "attempt 1 of 2 fails on purpose"
		}), 1)
	}
	job := s.ended(t, q, ids[5])
	require.Equal(t, "completed", job["status"], "%v", job)
	require.Equal(t, map[string]any{"slept": float64(4)}, job["result"])
	require.Equal(t, float64(1), job["attempts"], "its lease never lapsed")
	require.Equal(t, float64(1), job["fence"])
	progress, _ := job["progress"].(map[string]any)
	require.Equal(t, float64(100), progress["percent"], "%v", job)
	require.Equal(t, "second 4 of 4", progress["message"])
	job = s.ended(t, q, ids[6])
	require.Equal(t, "dead", job["status"], "%v", job)
	require.Equal(t, float64(1), job["attempts"])
	require.Equal(t, "poison: this job can never succeed", job["last_error"])

	status, stats := s.do(t, http.MethodGet, "/v1/queues/"+q, "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, float64(6), stats["completed_total"], "%v", stats)
	require.Equal(t, float64(2), stats["retried_total"], "%v", stats)
	require.Equal(t, float64(1), stats["dead_total"], "%v", stats)
	require.Equal(t, float64(0), stats["reclaimed_total"], "no lease lapsed: %v", stats)
	require.Empty(t, p.find(func(e map[string]any) bool { return e["event"] == "lease_lost" || failure(e) }))

	// Its lease lost: the worker is stopped while the job runs, past the
	// lease; the job is reclaimed. Once it runs again, the stale run gets
	// lease_lost, gives up and sends nothing; the job runs again, by the
	// same worker, and completes under its new claim.
	lost := s.enqueue(t, q, `{"kind":"slow","payload":{"seconds":4},"visibility":"2s"}`)[0]
	p.waitFor(t, "the claim of the job to lose", event("claimed", lost))
	p.signal(t, syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		s.do(t, http.MethodPost, "/v1/queues/"+q+"/reclaim", "")
		_, job := s.do(t, http.MethodGet, "/v1/queues/"+q+"/jobs/"+lost, "")
		if job["status"] == "pending" || job["fence"] != float64(1) {
			break
		}
		require.True(t, time.Now().Before(deadline), "never reclaimed: %v", job)
		time.Sleep(50 * time.Millisecond)
	}
	p.signal(t, syscall.SIGCONT)
	stopped = false
	job = s.ended(t, q, lost)
	require.Equal(t, "completed", job["status"], "%v", job)
	require.Equal(t, map[string]any{"slept": float64(4)}, job["result"])
	require.Greater(t, job["fence"], float64(1))
	stale := p.waitFor(t, "lease_lost of the first claim", func(e map[string]any) bool {
		return e["event"] == "lease_lost" && e["job"] == lost && e["fence"] == float64(1)
	})
	require.Equal(t, "heartbeat", stale["via"], "a heartbeat told the stale run, which gave up: %v", stale)
	done := p.waitFor(t, "the completion", event("completed", lost))
	require.Equal(t, job["fence"], done["fence"], "one completion, under the last claim")
	require.Len(t, p.find(event("completed", lost)), 1)

	// Canceled while it runs: the next heartbeat says so, the handler gives
	// up (it would run ten minutes, past the wait for its end), and the
	// worker ends the job canceled.
	canceled := s.enqueue(t, q, `{"kind":"slow","payload":{"seconds":600},"visibility":"1s"}`)[0]
	p.waitFor(t, "the claim of the job to cancel", event("claimed", canceled))
	status, job = s.do(t, http.MethodDelete, "/v1/queues/"+q+"/jobs/"+canceled, "")
	require.Equal(t, http.StatusOK, status, "%v", job)
	require.Equal(t, "processing", job["status"])
	job = s.ended(t, q, canceled)
	require.Equal(t, "canceled", job["status"], "%v", job)
	p.waitFor(t, "canceled", event("canceled", canceled))

	// SIGTERM: no more claims once its claim under way ends; the running
	// job finishes; then it deregisters and exits 0.
	last := s.enqueue(t, q, `{"kind":"slow","payload":{"seconds":2}}`)[0]
	p.waitFor(t, "the claim of the last job", event("claimed", last))
	p.signal(t, syscall.SIGTERM)
	p.waitFor(t, "draining", event("draining", ""))
	late := s.enqueue(t, q, `{"kind":"greet","payload":{"name":"Late"}}`)[0]
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatal("the worker did not exit within a minute of SIGTERM")
	}
	require.NoError(t, p.err, "a clean exit")
	require.NotEmpty(t, p.find(event("stopped", "")))
	job = s.ended(t, q, last)
	require.Equal(t, "completed", job["status"], "%v", job)
	require.Equal(t, float64(1), job["attempts"])
	_, job = s.do(t, http.MethodGet, "/v1/queues/"+q+"/jobs/"+late, "")
	require.Equal(t, "pending", job["status"], "claimed after SIGTERM: %v", job)
	require.Empty(t, p.find(event("claimed", late)))
	status, _ = s.do(t, http.MethodGet, "/v1/workers/"+id, "")
	require.Equal(t, http.StatusNotFound, status, "deregistered")

	require.Empty(t, p.find(failure))
}
