//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// walkthrough is a shell block of README.md or docs/API.md, known by its
// first line, and what its output must hold.
type walkthrough struct {
	doc, first string
	// ownServe: the block starts its own serve (on the port the test
	// gives it through CHRONOQ_LISTEN); otherwise the test starts one.
	ownServe bool
	want     []string // regular expressions its output must match, in order
}

var walkthroughs = []walkthrough{{
	doc: "README.md", first: "# schedule a job 10 seconds from now",
	want: []string{
		`"status":"scheduled"`,
		`(?s)"jobs":\[\{"id":"[0-9a-z]+","queue":"emails","kind":"welcome".*?"token":`,
		`"status":"completed".*?"result":\{"sent":true\}`,
		`"completed_total":1`,
		`"code":"lease_lost"`,
	},
}, {
	doc: "README.md", first: "go run ./cmd/chronoq serve --dispatch-allow 127.0.0.1 &", ownServe: true,
	want: []string{
		`"secrets":\["whsec_[^"]+"\],"concurrency":100,"labels":\[\]`,
		`"kind":"chronoq.push|"kind":"greet"`,
		`"status":"completed".*?"attempts":2.*?"deliveries":\[`,
	},
}, {
	doc: "README.md", first: "curl -s -X POST localhost:8080/v1/webhooks -H 'Content-Type: application/json' \\",
	want: []string{`"id":"[0-9a-f]{16}","url":"https://hooks.example.com/chronoq"`, `"queues":\["emails"\]`,
		`"events":\["job.dead"\],"secrets":\["whsec_[^"]+"\]`},
}, {
	doc: "README.md", first: "curl -s -X PUT localhost:8080/v1/queues/hooks/limits -d '{\"rate\":200,\"max_in_flight\":10}'",
	want: []string{`^\{"rate":200,"burst":20,"max_in_flight":10\}`},
}, {
	doc: "README.md", first: "go run ./cmd/chronoq enqueue --queue emails --kind welcome --in 10s --payload '{\"to\":\"a@example.com\"}'",
	want: []string{
		`[0-9a-z]+\s+scheduled`,
		`emails`,
		`scheduled`,
		`requeued 0`,
	},
}, {
	doc: "README.md", first: "# fetch, then transform, then load: each a job, here all in the queue \"etl\"",
	want: []string{
		`"status":"running"`,
		`"kind":"fetch".*?"workflow":\{"id":"[0-9a-z]+","node":"fetch"\}`,
		`"status":"completed".*?"result":\{"rows":42\}`,
		`"kind":"transform".*?"upstream":\{"fetch":\{[^}]*"result":\{"rows":42\}`,
		`"nodes":\[\{"name":"fetch","depends_on":\[\],"queue":"etl","job_id":"[0-9a-z]+","status":"completed"`,
		`\{"name":"transform","depends_on":\["fetch"\],"queue":"etl","job_id":"[0-9a-z]+","status":"processing"`,
	},
}, {
	doc: "docs/API.md", first: "# a job due in 10 seconds",
	want: []string{
		`"status":"scheduled"`,
		`"jobs":\[\{"id":"[0-9a-z]+","queue":"emails"`,
		`"status":"completed".*?"result":\{"sent":true\}`,
		`"completed_total":1`,
	},
}}

// notWalkthroughs are the shell blocks the test does not run, by their
// first command (the first line without its comment), and why.
var notWalkthroughs = map[string]string{
	"go run ./cmd/chronoq serve": "starts the server the walk-throughs run against (and make test, the whole suite)",
	"go run ./cmd/chronoq demo":  "a server for the browser (TestDemo runs it)",
	"REDIS_URL=redis://127.0.0.1:6379/0 CHRONOQ_TOKEN=secret go run ./cmd/chronoq serve":                     "production set-ups: a Redis Cluster, docker compose",
	"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=chronoq go run ./cmd/chronoq serve": "a server that exports its traces to an OTLP receiver (TestServeExportsTracesOverOTLP runs serve with these variables against one)",
}

// shellCommand is a shell line without its trailing comment.
func shellCommand(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.TrimSpace(line)
}

// shellBlocks answers the ```sh blocks of a Markdown file.
func shellBlocks(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && line == "```sh":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	require.False(t, in, "%s: a shell block is not closed", file)
	return blocks
}

