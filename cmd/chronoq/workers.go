package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/chronoq/chronoq/client"
)

// runWorkers: chronoq workers [--limit N] [--cursor C] | chronoq workers ID:
// the live workers of the registry (GET /v1/workers), or one of them with
// the jobs it holds.
func runWorkers(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("workers", env, stdout, stderr)
	var limit int
	var cursor string
	c.fs.IntVar(&limit, "limit", 100, "most workers, 1 to 1000")
	c.fs.StringVar(&cursor, "cursor", "", "the next_cursor of the previous page")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	switch len(pos) {
	case 0:
		p := &client.ListWorkersParams{Limit: &limit}
		if cursor != "" {
			p.Cursor = &cursor
		}
		res, err := c.api.ListWorkersWithResponse(ctx, p)
		return show(c, res, err, func(w io.Writer) error {
			v, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			if err := printWorkers(w, v.Workers); err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "live: %d\n", v.Live)
			if err == nil && v.NextCursor != "" {
				_, err = fmt.Fprintf(w, "more: --cursor %s\n", v.NextCursor)
			}
			return err
		})
	case 1:
		res, err := c.api.GetWorkerWithResponse(ctx, pos[0])
		return show(c, res, err, func(w io.Writer) error {
			v, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			if err := printWorkers(w, []client.Worker{*v}); err != nil {
				return err
			}
			for _, j := range v.Jobs {
				if _, err := fmt.Fprintf(w, "  %s %s\n", j.Queue, j.Id); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return c.usageErr("usage: chronoq workers [--limit N] [--cursor C] | chronoq workers ID")
}

func printWorkers(w io.Writer, ws []client.Worker) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tQUEUES\tLABELS\tVERSION\tJOBS\tSTARTED\tLAST SEEN")
	for _, x := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", x.Id, dash(x.Host), dash(strings.Join(x.Queues, ",")),
			dash(strings.Join(x.Labels, ",")), dash(x.Version), len(x.Jobs), fmtTime(&x.StartedAt), fmtTime(&x.LastSeenAt))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
