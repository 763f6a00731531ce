package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chronoq/chronoq/client"
	"github.com/chronoq/chronoq/cron"
)

// The operator CLI: small commands over the HTTP API of a running serve.

// cliTimeout bounds a command's request: longer than the longest wait the
// API takes (inspect --wait, api.MaxWait).
const cliTimeout = 45 * time.Second

// cli is one CLI invocation: its flags, and the API it talks to.
type cli struct {
	name   string
	fs     *flag.FlagSet
	url    string
	token  string
	json   bool
	api    *client.ClientWithResponses // set by parse
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

// synopsis makes -h print the command's usage lines (its subcommands)
// before its flags.
func (c *cli) synopsis(lines ...string) {
	c.fs.Usage = func() {
		w := c.fs.Output()
		fmt.Fprintln(w, "usage:")
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
		fmt.Fprintln(w, "flags:")
		c.fs.PrintDefaults()
	}
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
	if err := c.connect(); err != nil {
		return nil, c.usageErr("%v", err), false
	}
	return pos, 0, true
}

func (c *cli) usageErr(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "chronoq %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return 2
}

// connect makes the client of the API the flags name: the client
// generated from the API's OpenAPI document (package client), so the CLI
// reads the API's own types.
func (c *cli) connect() error {
	opts := []client.ClientOption{client.WithHTTPClient(&http.Client{Timeout: cliTimeout})}
	if c.token != "" {
		opts = append(opts, client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+c.token)
			return nil
		}))
	}
	api, err := client.NewClientWithResponses(strings.TrimRight(c.url, "/"), opts...)
	if err != nil {
		return fmt.Errorf("--url %q: %w", c.url, err)
	}
	c.api = api
	return nil
}

// answer is what the CLI reads of every response of the generated client.
type answer interface {
	StatusCode() int
	GetBody() []byte
}

// apiError is an error answer of the API.
type apiError struct {
	status int
	body   client.Error
}

func (e *apiError) Error() string {
	b := e.body.Error
	s := fmt.Sprintf("%d %s: %s", e.status, b.Code, b.Message)
	if f := b.Field; f != nil && *f != "" {
		s += " (field " + *f + ")"
	}
	return s
}

// errUndocumented is a 2xx answer whose body is not the one documented.
var errUndocumented = errors.New("the answer is not the documented JSON")

// typed is the typed body of a 2xx answer, or errUndocumented.
func typed[T any](v *T) (*T, error) {
	if v == nil {
		return nil, errUndocumented
	}
	return v, nil
}

// show prints the answer of a call (res and err, as the generated client
// answered them): the API's JSON as is with --json (or without text),
// else text's; an error answer as the API's error. Answers the exit code.
func show[R answer](c *cli, res R, err error, text func(w io.Writer) error) int {
	if err == nil && res.StatusCode()/100 != 2 {
		err = fmt.Errorf("HTTP %d", res.StatusCode())
		var e client.Error
		if json.Unmarshal(res.GetBody(), &e) == nil && e.Error.Code != "" {
			err = &apiError{status: res.StatusCode(), body: e}
		}
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "chronoq %s: %v\n", c.name, err)
		return 1
	}
	if c.json || text == nil {
		var out bytes.Buffer
		if data := res.GetBody(); len(data) > 0 && json.Indent(&out, data, "", "  ") == nil {
			out.WriteByte('\n')
			_, _ = c.stdout.Write(out.Bytes())
		}
		return 0
	}
	if err := text(c.stdout); err != nil {
		fmt.Fprintf(c.stderr, "chronoq %s: reading the answer: %v\n", c.name, err)
		return 1
	}
	return 0
}

// timeLayout is how the API writes times, and the CLI prints them.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

