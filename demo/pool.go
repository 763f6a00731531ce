package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/workflow"
)

// Limits of [Settings].
const (
	MaxSize    = 32               // workers; each waits on a connection of the blocking pool (64)
	MaxLatency = 10 * time.Second // mean work time
)

// Defaults of [Config].
const (
	DefaultQueue     = "demo"
	DefaultClaimWait = time.Second
	retryPause       = time.Second // after a failed claim (Redis away)
	hungKept         = 20          // ids of hung jobs remembered
)

// ErrStopped answers a change to a pool that is not running: not started,
// or stopped.
var ErrStopped = errors.New("demo: the pool is not running")

// Config configures a [Pool].
type Config struct {
	// Client is the queue store. Required.
	Client *queue.Client
	// Queue is the queue the demo fills and works. Defaults to "demo".
	Queue string
	// Clock times the work and the pauses. Defaults to Client's clock.
	Clock clockwork.Clock
	// ClaimWait is how long a worker's claim waits for a job, at least
	// 100 ms. Defaults to 1 s.
	ClaimWait time.Duration
	// Seed seeds the pool's random choices (latency, failure, hang); 0
	// picks one at random. Defaults to 0.
	Seed uint64
	// Logger receives errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Registry, when set, is the worker registry the simulated workers
	// register in, as demo-1, demo-2... (see WorkerID), with Labels, the
	// queue, Host and Version, and the job each holds; on the registry's
	// TTL. Nil: they are not registered.
	Registry *registry.Registry
	// Host is the workers' host in the registry. Defaults to os.Hostname.
	Host string
	// Version is their version in the registry. Defaults to the binary's.
	Version string
	// Workflows, when set, serves POST /v1/demo/workflow, which starts a
	// sample fan-out/fan-in workflow in Queue (see SampleWorkflow).
	// Defaults to nil.
	Workflows *workflow.Client
}

// Settings are what the page controls.
type Settings struct {
	// Size is the number of workers, 0 to MaxSize.
	Size int
	// Latency is the mean time a job takes, 0 to MaxLatency; each job
	// takes between half and one and a half times it.
	Latency time.Duration
	// FailRate is the chance, 0 to 1, that a job fails (and is retried
	// with backoff, or dies when its attempts are spent).
	FailRate float64
	// HangRate is the chance, 0 to 1, that a worker crashes holding a job:
	// the job is never completed nor heartbeated, its lease lapses, and a
	// reclaim sweep gives it back. The pool replaces the worker.
	HangRate float64
}

// Validate reports the first setting out of range, naming its field.
func (s Settings) Validate() error {
	switch {
	case s.Size < 0 || s.Size > MaxSize:
		return fieldError{"size", fmt.Sprintf("must be in [0, %d], got %d", MaxSize, s.Size)}
	case s.Latency < 0 || s.Latency > MaxLatency:
		return fieldError{"latency", fmt.Sprintf("must be in [0s, %s], got %s", MaxLatency, s.Latency)}
	case !(s.FailRate >= 0 && s.FailRate <= 1):
		return fieldError{"fail_rate", fmt.Sprintf("must be in [0, 1], got %v", s.FailRate)}
	case !(s.HangRate >= 0 && s.HangRate <= 1):
		return fieldError{"hang_rate", fmt.Sprintf("must be in [0, 1], got %v", s.HangRate)}
	}
	return nil
}

// fieldError is an invalid input, with the JSON field at fault.
type fieldError struct{ field, msg string }

func (e fieldError) Error() string { return e.field + ": " + e.msg }

// Status is what the pool is doing.
type Status struct {
	Queue    string
	Settings Settings
	// Running is the worker goroutines alive (after a shrink, until the
	// stopped ones have finished their claim); Busy those holding a job.
	Running, Busy int
	// Totals since the pool started.
	Claimed, Completed, Failed, Hung, Released int64
	// HungJobs are the ids of the last jobs held by a hung worker, newest
	// first.
	HungJobs []string
}

// Pool is the simulated worker pool.
type Pool struct {
	cfg      Config
	clock    clockwork.Clock
	log      *slog.Logger
	reg      *registrations // nil: no Config.Registry
	quit     chan struct{}  // closed by Stop
	quitOnce sync.Once

	mu       sync.Mutex
	base     context.Context // from Start; nil before
	stopped  bool
	settings Settings
	rng      *rand.Rand
	workers  []context.CancelFunc // by worker number
	alive    int                  // worker goroutines running (a stopped one may finish a claim)
	busy     int
	counts   struct{ claimed, completed, failed, hung, released int64 }
	hung     []string // newest last
	wg       sync.WaitGroup
}

