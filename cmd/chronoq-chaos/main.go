// Command chronoq-chaos is chronoq's fault-injection battery: it runs real
// redis-server, chronoq serve and worker processes on loopback, injects
// crashes, pauses, restarts, failovers, dropped connections and slot
// migrations, and counts every job (see package testutil/chaos).
//
//	chronoq-chaos run [-short] [-scenarios single,cluster,client,reshard,skew,workflow,flow] [-json FILE]
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

// battery is one "run": its flags, and where it writes.
type battery struct {
	short                                 bool
	names, jsonOut                        string
	chronoq, goBin, redisServer, redisCLI string
	seed                                  uint64
	keep                                  bool
	jobs                                  int
	stdout, stderr                        io.Writer
}

// runBattery runs the scenarios the flags name, prints their table, and
// answers the exit code (see the command's documentation).
func runBattery(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	b := &battery{stdout: stdout, stderr: stderr}
	if err := b.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	scs, err := pickScenarios(chaos.Scenarios(b.short), b.names, b.jobs)
	if err != nil {
		b.logf("%v\n", err)
		return 2
	}
	if b.seed == 0 {
		b.seed = uint64(time.Now().UnixNano())
	}
	root, err := os.MkdirTemp("", "chronoq-chaos-*")
	if err != nil {
		b.logf("%v\n", err)
		return 2
	}
	o, ok := b.options(ctx, root)
	if !ok {
		return 2
	}
	b.logf("seed %d, files under %s\n", b.seed, root)

	reports, code := b.runScenarios(ctx, o, scs)
	if len(reports) > 0 {
		fmt.Fprintln(stdout)
		chaos.WriteTable(stdout, reports)
	}
	if b.jsonOut != "" && !b.writeJSON(reports) {
		code = max(code, 2)
	}
	if code == 0 && !b.keep {
		_ = os.RemoveAll(root)
	} else {
		b.logf("logs, AOF files and ledgers kept under %s\n", root)
	}
	return code
}

// logf writes one of the battery's own lines to stderr.
func (b *battery) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "chronoq-chaos: "+format, args...)
}

// parse reads run's flags into b; flag.ErrHelp for -h.
func (b *battery) parse(args []string) error {
	fs := flag.NewFlagSet("chronoq-chaos run", flag.ContinueOnError)
	fs.SetOutput(b.stderr)
	fs.BoolVar(&b.short, "short", false, "the CI form: scaled-down load and fault period")
	fs.StringVar(&b.names, "scenarios", "", "scenarios to run, comma-separated: single (1), cluster (2), client (3), reshard (4), skew (5), workflow (6), flow (7); empty: every one")
	fs.StringVar(&b.jsonOut, "json", "", "also write the reports as JSON to this file (- for stdout)")
	fs.StringVar(&b.chronoq, "chronoq", "", "the chronoq binary; empty: built from this module with -go")
	fs.StringVar(&b.goBin, "go", "go", "the go command used to build chronoq")
	fs.StringVar(&b.redisServer, "redis-server", "redis-server", "the redis-server binary")
	fs.StringVar(&b.redisCLI, "redis-cli", "redis-cli", "the redis-cli binary (cluster scenarios)")
	fs.Uint64Var(&b.seed, "seed", 0, "random seed; 0 picks one from the clock")
	fs.BoolVar(&b.keep, "keep", false, "keep the run's directory (logs, AOF files) even when every scenario passed")
	fs.IntVar(&b.jobs, "jobs", 0, "override the number of jobs of every scenario")
	return fs.Parse(args)
}

// pickScenarios answers the scenarios of all that names lists (by name
// or by number from 1; empty: every one), with jobs jobs each when jobs is
// positive.
func pickScenarios(all []chaos.Scenario, names string, jobs int) ([]chaos.Scenario, error) {
	list := strings.Split(names, ",")
	if names == "" {
		list = list[:0]
		for _, sc := range all {
			list = append(list, sc.Name)
		}
	}
	var scs []chaos.Scenario
	for _, n := range list {
		n = strings.TrimSpace(n)
		found := false
		for i, sc := range all {
			if n == sc.Name || n == fmt.Sprint(i+1) {
				if jobs > 0 {
					sc.Jobs = jobs
				}
				scs, found = append(scs, sc), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q", n)
		}
	}
	return scs, nil
}

// options are the scenarios' options for a run under root: this program,
// the Redis binaries found on the PATH, and chronoq (built into root
// unless -chronoq names one). false, said on stderr, when one is missing.
func (b *battery) options(ctx context.Context, root string) (chaos.Options, bool) {
	o := chaos.Options{RedisServer: b.redisServer, RedisCLI: b.redisCLI, Root: root, Seed: b.seed, Out: b.stderr,
		Chronoq: b.chronoq}
	var err error
	if o.Self, err = os.Executable(); err != nil {
		b.logf("%v\n", err)
		return o, false
	}
	for _, bin := range []*string{&o.RedisServer, &o.RedisCLI} {
		p, err := exec.LookPath(*bin)
		if err != nil {
			b.logf("%v (make deps installs it)\n", err)
			return o, false
		}
		*bin = p
	}
	if o.Chronoq == "" {
		o.Chronoq = filepath.Join(root, "chronoq")
		if out, err := b.buildChronoq(ctx, o.Chronoq); err != nil {
			b.logf("building chronoq: %v\n%s", err, out)
			return o, false
		}
	}
	return o, true
}

// buildChronoq builds cmd/chronoq of this module into path with -go
// (bounded: 5 min), and answers the build's output.
func (b *battery) buildChronoq(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, b.goBin, "build", "-o", path, "github.com/chronoq/chronoq/cmd/chronoq").CombinedOutput()
}

// runScenarios runs scs in turn, and answers their reports and the exit
// code so far: 1 if one failed; 2, and no further scenario, if one could
// not run.
func (b *battery) runScenarios(ctx context.Context, o chaos.Options, scs []chaos.Scenario) ([]*chaos.Report, int) {
	var reports []*chaos.Report
	code := 0
	for _, sc := range scs {
		r, err := chaos.Run(ctx, o, sc)
		if err != nil {
			b.logf("scenario %s could not run: %v\n", sc.Name, err)
			return reports, 2
		}
		reports = append(reports, r)
		if !r.Pass && code == 0 {
			code = 1
		}
	}
	return reports, code
}

// writeJSON writes the seed, the form and the reports as JSON to -json's
// file, or to stdout for "-"; false, said on stderr, when it cannot.
func (b *battery) writeJSON(reports []*chaos.Report) bool {
	js, _ := json.MarshalIndent(struct {
		Seed    uint64          `json:"seed"`
		Short   bool            `json:"short"`
		Reports []*chaos.Report `json:"reports"`
	}{b.seed, b.short, reports}, "", "  ")
	js = append(js, '\n')
	if b.jsonOut == "-" {
		_, _ = b.stdout.Write(js)
		return true
	}
	if err := os.WriteFile(b.jsonOut, js, 0o644); err != nil {
		b.logf("%v\n", err)
		return false
	}
	return true
}