func str(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

func runEnqueue(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("enqueue", env, stdout, stderr)
	var q, kind, payload, in, at, idem, flowKey, debounce, debounceMax string
	var maxAttempts int
	c.fs.StringVar(&q, "queue", "default", "queue")
	c.fs.StringVar(&kind, "kind", "", "job kind (required)")
	c.fs.StringVar(&payload, "payload", "{}", "payload, JSON")
	c.fs.StringVar(&in, "in", "", "due after this delay (10s, 5m)")
	c.fs.StringVar(&at, "at", "", "due at this RFC 3339 time")
	c.fs.IntVar(&maxAttempts, "max-attempts", 0, "attempts (default the server's, 3)")
	c.fs.StringVar(&idem, "idempotency-key", "", "idempotency key")
	c.fs.StringVar(&flowKey, "flow-key", "", "flow key: the job's key of its queue's flow control (a tenant, an account)")
	c.fs.StringVar(&debounce, "debounce", "", "with --flow-key: fold into the key's waiting job, run once the key is quiet this long (5s)")
	c.fs.StringVar(&debounceMax, "debounce-max-wait", "", "with --debounce: move the job at most this long after the first (default 10 × the debounce)")
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
	case debounce != "" && flowKey == "":
		return c.usageErr("--debounce needs a --flow-key: jobs are debounced by key")
	case debounceMax != "" && debounce == "":
		return c.usageErr("--debounce-max-wait needs a --debounce")
	}
	nj := client.NewJob{Queue: &q, Kind: kind, Payload: json.RawMessage(payload)}
	if in != "" {
		if _, err := time.ParseDuration(in); err != nil {
			return c.usageErr("--in %q: want a duration such as 10s or 5m", in)
		}
		nj.Delay = &in
	}
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return c.usageErr("--at %q: want an RFC 3339 time such as 2030-01-02T15:04:05Z", at)
		}
		nj.RunAt = &t
	}
	if maxAttempts != 0 {
		nj.MaxAttempts = &maxAttempts
	}
	if idem != "" {
		nj.IdempotencyKey = &idem
	}
	if flowKey != "" {
		nj.FlowKey = &flowKey
	}
	if debounce != "" {
		nj.Debounce = &client.Debounce{Period: debounce} // the API checks the durations
		if debounceMax != "" {
			nj.Debounce.MaxWait = &debounceMax
		}
	}
	res, err := c.api.EnqueueWithResponse(ctx, nil, nj)
	return show(c, res, err, func(w io.Writer) error {
		j, err := typed(cmp.Or(res.JSON201, res.JSON200)) // 200: an idempotent replay, or debounced
		if err != nil {
			return err
		}
		note := ""
		if j.Debounced != nil && *j.Debounced {
			note = "\tdebounced into its key's waiting job"
		}
		_, err = fmt.Fprintf(w, "%s\t%s\trun at %s%s\n", j.Id, j.Status, fmtTime(&j.RunAt), note)
		return err
	})
}

// printQueues prints the Queue resources: depths, then totals since each
// queue was first used (DIED is dead_total, the jobs that went to the
// dead set), then the oldest pending job's age and the next run.
func printQueues(w io.Writer, qs []client.Queue) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPAUSED\tSCHEDULED\tPENDING\tPROCESSING\tDEAD\t"+
		"ENQUEUED\tPROMOTED\tCOMPLETED\tFAILED\tRETRIED\tRECLAIMED\tDIED\tOLDEST PENDING\tNEXT RUN")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", q.Name, q.Paused, q.Scheduled, q.Pending, q.Processing, q.Dead,
			q.EnqueuedTotal, q.PromotedTotal, q.CompletedTotal, q.FailedTotal, q.RetriedTotal, q.ReclaimedTotal, q.DeadTotal,
			time.Duration(q.OldestPendingAgeMs)*time.Millisecond, fmtTime(q.NextRunAt))
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
		res, err := c.api.ListQueuesWithResponse(ctx)
		return show(c, res, err, func(w io.Writer) error {
			v, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			return printQueues(w, v.Queues)
		})
	case 1:
		res, err := c.api.GetQueueWithResponse(ctx, pos[0])
		return show(c, res, err, func(w io.Writer) error {
			q, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			return printQueues(w, []client.Queue{*q})
		})
	}
	return c.usageErr("want at most one queue, got %q", pos)
}

