// Command chronoq is the chronoq service and its tools, in one binary.
//
//	chronoq serve     the HTTP API, the dashboard, the promoter, the reclaimer and the push dispatchers
//	chronoq demo      serve, plus a simulated worker pool driven from the dashboard
//	chronoq dispatch  push dispatchers only (serve runs them too, unless --no-dispatch)
//	chronoq enqueue, stats, list, inspect, cancel, dead, cron, workers, webhooks
//	                  operator commands over the HTTP API (--url, --token)
//
// Run "chronoq <command> -h" for a command's flags. Every flag can also be
// given in the environment (a flag wins over the environment).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// command is one subcommand. run answers the process's exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int
}

// commands are the subcommands, by name.
var commands = map[string]command{
	"serve":    {"run the HTTP API, the dashboard, the promoter and the reclaimer", runServe},
	"demo":     {"serve (on the embedded Redis by default) with a simulated worker pool", runDemo},
	"dispatch": {"run push dispatchers without the API (serve runs them too): --redis-url URL", runDispatch},
	"enqueue":  {"enqueue a job: --queue Q --kind K [--payload JSON] [--in 10s | --at TIME] [--flow-key K [--debounce 5s]]", runEnqueue},
	"stats":    {"the queues' depths and totals: stats [queue]", runStats},
	"list":     {"list jobs: --queue Q --status S [--limit N]", runList},
	"inspect":  {"one job: --queue Q ID", runInspect},
	"cancel":   {"cancel a scheduled or pending job (delete a finished one): --queue Q ID", runCancel},
	"dead":     {"dead jobs: dead requeue|purge --queue Q [--kind K]", runDead},
	"cron":     {"cron entries: cron list", runCron},
	"flow":     {"flow control per key: flow get|set|clear Q, flow override set|delete Q KEY, flow keys Q, flow key Q KEY", runFlow},
	"workers":  {"the live workers (the registry): workers [ID]", runWorkers},
	"webhooks": {"event webhook subscriptions: webhooks list|get|create|update|delete|dead|retry", runWebhooks},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "chronoq: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(ctx, args[1:], env, stdout, stderr)
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: chronoq <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-8s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun \"chronoq <command> -h\" for its flags.\n")
	_, _ = io.WriteString(w, b.String())
}
