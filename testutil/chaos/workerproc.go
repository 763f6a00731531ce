package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/internal/clockskew"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/worker"
)

// JobKind is the kind of every job of the battery.
const JobKind = "chaos.work"

// Payload is a job's payload: the producer's sequence number (how a job
// whose enqueue reply was lost is recognised), how long the handler works,
// and whether the job is poison (its handler always fails).
type Payload struct {
	Seq    int64 `json:"seq"`
	WorkMs int64 `json:"work"`
	Poison bool  `json:"poison,omitempty"`
}

// WorkerConfig configures one worker process.
type WorkerConfig struct {
	Slot        string   `json:"slot"` // stable name across restarts: w0, w1, ...
	Redis       Target   `json:"redis"`
	Ledger      string   `json:"ledger"`
	Prefix      string   `json:"prefix"`
	Namespace   string   `json:"ns"`
	Queues      []string `json:"queues"`
	Concurrency int      `json:"concurrency"`
	// ClockSkew puts the process's clock this far off the true time (see
	// package clockskew): the worker runtime and its queue client keep it.
	ClockSkew time.Duration `json:"clock_skew,omitempty"`
}

// RunWorker runs the chronoq worker runtime until ctx ends (SIGTERM), then
// stops it gracefully. Every run of the handler is recorded in the ledger
// before and after it works; every outcome the store gives, and every error
// the runtime logs, too.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	led := OpenLedger(cfg.Ledger, cfg.Prefix)
	defer led.Close()
	fatal := func(err error) {
		// The ledger is the harness: without it the run counts nothing.
		fmt.Fprintf(os.Stderr, "chaos worker %s: %v\n", cfg.Slot, err)
		os.Exit(3)
	}
	rdb := cfg.Redis.Client()
	defer rdb.Close()
	clock := clockwork.NewRealClock()
	if cfg.ClockSkew != 0 {
		clock = clockskew.New(cfg.ClockSkew)
	}
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: cfg.Namespace, Clock: clock})
	if err != nil {
		return err
	}
	defer client.Close()
	pid := os.Getpid()
	mux := worker.NewMux()
	mux.HandleFunc(JobKind, func(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
		var p Payload
		_ = json.Unmarshal(job.Payload, &p)
		e := Exec{Ev: "start", ID: job.ID, Seq: p.Seq, Queue: job.Queue, Attempt: job.Attempts, Token: job.Token,
			Slot: cfg.Slot, Pid: pid, Claimed: job.ClaimedAt.UnixNano(), Due: job.RunAt.UnixNano(), Flow: job.FlowKey, T: time.Now().UnixNano()}
		if job.Workflow != nil {
			var up map[string]json.RawMessage
			_ = json.Unmarshal(job.Upstream, &up)
			e.Node, e.Up = job.Workflow.Node, slices.Sorted(maps.Keys(up))
		}
		if err := led.RecordExec(e); err != nil {
			fatal(err)
		}
		var herr error
		t := time.NewTimer(time.Duration(p.WorkMs) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			herr = fmt.Errorf("handler interrupted: %w", context.Cause(ctx))
		}
		if herr == nil && p.Poison {
			herr = errors.New("poison job: always fails")
		}
		e.Ev, e.T = "end", time.Now().UnixNano()
		if herr != nil {
			e.Err = herr.Error()
		}
		if err := led.RecordExec(e); err != nil {
			fatal(err)
		}
		return nil, herr
	})
	qs := make([]worker.QueueConfig, len(cfg.Queues))
	for i, q := range cfg.Queues {
		qs[i] = worker.QueueConfig{Name: q}
	}
	log := slog.New(&countingHandler{next: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}),
		led: led, fatal: fatal})
	w, err := worker.New(worker.Config{Client: client, Handler: mux, Queues: qs, Concurrency: cfg.Concurrency,
		IdleWait: 500 * time.Millisecond, ShutdownTimeout: 10 * time.Second, Logger: log,
		OnOutcome: func(o worker.Outcome) {
			rec := Outcome{ID: o.Job.ID, Token: o.Job.Token, Slot: cfg.Slot, Status: string(o.Status),
				HandedBack: errors.Is(o.Err, worker.ErrStopped), T: time.Now().UnixNano()}
			if o.StoreErr != nil {
				rec.Store, rec.Msg = Classify(o.StoreErr), o.StoreErr.Error()
				if err := led.CountError("worker", rec.Store, rec.Msg); err != nil {
					fatal(err)
				}
			}
			if err := led.RecordOutcome(rec); err != nil {
				fatal(err)
			}
		}})
	if err != nil {
		return err
	}
	log.Info("chaos worker started", "slot", cfg.Slot, "pid", pid, "clock_skew", cfg.ClockSkew)
	go watchStalls(ctx, led, cfg.Slot, pid, fatal)
	return w.Run(ctx) // until ctx ends, then 10 s for the running jobs
}

// countingHandler counts, in the ledger, each error the runtime logs at
// Warn or above (claims, heartbeats, waits that failed), by class. The
// store's refusals of outcomes are counted from OnOutcome instead.
type countingHandler struct {
	next  slog.Handler
	led   *Ledger
	fatal func(error)
}

func (h *countingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && !strings.Contains(r.Message, "refused") {
		var msg string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				msg = a.Value.String()
				return false
			}
			return true
		})
		if msg != "" {
			if err := h.led.CountError("worker", ClassifyText(msg), r.Message+": "+msg); err != nil {
				h.fatal(err)
			}
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{next: h.next.WithAttrs(as), led: h.led, fatal: h.fatal}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{next: h.next.WithGroup(name), led: h.led, fatal: h.fatal}
}

// Stall detection: a worker's timers running this late mean the process did
// not run (the machine was starved, or it was stopped): its heartbeats were
// late too.
const (
	stallTick      = 50 * time.Millisecond
	stallThreshold = 300 * time.Millisecond
)

// watchStalls records in the ledger each time this process did not run for
// longer than stallThreshold.
func watchStalls(ctx context.Context, led *Ledger, slot string, pid int, fatal func(error)) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(last) > stallThreshold {
			if err := led.RecordFault(Fault{Kind: FaultStall, Target: slot, Pid: pid, Start: last.UnixNano(), End: now.UnixNano(),
				Note: "observed, not injected"}); err != nil {
				fatal(err)
			}
		}
		last = now
	}
}
