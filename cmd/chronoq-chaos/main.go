// Command chronoq-chaos is chronoq's fault-injection battery: it runs real
// redis-server, chronoq serve and worker processes on loopback, injects
// crashes, pauses, restarts, failovers, dropped connections and slot
// migrations, and counts every job (see package testutil/chaos).
//
//	chronoq-chaos run [-short] [-scenarios single,cluster,client,reshard,skew,workflow] [-json FILE]
//
// "worker" and "producer" are the processes run starts; they are not meant
// to be run by hand. The exit code is 0 when every scenario passed, 1 when
// one failed, 2 when the battery could not run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chronoq/chronoq/testutil/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: chronoq-chaos run [flags]   (run -h for the flags)")
		return 2
	}
	switch args[0] {
	case "run":
		return runBattery(ctx, args[1:], stdout, stderr)
	case "worker":
		return child(ctx, "worker", args[1:], stderr, chaos.RunWorker)
	case "producer":
		return child(ctx, "producer", args[1:], stderr, chaos.RunProducer)
	}
	fmt.Fprintf(stderr, "chronoq-chaos: unknown command %q (want run)\n", args[0])
	return 2
}

// child runs one of the battery's child processes, name, with the
// configuration run wrote for it.
func child[C any](ctx context.Context, name string, args []string, stderr io.Writer, fn func(context.Context, C) error) int {
	var cfg C
	if err := readConfig(name, args, &cfg, stderr); err != nil {
		return 2
	}
	if err := fn(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "chronoq-chaos %s: %v\n", name, err)
		return 1
	}
	return 0
}

func readConfig(name string, args []string, cfg any, stderr io.Writer) error {
	fs := flag.NewFlagSet("chronoq-chaos "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	js := fs.String("config", "", "the process's configuration, JSON (written by run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(*js), cfg); err != nil {
		fmt.Fprintf(stderr, "chronoq-chaos %s: -config: %v\n", name, err)
		return err
	}
	return nil
}

func runBattery(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chronoq-chaos run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "the CI form: scaled-down load and fault period")
	names := fs.String("scenarios", "", "scenarios to run, comma-separated: single (1), cluster (2), client (3), reshard (4), skew (5), workflow (6); empty: every one")
	jsonOut := fs.String("json", "", "also write the reports as JSON to this file (- for stdout)")
	chronoqBin := fs.String("chronoq", "", "the chronoq binary; empty: built from this module with -go")
	goBin := fs.String("go", "go", "the go command used to build chronoq")
	redisServer := fs.String("redis-server", "redis-server", "the redis-server binary")
	redisCLI := fs.String("redis-cli", "redis-cli", "the redis-cli binary (cluster scenarios)")
	seed := fs.Uint64("seed", 0, "random seed; 0 picks one from the clock")
	keep := fs.Bool("keep", false, "keep the run's directory (logs, AOF files) even when every scenario passed")
	jobs := fs.Int("jobs", 0, "override the number of jobs of every scenario")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var scs []chaos.Scenario
	all := chaos.Scenarios(*short)
	list := strings.Split(*names, ",")
	if *names == "" {
		list = list[:0]
		for _, sc := range all {
			list = append(list, sc.Name)
		}
	}
	for _, n := range list {
		n = strings.TrimSpace(n)
		found := false
		for i, sc := range all {
			if n == sc.Name || n == fmt.Sprint(i+1) {
				if *jobs > 0 {
					sc.Jobs = *jobs
				}
				scs, found = append(scs, sc), true
			}
		}
		if !found {
			fmt.Fprintf(stderr, "chronoq-chaos: unknown scenario %q\n", n)
			return 2
		}
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	root, err := os.MkdirTemp("", "chronoq-chaos-*")
	if err != nil {
		fmt.Fprintf(stderr, "chronoq-chaos: %v\n", err)
		return 2
	}
	o := chaos.Options{RedisServer: *redisServer, RedisCLI: *redisCLI, Root: root, Seed: *seed, Out: stderr,
		Chronoq: *chronoqBin}
	if o.Self, err = os.Executable(); err != nil {
		fmt.Fprintf(stderr, "chronoq-chaos: %v\n", err)
		return 2
	}
	for _, b := range []*string{&o.RedisServer, &o.RedisCLI} {
		if p, err := exec.LookPath(*b); err == nil {
			*b = p
		} else {
			fmt.Fprintf(stderr, "chronoq-chaos: %v (make deps installs it)\n", err)
			return 2
		}
	}
	if o.Chronoq == "" {
		o.Chronoq = filepath.Join(root, "chronoq")
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		cmd := exec.CommandContext(bctx, *goBin, "build", "-o", o.Chronoq, "github.com/chronoq/chronoq/cmd/chronoq")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "chronoq-chaos: building chronoq: %v\n%s", err, out)
			return 2
		}
	}
	fmt.Fprintf(stderr, "chronoq-chaos: seed %d, files under %s\n", *seed, root)

	var reports []*chaos.Report
	code := 0
	for _, sc := range scs {
		r, err := chaos.Run(ctx, o, sc)
		if err != nil {
			fmt.Fprintf(stderr, "chronoq-chaos: scenario %s could not run: %v\n", sc.Name, err)
			code = 2
			break
		}
		reports = append(reports, r)
		if !r.Pass && code == 0 {
			code = 1
		}
	}
	if len(reports) > 0 {
		fmt.Fprintln(stdout)
		chaos.WriteTable(stdout, reports)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(struct {
			Seed    uint64          `json:"seed"`
			Short   bool            `json:"short"`
			Reports []*chaos.Report `json:"reports"`
		}{*seed, *short, reports}, "", "  ")
		b = append(b, '\n')
		if *jsonOut == "-" {
			_, _ = stdout.Write(b)
		} else if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintf(stderr, "chronoq-chaos: %v\n", err)
			code = max(code, 2)
		}
	}
	if code == 0 && !*keep {
		_ = os.RemoveAll(root)
	} else {
		fmt.Fprintf(stderr, "chronoq-chaos: logs, AOF files and ledgers kept under %s\n", root)
	}
	return code
}