// TestWalkthroughs runs every shell walk-through of README.md and
// docs/API.md as written, with bash, against a real chronoq serve on
// loopback and a real redis-server, and checks what it prints. The one
// change made to a block is its port: localhost:8080 and the push
// receiver's 127.0.0.1:9000 become free ports. `go` runs in the
// repository (a wrapper on PATH), so `go run ./cmd/chronoq` and `go run
// ./examples/push-receiver` work while the block's files (claim.json)
// go to a directory of its own. A shell block that is neither a
// walk-through here nor listed in notWalkthroughs fails the test.
func TestWalkthroughs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds chronoq and runs the walk-throughs in real time (about 20 s)")
	}
	for _, tool := range []string{"bash", "curl", "sed", "go"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the walk-throughs need %s", tool)
	}
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)

	// Every shell block is accounted for.
	byFirst := map[string]string{}
	for _, doc := range []string{"README.md", "docs/API.md"} {
		for _, b := range shellBlocks(t, filepath.Join(repo, doc)) {
			first, _, _ := strings.Cut(b, "\n")
			byFirst[doc+"\x00"+first] = b
			known := notWalkthroughs[shellCommand(first)] != ""
			for _, w := range walkthroughs {
				known = known || (w.doc == doc && w.first == first)
			}
			require.True(t, known, "%s: a shell block this test does not know, starting %q: add it to walkthroughs (run) or notWalkthroughs (why not)", doc, first)
		}
	}

	// chronoq, and a go that runs in the repository.
	bin := t.TempDir()
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(bin, "chronoq"), ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"),
		fmt.Appendf(nil, "#!/bin/sh\ncd %q && exec %q \"$@\"\n", repo, goBin), 0o755))

	for _, w := range walkthroughs {
		block, ok := byFirst[w.doc+"\x00"+w.first]
		require.True(t, ok, "%s has no shell block starting %q any more", w.doc, w.first)
		t.Run(w.doc+"/"+w.first, func(t *testing.T) {
			t.Parallel()
			runWalkthrough(t, w, block, bin)
		})
	}
}

// freePort answers a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	return port
}

func runWalkthrough(t *testing.T, w walkthrough, block, bin string) {
	port, hook := freePort(t), freePort(t)
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"REDIS_URL=redis://"+testutil.RedisAddr(t)+"/0",
		"CHRONOQ_NAMESPACE="+testutil.Namespace(t),
		"CHRONOQ_LISTEN=127.0.0.1:"+port,
		"CHRONOQ_URL=http://127.0.0.1:"+port,
		"XDG_STATE_HOME="+t.TempDir())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	if !w.ownServe {
		serve := exec.CommandContext(ctx, filepath.Join(bin, "chronoq"), "serve")
		serve.Env = env
		var logs bytes.Buffer
		serve.Stdout, serve.Stderr = &logs, &logs
		require.NoError(t, serve.Start())
		t.Cleanup(func() {
			_ = serve.Process.Signal(syscall.SIGTERM)
			_ = serve.Wait()
		})
		require.Eventually(t, func() bool {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/healthz", nil)
			require.NoError(t, err)
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
			}
			return err == nil && res.StatusCode == http.StatusOK
		}, 30*time.Second, 50*time.Millisecond, "serve did not start: %s", &logs)
	}

	script := strings.NewReplacer("localhost:8080", "localhost:"+port, "127.0.0.1:9000", "127.0.0.1:"+hook).Replace(block)
	script = strings.Replace(script, "go run ./examples/push-receiver", "go run ./examples/push-receiver -listen 127.0.0.1:"+hook, 1)
	dir := t.TempDir()
	// Its output to files, not pipes: what the block leaves running in
	// the background keeps them open.
	stdoutF, err := os.Create(filepath.Join(dir, ".stdout"))
	require.NoError(t, err)
	stderrF, err := os.Create(filepath.Join(dir, ".stderr"))
	require.NoError(t, err)
	defer stdoutF.Close()
	defer stderrF.Close()
	// -e: a step that fails ends the walk-through. In a process group of
	// its own, so that what it starts in the background (a serve, the
	// receiver) is stopped with it.
	sh := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	sh.Dir, sh.Env = dir, env
	sh.Stdout, sh.Stderr = stdoutF, stderrF
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	require.NoError(t, sh.Start())
	pgid := sh.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		time.Sleep(200 * time.Millisecond) // a moment to stop cleanly, then for sure
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
	err = sh.Wait()
	stdout, _ := os.ReadFile(stdoutF.Name())
	stderr, _ := os.ReadFile(stderrF.Name())
	require.NoError(t, err, "the walk-through failed:\n%s\nstdout:\n%s\nstderr:\n%s", script, stdout, stderr)

	// Its output holds what the document says, in order.
	rest := string(stdout)
	for _, want := range w.want {
		loc := regexp.MustCompile(`(?m)` + want).FindStringIndex(rest)
		require.NotNil(t, loc, "the walk-through's output lacks %s (after what came before):\n%s\nstderr:\n%s", want, stdout, stderr)
		rest = rest[loc[1]:]
	}
}
