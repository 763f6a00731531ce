package main

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// The zero-setup default, run as a user runs it: the chronoq binary
// (built here), no REDIS_URL, a HOME of its own.

var binary struct {
	once sync.Once
	path string
	err  error
}

// chronoqBinary builds this package once for the test binary.
func chronoqBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "chronoq-bin-*")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "chronoq")
		out, err := exec.CommandContext(context.Background(), "go", "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = errors.New(string(out) + err.Error())
		}
	})
	if binary.err != nil {
		t.Fatalf("building chronoq: %v", binary.err)
	}
	return binary.path
}

// process is a running `chronoq serve`.
type process struct {
	*redisproc.Child
	base string
}

var servingRE = regexp.MustCompile(`msg="chronoq serving" addr=(\S+)`)

// runServe starts `chronoq args...` with home as HOME, no Redis named,
// the environment's other variables (PATH among them) overridden by env,
// and waits until it serves.
func runServeBinary(t *testing.T, home string, env []string, args ...string) *process {
	t.Helper()
	bin := chronoqBinary(t)
	logPath := filepath.Join(t.TempDir(), "serve.log")
	env = append([]string{"HOME=" + home, "XDG_STATE_HOME=", "REDIS_URL=", "CHRONOQ_REDIS_CLUSTER=", "CHRONOQ_DATA_DIR=",
		"CHRONOQ_LOCAL_REDIS=", "CHRONOQ_LISTEN=127.0.0.1:0"}, env...)
	c, err := redisproc.StartChildEnv("chronoq", bin, args, env, home, logPath)
	require.NoError(t, err)
	t.Cleanup(func() { c.Stop(15 * time.Second) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := servingRE.FindStringSubmatch(c.LogTail(1 << 20)); m != nil {
			return &process{Child: c, base: "http://" + m[1]}
		}
		if !c.Running() || time.Now().After(deadline) {
			t.Fatalf("chronoq did not serve:\n%s", c.LogTail(1<<14))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstLine is the first line chronoq logged.
func (p *process) firstLine() string {
	line, _, _ := strings.Cut(p.LogTail(1<<20), "\n")
	return line
}

// terminate stops it as a service manager does (SIGTERM), and waits.
func (p *process) terminate(t *testing.T) {
	t.Helper()
	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGTERM))
	select {
	case <-p.Done():
		require.NoError(t, p.Err(), "%s", p.LogTail(1<<14))
	case <-time.After(30 * time.Second):
		t.Fatalf("chronoq did not stop on SIGTERM:\n%s", p.LogTail(1<<14))
	}
}

func (p *process) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	s := served{base: p.base}
	return s.do(t, method, path, body)
}

// acknowledge leaves one job of each state the restart must keep: a
// pending one, a scheduled one and a dead one; it answers their ids.
func acknowledge(t *testing.T, p *process) (pending, scheduled, dead string) {
	t.Helper()
	status, body := p.do(t, http.MethodPost, "/v1/jobs", `{"queue":"kept","kind":"dies","max_attempts":1}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	dead = body["id"].(string)
	status, body = p.do(t, http.MethodPost, "/v1/queues/kept/claim", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	job := body["jobs"].([]any)[0].(map[string]any)
	require.Equal(t, dead, job["id"])
	status, body = p.do(t, http.MethodPost, "/v1/queues/kept/jobs/"+dead+"/fail", `{"token":"`+job["token"].(string)+`","error":"boom"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, "dead", body["status"])

	status, body = p.do(t, http.MethodPost, "/v1/jobs", `{"queue":"kept","kind":"waits","payload":{"n":1}}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	pending = body["id"].(string)
	status, body = p.do(t, http.MethodPost, "/v1/jobs", `{"queue":"kept","kind":"later","delay":"1h"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Equal(t, "scheduled", body["status"])
	scheduled = body["id"].(string)
	return pending, scheduled, dead
}

// stillThere checks the jobs acknowledge left, after a restart: the
// pending one claimable, the scheduled one still scheduled, the dead one
// retryable.
func stillThere(t *testing.T, p *process, pending, scheduled, dead string) {
	t.Helper()
	status, body := p.do(t, http.MethodGet, "/v1/queues/kept/jobs/"+scheduled, "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, "scheduled", body["status"])
	status, body = p.do(t, http.MethodGet, "/v1/queues/kept/jobs/"+dead, "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, "dead", body["status"])

	status, body = p.do(t, http.MethodPost, "/v1/queues/kept/claim", `{"max":10}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	jobs := body["jobs"].([]any)
	require.Len(t, jobs, 1, "the pending job, and no other")
	require.Equal(t, pending, jobs[0].(map[string]any)["id"])

	status, body = p.do(t, http.MethodPost, "/v1/queues/kept/dead/retry", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = p.do(t, http.MethodPost, "/v1/queues/kept/claim", `{"max":10}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	jobs = body["jobs"].([]any)
	require.Len(t, jobs, 1, "the dead job, retried")
	require.Equal(t, dead, jobs[0].(map[string]any)["id"])
}

// TestServeKeepsJobsAcrossARestart: without REDIS_URL, a job acknowledged
// before SIGTERM is there after the restart, with redis-server on the
// PATH (a child with an append-only file) and without (the embedded Redis
// and its snapshot). The first log line says which, and where the data
// is; a second serve on the same data directory is refused.
func TestServeKeepsJobsAcrossARestart(t *testing.T) {
	t.Parallel()
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip(redisproc.NotFound)
	}
	for _, tc := range []struct {
		name, path, form string
	}{
		// Only redis-server's directory, and an empty one, on the PATH.
		{"RedisServer", filepath.Dir(redisServer), "running a redis-server of its own"},
		{"Embedded", "", "no redis-server on the PATH: using an embedded in-memory Redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			chronoqBinary(t) // built with the test's own PATH
			home := t.TempDir()
			path := tc.path
			if path == "" {
				path = t.TempDir()
			}
			env := []string{"PATH=" + path}
			p := runServeBinary(t, home, env, "serve")
			dataDir := filepath.Join(home, ".local", "state", "chronoq")
			first := p.firstLine()
			require.Contains(t, first, tc.form)
			require.Contains(t, first, "data_dir="+dataDir)

			second := runServeBinaryFails(t, home, env, "serve")
			require.Contains(t, second, "data directory "+dataDir+" is in use by another chronoq (pid "+strconv.Itoa(p.Pid())+")")

			pending, scheduled, dead := acknowledge(t, p)
			p.terminate(t)
			p = runServeBinary(t, home, env, "serve")
			stillThere(t, p, pending, scheduled, dead)
			p.terminate(t)
		})
	}
}

// runServeBinaryFails runs chronoq as runServeBinary does, expects it to
// exit with a failure at start, and answers its log.
func runServeBinaryFails(t *testing.T, home string, env []string, args ...string) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "serve.log")
	env = append([]string{"HOME=" + home, "XDG_STATE_HOME=", "REDIS_URL=", "CHRONOQ_REDIS_CLUSTER=", "CHRONOQ_DATA_DIR=",
		"CHRONOQ_LOCAL_REDIS=", "CHRONOQ_LISTEN=127.0.0.1:0"}, env...)
	c, err := redisproc.StartChildEnv("chronoq", chronoqBinary(t), args, env, home, logPath)
	require.NoError(t, err)
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		c.Kill()
		t.Fatalf("chronoq did not exit:\n%s", c.LogTail(1<<14))
	}
	require.Error(t, c.Err())
	return c.LogTail(1 << 14)
}

// childrenOf answers the pids of the processes whose parent is pid, by
// their command name (Linux's /proc).
func childrenOf(t *testing.T, pid int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	out := map[int]string{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so from the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		j := strings.IndexByte(s, '(')
		if i < 0 || j < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out[n] = s[j+1 : i]
		}
	}
	return out
}

// alive reports whether pid runs (a zombie counts as ended).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// TestServeKilledLeavesNoRedisServer: kill -9 of serve takes its
// redis-server child with it, and what was acknowledged is there at the
// next start (the append-only file is fsynced at every write).
func TestServeKilledLeavesNoRedisServer(t *testing.T) {
	t.Parallel()
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip(redisproc.NotFound)
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs Linux's /proc to find the child")
	}
	home := t.TempDir()
	env := []string{"PATH=" + filepath.Dir(redisServer)}
	p := runServeBinary(t, home, env, "serve")
	var child int
	for pid, comm := range childrenOf(t, p.Pid()) {
		if strings.HasPrefix(comm, "redis-server") {
			child = pid
		}
	}
	require.NotZero(t, child, "serve runs a redis-server child: %v", childrenOf(t, p.Pid()))
	pending, scheduled, dead := acknowledge(t, p)

	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGKILL))
	<-p.Done()
	require.Eventually(t, func() bool { return !alive(child) }, 10*time.Second, 10*time.Millisecond,
		"redis-server %d outlived its serve", child)

	p = runServeBinary(t, home, env, "serve")
	stillThere(t, p, pending, scheduled, dead)
	p.terminate(t)
}

// TestServeReadmeFirstCommand: the README's first command, as written
// (with the address chosen by CHRONOQ_LISTEN), runs on a fresh HOME and
// takes a job.
func TestServeReadmeFirstCommand(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../README.md")
	require.NoError(t, err)
	defer f.Close()
	var first string
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "```") {
			if in {
				break
			}
			in = true
			continue
		}
		if in {
			first = sc.Text()
			break
		}
	}
	cmd, _, _ := strings.Cut(first, "#")
	args, ok := strings.CutPrefix(strings.TrimSpace(cmd), "go run ./cmd/chronoq ")
	require.True(t, ok, "the README's first command runs chronoq: %q", first)
	home := t.TempDir()
	p := runServeBinary(t, home, nil, strings.Fields(args)...)
	require.Contains(t, p.firstLine(), "data_dir="+filepath.Join(home, ".local", "state", "chronoq"))
	status, body := p.do(t, http.MethodPost, "/v1/jobs", `{"queue":"emails","kind":"welcome","payload":{"to":"a@example.com"}}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	p.terminate(t)
}
