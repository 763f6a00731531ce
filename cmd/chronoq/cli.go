package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// The operator CLI: small commands over the HTTP API of a running serve.

const cliTimeout = 30 * time.Second

// cli is one CLI invocation: its flags, and the API it talks to.
type cli struct {
	name   string
	fs     *flag.FlagSet
	url    string
	token  string
	json   bool
	stdout io.Writer
	stderr io.Writer
}

// newCLI defines the flags every CLI command has.
func newCLI(name string, env func(string) string, stdout, stderr io.Writer) *cli {
	c := &cli{name: name, fs: flag.NewFlagSet("chronoq "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	c.fs.SetOutput(stderr)
	e := &envFlags{fs: c.fs, getenv: env}
	e.String(&c.url, "url", "CHRONOQ_URL", "http://127.0.0.1:8080", "base URL of the chronoq server")
	e.String(&c.token, "token", "CHRONOQ_TOKEN", "", "API token")
	c.fs.BoolVar(&c.json, "json", false, "print the API's JSON answer")
	return c
}

// parse parses args, flags and positional arguments in any order, and
// answers the positional ones; code is the exit code when it failed.
func (c *cli) parse(args []string) (pos []string, code int, ok bool) {
	for range len(args) + 1 { // each round consumes at least one argument
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, 2, false
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return pos, 0, true
}

func (c *cli) usageErr(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "chronoq %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return 2
}

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// do calls the API and answers the body of a 2xx.
func (c *cli) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.url, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		var e struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != nil {
			e.Error.Status = res.StatusCode
			return nil, e.Error
		}
		return nil, fmt.Errorf("%s %s: HTTP %d", method, path, res.StatusCode)
	}
	return data, nil
}

// call does the request and prints its answer: the JSON as is with
// --json, else through text. Answers the exit code.
func (c *cli) call(ctx context.Context, method, path string, body any, text func(data []byte, w io.Writer) error) int {
	data, err := c.do(ctx, method, path, body)
	if err != nil {
		fmt.Fprintf(c.stderr, "chronoq %s: %v\n", c.name, err)
		return 1
	}
	if c.json || text == nil {
		var out bytes.Buffer
		if len(data) > 0 && json.Indent(&out, data, "", "  ") == nil {
			out.WriteByte('\n')
			_, _ = c.stdout.Write(out.Bytes())
		}
		return 0
	}
	if err := text(data, c.stdout); err != nil {
		fmt.Fprintf(c.stderr, "chronoq %s: reading the answer: %v\n", c.name, err)
		return 1
	}
	return 0
}

func esc(s string) string { return url.PathEscape(s) }

// cliJob is the part of the Job resource the CLI prints.
type cliJob struct {
	ID          string  `json:"id"`
	Queue       string  `json:"queue"`
	Kind        string  `json:"kind"`
	Status      string  `json:"status"`
	Attempts    int     `json:"attempts"`
	MaxAttempts int     `json:"max_attempts"`
	RunAt       *string `json:"run_at"`
	LeaseUntil  *string `json:"lease_until"`
	CompletedAt *string `json:"completed_at"`
	LastError   *string `json:"last_error"`
}

func str(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

func runEnqueue(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("enqueue", env, stdout, stderr)
	var q, kind, payload, in, at, idem string
	var maxAttempts int
	c.fs.StringVar(&q, "queue", "default", "queue")
	c.fs.StringVar(&kind, "kind", "", "job kind (required)")
	c.fs.StringVar(&payload, "payload", "{}", "payload, JSON")
	c.fs.StringVar(&in, "in", "", "due after this delay (10s, 5m)")
	c.fs.StringVar(&at, "at", "", "due at this RFC 3339 time")
	c.fs.IntVar(&maxAttempts, "max-attempts", 0, "attempts (default the server's, 3)")
	c.fs.StringVar(&idem, "idempotency-key", "", "idempotency key")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 0:
		return c.usageErr("unexpected arguments %q", pos)
	case kind == "":
		return c.usageErr("--kind is required")
	case in != "" && at != "":
		return c.usageErr("give --in or --at, not both")
	case !json.Valid([]byte(payload)):
		return c.usageErr("--payload is not valid JSON")
	}
	body := map[string]any{"queue": q, "kind": kind, "payload": json.RawMessage(payload)}
	if in != "" {
		if _, err := time.ParseDuration(in); err != nil {
			return c.usageErr("--in %q: want a duration such as 10s or 5m", in)
		}
		body["delay"] = in
	}
	if at != "" {
		if _, err := time.Parse(time.RFC3339, at); err != nil {
			return c.usageErr("--at %q: want an RFC 3339 time such as 2030-01-02T15:04:05Z", at)
		}
		body["run_at"] = at
	}
	if maxAttempts != 0 {
		body["max_attempts"] = maxAttempts
	}
	if idem != "" {
		body["idempotency_key"] = idem
	}
	return c.call(ctx, http.MethodPost, "/v1/jobs", body, func(data []byte, w io.Writer) error {
		var j cliJob
		if err := json.Unmarshal(data, &j); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "%s\t%s\trun at %s\n", j.ID, j.Status, str(j.RunAt))
		return err
	})
}