// New checks cfg and fills its defaults. The pool starts with no workers.
func New(cfg Config) (*Pool, error) {
	if cfg.Client == nil {
		return nil, errors.New("demo: Config.Client is required")
	}
	cfg.Queue = cmp.Or(cfg.Queue, DefaultQueue)
	if err := names.ValidateQueue(cfg.Queue); err != nil {
		return nil, fmt.Errorf("demo: Config.Queue: %w", err)
	}
	cfg.ClaimWait = cmp.Or(cfg.ClaimWait, DefaultClaimWait)
	if cfg.ClaimWait < 100*time.Millisecond || cfg.ClaimWait > queue.MaxClaimWait {
		return nil, fmt.Errorf("demo: Config.ClaimWait must be in [100ms, %s]", queue.MaxClaimWait)
	}
	if cfg.Clock == nil {
		cfg.Clock = plumbing.Of(cfg.Client).Clock()
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	p := &Pool{cfg: cfg, clock: cfg.Clock, log: cmp.Or(cfg.Logger, slog.Default()), quit: make(chan struct{}),
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		settings: Settings{Latency: 200 * time.Millisecond}}
	p.reg = newRegistrations(p, cfg.Registry, cfg.Host, cfg.Version)
	return p, nil
}

// Queue is the demo's queue.
func (p *Pool) Queue() string { return p.cfg.Queue }

// Start lets the pool run workers until ctx ends or Stop. It starts none:
// [Pool.Configure] sets the size.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.base != nil {
		return errors.New("demo: pool already started")
	}
	p.base = ctx
	if p.reg != nil {
		p.wg.Go(func() { p.reg.refresh(ctx, p.quit) })
	}
	return nil
}

// Stop stops every worker (a worker in the middle of a job releases it)
// and waits for them, bounded by ctx.
func (p *Pool) Stop(ctx context.Context) error {
	p.mu.Lock()
	p.stopped = true
	for _, cancel := range p.workers {
		cancel()
	}
	p.workers = nil
	p.settings.Size = 0
	p.mu.Unlock()
	p.quitOnce.Do(func() { close(p.quit) })
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("demo: stopping the pool: %w", ctx.Err())
	}
}

// Configure applies s: workers are started or stopped to reach s.Size (a
// stopped worker releases the job it holds), and the others take the new
// latency and rates with their next job.
func (p *Pool) Configure(s Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.base == nil || p.stopped || p.base.Err() != nil {
		return ErrStopped
	}
	p.settings = s
	for len(p.workers) > s.Size {
		last := len(p.workers) - 1
		p.workers[last]()
		p.workers = p.workers[:last]
	}
	for n := len(p.workers); n < s.Size; n++ {
		ctx, cancel := context.WithCancel(p.base)
		p.workers = append(p.workers, cancel)
		p.alive++
		p.wg.Go(func() {
			defer p.count(func() { p.alive-- })
			p.work(ctx, n)
		})
	}
	return nil
}

// Status answers what the pool is doing.
func (p *Pool) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{Queue: p.cfg.Queue, Settings: p.settings, Running: p.alive, Busy: p.busy,
		Claimed: p.counts.claimed, Completed: p.counts.completed, Failed: p.counts.failed,
		Hung: p.counts.hung, Released: p.counts.released, HungJobs: make([]string, 0, len(p.hung))}
	for i := len(p.hung) - 1; i >= 0; i-- {
		st.HungJobs = append(st.HungJobs, p.hung[i])
	}
	return st
}

// work is worker n: it claims a job at a time until ctx ends. It is
// registered meanwhile (when the pool has a registry).
func (p *Pool) work(ctx context.Context, n int) {
	me := p.reg.start(n + 1)
	defer p.reg.stop(me)
	for ctx.Err() == nil {
		jobs, err := p.cfg.Client.Claim(ctx, p.cfg.Queue, queue.ClaimOptions{Wait: p.cfg.ClaimWait})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("demo: claim failed", "worker", me.id, "err", err)
			p.pause(ctx, retryPause)
			continue
		}
		for _, j := range jobs {
			p.run(ctx, me, j)
		}
	}
}

// plan is what one job will do, drawn when it is claimed.
type plan struct {
	hang, fail bool
	took       time.Duration
}

func (p *Pool) draw() plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.settings
	pl := plan{hang: p.rng.Float64() < s.HangRate, fail: p.rng.Float64() < s.FailRate}
	if s.Latency > 0 {
		pl.took = s.Latency/2 + time.Duration(p.rng.Int64N(int64(s.Latency)+1))
	}
	return pl
}

