package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/client"
	"github.com/chronoq/chronoq/queue"
)

// flowCmd is "chronoq flow": a queue's flow control over the API (its
// limits for each flow key, keys' overrides, the keys with work).
type flowCmd struct {
	c                          *cli
	maxInFlight, burst, weight int
	offset, limit              int
	rate                       float64
	strategy                   string
}

// flowFlags are the flags each flow subcommand takes (besides the
// common ones): any other given is a usage error.
var flowFlags = map[string][]string{
	"get":             nil,
	"set":             {"max-in-flight", "rate", "burst", "strategy"},
	"clear":           nil,
	"override set":    {"max-in-flight", "rate", "burst", "weight"},
	"override delete": nil,
	"keys":            {"offset", "limit"},
	"key":             {"limit"},
}

// flowArgs is how many positional arguments each subcommand takes after
// its name: the queue, and a key.
var flowArgs = map[string]int{"get": 1, "set": 1, "clear": 1, "override set": 2, "override delete": 2, "keys": 1, "key": 2}

const flowUsage = "usage: chronoq flow get|set|clear QUEUE | flow override set|delete QUEUE KEY | flow keys QUEUE | flow key QUEUE KEY"

func runFlow(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	f := &flowCmd{c: newCLI("flow", env, stdout, stderr)}
	c := f.c
	c.fs.IntVar(&f.maxInFlight, "max-in-flight", 0, "set, override set: most jobs of a key processing at once (0 none)")
	c.fs.Float64Var(&f.rate, "rate", 0, "set, override set: most jobs of a key claimed a second (0 none)")
	c.fs.IntVar(&f.burst, "burst", 0, "set, override set: a key's bucket size (default a tenth of a second's worth, at least 1)")
	c.fs.StringVar(&f.strategy, "strategy", "", "set: at max in flight, queue (default), cancel_newest or cancel_in_progress")
	c.fs.IntVar(&f.weight, "weight", 0, fmt.Sprintf("override set: the key's turns for one of a weight-1 key's, 1 to %d (default 1)", queue.MaxFlowWeight))
	c.fs.IntVar(&f.offset, "offset", 0, "keys: skip this many keys")
	c.fs.IntVar(&f.limit, "limit", api.DefaultFlowKeysPage, fmt.Sprintf("keys: most keys; key: most job ids of each kind (1 to %d)", queue.MaxFlowKeysPage))
	c.synopsis(
		"chronoq flow get QUEUE                      the limits each flow key of the queue gets",
		"chronoq flow set QUEUE [--max-in-flight N] [--rate R] [--burst B] [--strategy S]",
		"chronoq flow clear QUEUE                    remove them (overrides are kept)",
		"chronoq flow override set QUEUE KEY [--max-in-flight N] [--rate R] [--burst B] [--weight W]",
		"chronoq flow override delete QUEUE KEY      the key gets the queue's limits again",
		"chronoq flow keys QUEUE [--offset N] [--limit N]   the keys with jobs, the most first",
		"chronoq flow key QUEUE KEY [--limit N]      one key: its counts, override and jobs")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	sub := ""
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	if sub == "override" && len(pos) > 0 {
		sub, pos = sub+" "+pos[0], pos[1:]
	}
	want, known := flowArgs[sub]
	if !known || len(pos) != want {
		return c.usageErr("%s", flowUsage)
	}
	if bad := f.foreignFlags(sub); bad != "" {
		return c.usageErr("flow %s takes no --%s", sub, bad)
	}
	switch sub {
	case "get":
		res, err := c.api.GetFlowLimitsWithResponse(ctx, pos[0])
		return show(c, res, err, func(w io.Writer) error { return printFlowLimits(w, res.JSON200) })
	case "set":
		req := client.FlowLimitsRequest{MaxInFlight: &f.maxInFlight, Burst: &f.burst, Rate: ptrF32(f.rate)}
		if f.strategy != "" {
			s := client.FlowLimitsRequestStrategy(f.strategy) // the API checks it
			req.Strategy = &s
		}
		res, err := c.api.PutFlowLimitsWithResponse(ctx, pos[0], req)
		return show(c, res, err, func(w io.Writer) error { return printFlowLimits(w, res.JSON200) })
	case "clear":
		res, err := c.api.DeleteFlowLimitsWithResponse(ctx, pos[0])
		return show(c, res, err, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "cleared the flow limits of %s\n", pos[0])
			return err
		})
	case "override set":
		req := client.FlowOverrideRequest{MaxInFlight: &f.maxInFlight, Burst: &f.burst, Rate: ptrF32(f.rate), Weight: &f.weight}
		res, err := c.api.PutFlowOverrideWithResponse(ctx, pos[0], pos[1], req)
		return show(c, res, err, func(w io.Writer) error {
			o, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			return printFlowOverrides(w, []client.FlowOverride{*o})
		})
	case "override delete":
		res, err := c.api.DeleteFlowOverrideWithResponse(ctx, pos[0], pos[1])
		return show(c, res, err, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "deleted the override of %s in %s\n", pos[1], pos[0])
			return err
		})
	case "keys":
		res, err := c.api.ListFlowKeysWithResponse(ctx, pos[0], &client.ListFlowKeysParams{Offset: &f.offset, Limit: &f.limit})
		return show(c, res, err, func(w io.Writer) error {
			v, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			return printFlowKeys(w, v.Keys, v.Total)
		})
	}
	// key
	res, err := c.api.GetFlowKeyWithResponse(ctx, pos[0], pos[1], &client.GetFlowKeyParams{Limit: &f.limit})
	return show(c, res, err, func(w io.Writer) error {
		k, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		if err := printFlowKeys(w, []client.FlowKey{{Key: k.Key, Pending: k.Pending, InFlight: k.InFlight, Override: k.Override}}, -1); err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "pending jobs:    %s\nprocessing jobs: %s\n", orNone(k.PendingJobs), orNone(k.ProcessingJobs))
		return err
	})
}