// cliQueue is the Queue resource.
type cliQueue struct {
	Name           string  `json:"name"`
	Paused         bool    `json:"paused"`
	Scheduled      int64   `json:"scheduled"`
	Pending        int64   `json:"pending"`
	Processing     int64   `json:"processing"`
	Dead           int64   `json:"dead"`
	CompletedTotal int64   `json:"completed_total"`
	FailedTotal    int64   `json:"failed_total"`
	RetriedTotal   int64   `json:"retried_total"`
	ReclaimedTotal int64   `json:"reclaimed_total"`
	EnqueuedTotal  int64   `json:"enqueued_total"`
	OldestPending  int64   `json:"oldest_pending_age_ms"`
	NextRunAt      *string `json:"next_run_at"`
}

func printQueues(w io.Writer, qs []cliQueue) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPAUSED\tSCHEDULED\tPENDING\tPROCESSING\tDEAD\tCOMPLETED\tFAILED\tRECLAIMED\tOLDEST PENDING\tNEXT RUN")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", q.Name, q.Paused, q.Scheduled, q.Pending, q.Processing,
			q.Dead, q.CompletedTotal, q.FailedTotal, q.ReclaimedTotal, time.Duration(q.OldestPending)*time.Millisecond, str(q.NextRunAt))
	}
	return tw.Flush()
}

func runStats(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("stats", env, stdout, stderr)
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	switch len(pos) {
	case 0:
		return c.call(ctx, http.MethodGet, "/v1/queues", nil, func(data []byte, w io.Writer) error {
			var v struct {
				Queues []cliQueue `json:"queues"`
			}
			if err := json.Unmarshal(data, &v); err != nil {
				return err
			}
			return printQueues(w, v.Queues)
		})
	case 1:
		return c.call(ctx, http.MethodGet, "/v1/queues/"+esc(pos[0]), nil, func(data []byte, w io.Writer) error {
			var q cliQueue
			if err := json.Unmarshal(data, &q); err != nil {
				return err
			}
			return printQueues(w, []cliQueue{q})
		})
	}
	return c.usageErr("want at most one queue, got %q", pos)
}

func printJobs(w io.Writer, jobs []cliJob) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tATTEMPT\tRUN AT\tLEASE UNTIL\tLAST ERROR")
	for _, j := range jobs {
		e := str(j.LastError)
		if len(e) > 60 {
			e = e[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.ID, j.Kind, j.Status, j.Attempts, j.MaxAttempts, str(j.RunAt), str(j.LeaseUntil), e)
	}
	return tw.Flush()
}