// count updates the counters under the lock.
func (p *Pool) count(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// run works one claimed job. It leaves what a job's page shows: a log
// line when claimed, one per step of its work and one at its end, its
// progress with each step's heartbeat, and on completion the artifact
// ArtifactName.
func (p *Pool) run(ctx context.Context, me *self, j *queue.Job) {
	pl := p.draw()
	p.count(func() { p.counts.claimed++ })
	p.reg.claimed(me, j)
	p.logLine(ctx, j, fmt.Sprintf("claimed by %s (attempt %d of %d)", me.id, j.Attempts, j.MaxAttempts))
	if pl.hang {
		// The worker crashed: the job is left as it is, its lease running
		// out. The pool's replacement goes on claiming.
		p.count(func() {
			p.counts.hung++
			p.hung = append(p.hung, j.ID)
			if len(p.hung) > hungKept {
				p.hung = p.hung[1:]
			}
		})
		p.log.Info("demo: worker hung holding a job", "worker", me.id, "job", j.ID, "lease_until", j.LeaseUntil)
		p.reg.hung(me)
		return
	}
	p.count(func() { p.busy++ })
	defer p.count(func() { p.busy-- })
	defer p.reg.done(me, j)
	nsteps := steps(pl.took)
	if !p.workFor(ctx, j, pl.took, nsteps) {
		// Stopped mid-job: hand the job back at once.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		p.logLine(rctx, j, fmt.Sprintf("%s stopped: the job is released", me.id))
		if err := p.cfg.Client.Release(rctx, j.Queue, j.ID, j.Token); err != nil {
			p.log.Warn("demo: release failed", "job", j.ID, "err", err)
		}
		p.count(func() { p.counts.released++ })
		return
	}
	if pl.fail {
		msg := fmt.Sprintf("simulated %s failure (worker %s, attempt %d of %d)", j.Kind, me.id, j.Attempts, j.MaxAttempts)
		p.logLine(ctx, j, "error: "+msg)
		if _, err := p.cfg.Client.Fail(ctx, j.Queue, j.ID, j.Token, queue.FailOptions{Error: msg}); err != nil {
			p.log.Warn("demo: fail failed", "job", j.ID, "err", err)
			return
		}
		p.count(func() { p.counts.failed++ })
		return
	}
	res, _ := json.Marshal(map[string]any{"worker": me.id, "took": pl.took.String(), "kind": j.Kind})
	p.logLine(ctx, j, fmt.Sprintf("done in %s", pl.took.Round(time.Millisecond)))
	if err := p.cfg.Client.Complete(ctx, j.Queue, j.ID, j.Token, queue.CompleteOptions{Result: res,
		Artifacts: map[string]json.RawMessage{ArtifactName: summary(j.Kind, j.Payload, me.id, j.Attempts, nsteps, pl.took)}}); err != nil {
		p.log.Warn("demo: complete failed", "job", j.ID, "err", err)
		return
	}
	p.count(func() { p.counts.completed++ })
}

// workFor works j for d on the clock in nsteps equal steps, each ending
// with its log line and a heartbeat carrying the progress. A step longer
// than half the job's visibility heartbeats within it too, so a slow job
// keeps its lease. It answers false when ctx ended first.
func (p *Pool) workFor(ctx context.Context, j *queue.Job, d time.Duration, nsteps int) bool {
	half := max(j.Visibility/2, 50*time.Millisecond)
	for i := 1; i <= nsteps; i++ { // at most MaxSteps, each at most MaxLatency*1.5/half waits
		left := d*time.Duration(i)/time.Duration(nsteps) - d*time.Duration(i-1)/time.Duration(nsteps)
		for left > 0 {
			wait := min(left, half)
			if !p.pause(ctx, wait) {
				return false
			}
			left -= wait
			if left > 0 {
				p.heartbeat(ctx, j, nil)
			}
		}
		if ctx.Err() != nil {
			return false
		}
		p.logLine(ctx, j, stepLine(j.Kind, i, nsteps))
		p.heartbeat(ctx, j, &queue.Progress{Percent: float64(100*i) / float64(nsteps),
			Message: fmt.Sprintf("%s (%d of %d)", stage(j.Kind, i, nsteps), i, nsteps)})
	}
	return ctx.Err() == nil
}

// logLine appends line to j's log; a failure is logged, not fatal (the
// job goes on: a lost lease shows at its completion).
func (p *Pool) logLine(ctx context.Context, j *queue.Job, line string) {
	if _, err := p.cfg.Client.AppendLog(ctx, j.Queue, j.ID, j.Token, []string{line}); err != nil && ctx.Err() == nil {
		p.log.Warn("demo: log failed", "job", j.ID, "err", err)
	}
}

// heartbeat extends j's lease, with its progress when pr is not nil.
func (p *Pool) heartbeat(ctx context.Context, j *queue.Job, pr *queue.Progress) {
	if _, err := p.cfg.Client.Heartbeat(ctx, j.Queue, j.ID, j.Token, queue.HeartbeatOptions{Progress: pr}); err != nil && ctx.Err() == nil {
		p.log.Warn("demo: heartbeat failed", "job", j.ID, "err", err)
	}
}

// pause waits d on the clock; false when ctx ended first.
func (p *Pool) pause(ctx context.Context, d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}