// foreignFlags names a flag given that sub does not take ("" none).
func (f *flowCmd) foreignFlags(sub string) string {
	common := []string{"url", "token", "json"}
	bad := ""
	f.c.fs.Visit(func(fl *flag.Flag) {
		if bad == "" && !slices.Contains(flowFlags[sub], fl.Name) && !slices.Contains(common, fl.Name) {
			bad = fl.Name
		}
	})
	return bad
}

func ptrF32(v float64) *float32 {
	f := float32(v)
	return &f
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return strings.Join(ids, " ")
}

func printFlowLimits(w io.Writer, l *client.FlowLimits) error {
	l, err := typed(l)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "max in flight:  %d\nrate:           %g/s\nburst:          %d\nstrategy:       %s\n",
		l.MaxInFlight, l.Rate, l.Burst, l.Strategy)
	return err
}

func printFlowOverrides(w io.Writer, os []client.FlowOverride) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tMAX IN FLIGHT\tRATE\tBURST\tWEIGHT")
	for _, o := range os {
		fmt.Fprintf(tw, "%s\t%d\t%g\t%d\t%d\n", o.Key, o.MaxInFlight, o.Rate, o.Burst, o.Weight)
	}
	return tw.Flush()
}

// printFlowKeys prints keys, and the total of keys with work when not
// negative.
func printFlowKeys(w io.Writer, keys []client.FlowKey, total int64) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tPENDING\tIN FLIGHT\tOVERRIDE")
	for _, k := range keys {
		ov := "-"
		if o := k.Override; o != nil {
			ov = fmt.Sprintf("max_in_flight=%d rate=%g burst=%d weight=%d", o.MaxInFlight, o.Rate, o.Burst, o.Weight)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", k.Key, k.Pending, k.InFlight, ov)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if total >= 0 {
		_, err := fmt.Fprintf(w, "%d keys with jobs\n", total)
		return err
	}
	return nil
}