func runList(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("list", env, stdout, stderr)
	var q, status, cursor string
	var limit int
	c.fs.StringVar(&q, "queue", "", "queue (required)")
	c.fs.StringVar(&status, "status", "", "scheduled, pending, processing, completed or dead (required)")
	c.fs.IntVar(&limit, "limit", 50, "most jobs, 1 to 1000")
	c.fs.StringVar(&cursor, "cursor", "", "the next_cursor of the previous page")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 || q == "" || status == "" {
		return c.usageErr("usage: chronoq list --queue Q --status S [--limit N]")
	}
	v := url.Values{"status": {status}, "limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return c.call(ctx, http.MethodGet, "/v1/queues/"+esc(q)+"/jobs?"+v.Encode(), nil, func(data []byte, w io.Writer) error {
		var page struct {
			Jobs []cliJob `json:"jobs"`
			Next string   `json:"next_cursor"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return err
		}
		if err := printJobs(w, page.Jobs); err != nil {
			return err
		}
		if page.Next != "" {
			_, err := fmt.Fprintf(w, "more: --cursor %s\n", page.Next)
			return err
		}
		return nil
	})
}

// jobCommand is inspect and cancel: --queue Q ID.
func jobCommand(ctx context.Context, name, method string, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(name, env, stdout, stderr)
	var q string
	c.fs.StringVar(&q, "queue", "", "queue (required)")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 || q == "" {
		return c.usageErr("usage: chronoq %s --queue Q ID", name)
	}
	var text func([]byte, io.Writer) error // inspect: the whole job, as JSON
	if name == "cancel" {
		text = func(data []byte, w io.Writer) error {
			var j cliJob
			if err := json.Unmarshal(data, &j); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "%s\t%s\n", j.ID, j.Status)
			return err
		}
	}
	return c.call(ctx, method, "/v1/queues/"+esc(q)+"/jobs/"+esc(pos[0]), nil, text)
}

func runInspect(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	return jobCommand(ctx, "inspect", http.MethodGet, args, env, stdout, stderr)
}

func runCancel(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	return jobCommand(ctx, "cancel", http.MethodDelete, args, env, stdout, stderr)
}

func runDead(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("dead", env, stdout, stderr)
	var q, kind string
	c.fs.StringVar(&q, "queue", "", "queue (required)")
	c.fs.StringVar(&kind, "kind", "", "only the dead jobs of this kind")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 || q == "" || (pos[0] != "requeue" && pos[0] != "purge") {
		return c.usageErr("usage: chronoq dead requeue|purge --queue Q [--kind K]")
	}
	if pos[0] == "requeue" {
		body := map[string]any{}
		if kind != "" {
			body["kind"] = kind
		}
		return c.call(ctx, http.MethodPost, "/v1/queues/"+esc(q)+"/dead/retry", body, func(data []byte, w io.Writer) error {
			var v struct {
				N int `json:"requeued"`
			}
			if err := json.Unmarshal(data, &v); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "requeued %d\n", v.N)
			return err
		})
	}
	path := "/v1/queues/" + esc(q) + "/dead"
	if kind != "" {
		path += "?" + url.Values{"kind": {kind}}.Encode()
	}
	return c.call(ctx, http.MethodDelete, path, nil, func(data []byte, w io.Writer) error {
		var v struct {
			N int `json:"deleted"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "deleted %d\n", v.N)
		return err
	})
}

func runCron(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("cron", env, stdout, stderr)
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 || pos[0] != "list" {
		return c.usageErr("usage: chronoq cron list")
	}
	return c.call(ctx, http.MethodGet, "/v1/cron", nil, func(data []byte, w io.Writer) error {
		var v struct {
			Entries []struct {
				Name      string  `json:"name"`
				Schedule  string  `json:"schedule"`
				Timezone  string  `json:"timezone"`
				Queue     string  `json:"queue"`
				Kind      string  `json:"kind"`
				Paused    bool    `json:"paused"`
				NextRunAt *string `json:"next_run_at"`
				LastRunAt *string `json:"last_run_at"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSCHEDULE\tTIMEZONE\tQUEUE\tKIND\tPAUSED\tNEXT RUN\tLAST RUN")
		for _, e := range v.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", e.Name, e.Schedule, e.Timezone, e.Queue, e.Kind, e.Paused, str(e.NextRunAt), str(e.LastRunAt))
		}
		return tw.Flush()
	})
}