func printJobs(w io.Writer, jobs []client.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tATTEMPT\tRUN AT\tLEASE UNTIL\tLAST ERROR")
	for _, j := range jobs {
		e := str(j.LastError)
		if len(e) > 60 {
			e = e[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.Id, j.Kind, j.Status, j.Attempts, j.MaxAttempts,
			fmtTime(&j.RunAt), fmtTime(j.LeaseUntil), e)
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
	params := &client.ListJobsParams{Status: client.ListJobsParamsStatus(status), Limit: &limit}
	if cursor != "" {
		params.Cursor = &cursor
	}
	res, err := c.api.ListJobsWithResponse(ctx, q, params)
	return show(c, res, err, func(w io.Writer) error {
		page, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		if err := printJobs(w, page.Jobs); err != nil {
			return err
		}
		if page.NextCursor != "" {
			_, err := fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
			return err
		}
		return nil
	})
}

// jobCommand is inspect and cancel: --queue Q ID (inspect also takes
// --wait D: the job once it has ended, or as it is after D).
func jobCommand(ctx context.Context, name string, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(name, env, stdout, stderr)
	var q, wait string
	c.fs.StringVar(&q, "queue", "", "queue (required)")
	if name == "inspect" {
		c.fs.StringVar(&wait, "wait", "", "wait up to this long (at most 30s) for the job to end: completed, dead or canceled")
	}
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 || q == "" {
		return c.usageErr("usage: chronoq %s --queue Q ID", name)
	}
	if name == "inspect" {
		var params *client.GetJobParams
		if wait != "" {
			params = &client.GetJobParams{Wait: &wait} // the API checks it
		}
		res, err := c.api.GetJobWithResponse(ctx, q, pos[0], params)
		return show(c, res, err, nil) // the whole job, as JSON
	}
	res, err := c.api.CancelJobWithResponse(ctx, q, pos[0])
	return show(c, res, err, func(w io.Writer) error {
		j, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\t%s\n", j.Id, j.Status)
		return err
	})
}

func runInspect(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	return jobCommand(ctx, "inspect", args, env, stdout, stderr)
}

func runCancel(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	return jobCommand(ctx, "cancel", args, env, stdout, stderr)
}

func runDead(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("dead", env, stdout, stderr)
	var q, kind string
	c.fs.StringVar(&q, "queue", "", "queue (required)")
	c.fs.StringVar(&kind, "kind", "", "only the dead jobs of this kind")
	c.synopsis(
		"chronoq dead requeue --queue Q [--kind K]   move the dead jobs back to pending",
		"chronoq dead purge --queue Q [--kind K]     delete the dead jobs")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 || q == "" || (pos[0] != "requeue" && pos[0] != "purge") {
		return c.usageErr("usage: chronoq dead requeue|purge --queue Q [--kind K]")
	}
	var kindp *string
	if kind != "" {
		kindp = &kind
	}
	if pos[0] == "requeue" {
		res, err := c.api.RequeueDeadWithResponse(ctx, q, client.DeadFilter{Kind: kindp})
		return show(c, res, err, func(w io.Writer) error {
			v, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "requeued %d\n", v.Requeued)
			return err
		})
	}
	res, err := c.api.PurgeDeadWithResponse(ctx, q, &client.PurgeDeadParams{Kind: kindp})
	return show(c, res, err, func(w io.Writer) error {
		v, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "deleted %d\n", v.Deleted)
		return err
	})
}

func runCron(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("cron", env, stdout, stderr)
	c.synopsis("chronoq cron list   the recurring entries, their schedules and next runs")
	var cursor string
	var limit int
	c.fs.IntVar(&limit, "limit", cron.DefaultListLimit, fmt.Sprintf("most entries, 1 to %d", cron.MaxListLimit))
	c.fs.StringVar(&cursor, "cursor", "", "the next_cursor of the previous page")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 || pos[0] != "list" {
		return c.usageErr("usage: chronoq cron list [--limit N] [--cursor C]")
	}
	params := &client.ListCronParams{Limit: &limit}
	if cursor != "" {
		params.Cursor = &cursor
	}
	res, err := c.api.ListCronWithResponse(ctx, params)
	return show(c, res, err, func(w io.Writer) error {
		v, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSCHEDULE\tTIMEZONE\tQUEUE\tKIND\tPAUSED\tNEXT RUN\tLAST RUN")
		for _, e := range v.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", e.Name, e.Schedule, e.Timezone, e.Queue, e.Kind, e.Paused,
				fmtTime(e.NextRunAt), fmtTime(e.LastRunAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if v.NextCursor != "" {
			_, err := fmt.Fprintf(w, "more: --cursor %s\n", v.NextCursor)
			return err
		}
		return nil
	})
}
