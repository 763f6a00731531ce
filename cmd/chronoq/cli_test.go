package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// cliRun runs a CLI command against s; it answers the exit code, stdout
// and stderr.
func (s *served) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env("CHRONOQ_URL", s.base, "CHRONOQ_TOKEN", s.token)
	code := run(t.Context(), args, e, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCLI runs every CLI command against a real serve (with a token, on a
// fake clock).
func TestCLI(t *testing.T) {
	t.Parallel()
	clock := testutil.FakeClock()
	s := startServe(t, []string{"--redis-url", "redis://" + testutil.RedisAddr(t) + "/0",
		"--namespace", testutil.Namespace(t), "--token", "tok", "--reclaim-interval", "1h"}, clock)

	code, out, errOut := s.cli(t, "enqueue", "--queue", "mail", "--kind", "welcome", "--payload", `{"to":"a@example.com"}`, "--in", "10s")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "scheduled")
	require.Contains(t, out, "run at 2030-01-02T03:04:15.", "10 s from Redis's now, which runs with the fake clock")
	id := strings.Fields(out)[0]
	code, out, errOut = s.cli(t, "enqueue", "--queue", "mail", "--kind", "welcome", "--at", "2030-01-02T03:00:00Z", "--json")
	require.Equal(t, 0, code, errOut)
	var due map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &due))
	require.Equal(t, "pending", due["status"]) // in the past: due now
	code, out, errOut = s.cli(t, "enqueue", "--kind", "k")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "pending")

	// Usage errors: 2, nothing sent.
	for _, args := range [][]string{
		{"enqueue", "--queue", "mail"},
		{"enqueue", "--kind", "k", "--in", "10s", "--at", "2030-01-02T03:00:00Z"},
		{"enqueue", "--kind", "k", "--in", "soon"},
		{"enqueue", "--kind", "k", "--at", "tomorrow"},
		{"enqueue", "--kind", "k", "--payload", "{"},
		{"list", "--queue", "mail"},
		{"inspect", id},
		{"dead", "resurrect", "--queue", "mail"},
		{"cron", "show"},
		{"stats", "a", "b"},
		{"stats", "--nope"},
	} {
		code, _, errOut := s.cli(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
	}
	// API errors: 1, with the API's message.
	code, _, errOut = s.cli(t, "enqueue", "--queue", "Bad{q}", "--kind", "k")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "400 invalid_argument")
	code, _, errOut = s.cli(t, "inspect", "--queue", "mail", "nosuchjob")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "404 not_found")
	var out2, errOut2 bytes.Buffer
	require.Equal(t, 1, run(t.Context(), []string{"stats", "--url", s.base}, env(), &out2, &errOut2))
	require.Contains(t, errOut2.String(), "401 unauthenticated")

	code, out, errOut = s.cli(t, "stats")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "QUEUE")
	require.Regexp(t, `(?m)^mail\s+false\s+1\s+1\s+0\s+0`, out)
	require.Regexp(t, `(?m)^default\s+false\s+0\s+1`, out)
	code, out, errOut = s.cli(t, "stats", "mail")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "default")
	code, out, _ = s.cli(t, "stats", "mail", "--json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"completed_total": 0`)

	code, out, errOut = s.cli(t, "list", "--queue", "mail", "--status", "scheduled")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, id)
	require.Contains(t, out, "2030-01-02T03:04:15.")
	code, out, errOut = s.cli(t, "list", "--queue", "mail", "--status", "pending", "--limit", "1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, due["id"].(string))
	code, _, errOut = s.cli(t, "list", "--queue", "mail", "--status", "canceled")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "status")

	code, out, errOut = s.cli(t, "inspect", "--queue", "mail", id) // flags before and after the id
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"to": "a@example.com"`)
	code, out, errOut = s.cli(t, "inspect", id, "--queue", "mail")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"status": "scheduled"`)

	code, out, errOut = s.cli(t, "cancel", "--queue", "mail", id)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, id+"\tcanceled")
	code, out, errOut = s.cli(t, "inspect", "--queue", "mail", "--wait", "30s", id) // ended: at once
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"status": "canceled"`)
	code, _, errOut = s.cli(t, "inspect", "--queue", "mail", "--wait", "soon", id)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "400 invalid_argument")
	require.Contains(t, errOut, "wait")

	// Two dead jobs: claim and fail them for good.
	for range 2 {
		status, body := s.do(t, http.MethodPost, "/v1/jobs", `{"queue":"work","kind":"resize","max_attempts":1}`)
		require.Equal(t, http.StatusCreated, status, "%v", body)
	}
	status, body := s.do(t, http.MethodPost, "/v1/queues/work/claim", `{"max":2}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	for _, j := range body["jobs"].([]any) {
		j := j.(map[string]any)
		status, body := s.do(t, http.MethodPost, "/v1/queues/work/jobs/"+j["id"].(string)+"/fail", `{"token":"`+j["token"].(string)+`","error":"boom"}`)
		require.Equal(t, http.StatusOK, status, "%v", body)
		require.Equal(t, "dead", body["status"])
	}
	code, out, errOut = s.cli(t, "dead", "requeue", "--queue", "work", "--kind", "other")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "requeued 0\n", out)
	code, out, errOut = s.cli(t, "list", "--queue", "work", "--status", "dead")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "boom")
	code, out, errOut = s.cli(t, "dead", "requeue", "--queue", "work")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "requeued 2\n", out)
	status, body = s.do(t, http.MethodPost, "/v1/queues/work/claim", `{"max":1}`)
	require.Equal(t, http.StatusOK, status)
	j := body["jobs"].([]any)[0].(map[string]any)
	status, _ = s.do(t, http.MethodPost, "/v1/queues/work/jobs/"+j["id"].(string)+"/fail", `{"token":"`+j["token"].(string)+`","dead":true}`)
	require.Equal(t, http.StatusOK, status)
	code, out, errOut = s.cli(t, "dead", "purge", "--queue", "work", "--kind", "resize")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "deleted 1\n", out)

	status, body = s.do(t, http.MethodPut, "/v1/cron/nightly", `{"schedule":"0 3 * * *","queue":"reports","kind":"daily"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	code, out, errOut = s.cli(t, "cron", "list")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^nightly\s+0 3 \* \* \*\s+UTC\s+reports\s+daily\s+false\s+2030-01-03T03:00:00.000Z\s+-`, out)
	// A page at a time: the next page's cursor is printed.
	status, body = s.do(t, http.MethodPut, "/v1/cron/early", `{"schedule":"0 1 * * *","kind":"daily"}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	code, out, errOut = s.cli(t, "cron", "list", "--limit", "1")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^early\s+0 1 \* \* \*`, out)
	require.NotContains(t, out, "nightly")
	require.Contains(t, out, "more: --cursor early\n")
	code, out, errOut = s.cli(t, "cron", "list", "--limit", "1", "--cursor", "early")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^nightly\s+0 3`, out)
	require.NotContains(t, out, "more:")

	// Every total of the Queue resource is shown, promoted and died
	// (dead_total) too. A job due in 5 s, the clock past it: a claim
	// promotes it first.
	code, _, errOut = s.cli(t, "enqueue", "--queue", "later", "--kind", "k", "--in", "5s")
	require.Equal(t, 0, code, errOut)
	clock.Advance(6 * time.Second)
	status, body = s.do(t, http.MethodPost, "/v1/queues/later/claim", `{"max":1}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Len(t, body["jobs"], 1)
	code, out, errOut = s.cli(t, "stats")
	require.Equal(t, 0, code, errOut)
	later, work := statsRow(t, out, "later"), statsRow(t, out, "work")
	require.Equal(t, "1", later["ENQUEUED"], out)
	require.Equal(t, "1", later["PROMOTED"], out)
	require.Equal(t, "1", later["PROCESSING"], out)
	require.Equal(t, "0", later["DIED"], out)
	require.Equal(t, "0", work["PROMOTED"], out)
	require.Equal(t, "3", work["DIED"], out, "two died, were requeued, and one died again")
	require.Equal(t, "2", work["ENQUEUED"], out)
	require.Equal(t, "0", work["DEAD"], out, "purged")
	code, out, errOut = s.cli(t, "stats", "work", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"dead_total": 3`)
	require.Contains(t, out, `"promoted_total": 0`)

	// --url and --token as flags win over the environment.
	var o, eo bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"stats", "--url", s.base, "--token", "tok"}, env("CHRONOQ_URL", "http://127.0.0.1:1"), &o, &eo), eo.String())
}

// statsRow is the row of queue q in the table of `chronoq stats`, by
// column: cells are at least two spaces apart.
func statsRow(t *testing.T, out, q string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	cells := regexp.MustCompile(`\s{2,}`)
	head := cells.Split(lines[0], -1)
	for _, l := range lines[1:] {
		row := cells.Split(strings.TrimSpace(l), -1)
		if row[0] != q {
			continue
		}
		require.Len(t, row, len(head), "row %q of\n%s", l, out)
		m := make(map[string]string, len(head))
		for i, h := range head {
			m[h] = row[i]
		}
		return m
	}
	t.Fatalf("no queue %s in\n%s", q, out)
	return nil
}

// TestHelp checks the usage text -h prints: the subcommands of the
// commands that have some, and serve's bool flags shown without a value.
func TestHelp(t *testing.T) {
	t.Parallel()
	help := func(args ...string) string {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append(args, "-h"), func(string) string { return "" }, &out, &errOut)
		require.Equal(t, 0, code, "%v -h: %s", args, errOut.String())
		return out.String() + errOut.String()
	}
	dead := help("dead")
	require.Contains(t, dead, "chronoq dead requeue --queue Q")
	require.Contains(t, dead, "chronoq dead purge --queue Q")
	require.Contains(t, help("cron"), "chronoq cron list")
	flow := help("flow")
	require.Contains(t, flow, "chronoq flow override set QUEUE KEY")
	require.Contains(t, flow, "chronoq flow keys QUEUE")
	serve := help("serve")
	require.Regexp(t, `(?m)^\s+-no-dispatch\n`, serve, "a bool flag takes no value")
	require.NotContains(t, serve, "-no-dispatch chronoq")
}
