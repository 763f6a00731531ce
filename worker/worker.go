package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/internal/alarm"
	"github.com/chronoq/chronoq/internal/batch"
	"github.com/chronoq/chronoq/queue"
)

// Priority is how a worker with several queues shares its slots.
type Priority int

const (
	// Weighted tries the queues, at each claim, in a random order drawn by
	// their weights: a queue of weight 3 is tried first three times as
	// often as one of weight 1, so busy queues share the slots in about
	// that ratio, and none starves.
	Weighted Priority = iota
	// Strict serves the queues in the order given: a queue gets slots only
	// when every queue before it is empty (or at its own concurrency cap).
	Strict
)

// QueueConfig is one queue a worker serves.
type QueueConfig struct {
	// Name of the queue. Required.
	Name string
	// Concurrency caps the handlers running jobs of this queue at once.
	// Defaults to the worker's Concurrency.
	Concurrency int
	// Weight is the queue's share under Weighted priority, 1 to 1000.
	// Defaults to 1.
	Weight int
}

// Outcome is what became of one run of a job, reported to
// Config.OnOutcome (metrics).
type Outcome struct {
	// Job is the job as claimed.
	Job *queue.Job
	// Duration is the handler's run time.
	Duration time.Duration
	// Err is the handler's error: nil when it succeeded, ErrStopped when
	// the worker stopped and handed the job back.
	Err error
	// Status is where the job went: queue.StatusCompleted,
	// StatusScheduled or StatusPending (a retry, or handed back at stop),
	// StatusDead or StatusCanceled. Empty when the store took no change
	// (StoreErr says why).
	Status queue.Status
	// RunAt is the next run of a retried job.
	RunAt time.Time
	// StoreErr is the store's refusal: queue.ErrLeaseLost for a late
	// complete or fail (the job was reclaimed), or a Redis error.
	StoreErr error
}

// Config configures a [Worker]. Client and Handler are required.
type Config struct {
	// Client is the queue store. Required.
	Client *queue.Client
	// Handler runs the jobs: usually a *Mux. Required.
	Handler Handler
	// Queues to serve, in priority order for Strict. Defaults to one
	// queue, "default".
	Queues []QueueConfig
	// Priority shares the slots between the queues. Defaults to Weighted.
	Priority Priority
	// Concurrency caps the handlers running at once over all queues.
	// Defaults to 10.
	Concurrency int
	// MaxClaim caps the jobs taken in one claim call, 1 to queue.MaxBatch.
	// Defaults to Concurrency.
	MaxClaim int
	// Timeout cancels a handler's context this long after it started
	// (cause ErrTimeout); 0 for none. Defaults to none.
	Timeout time.Duration
	// KindTimeouts overrides Timeout for the kinds it names (0: none).
	KindTimeouts map[string]time.Duration
	// ShutdownTimeout is how long Run, once its ctx has ended, lets the
	// running handlers return before it hands their jobs back to pending
	// and cancels their contexts (cause ErrStopped). Defaults to 30 s; a
	// negative value hands them back at once.
	ShutdownTimeout time.Duration
	// HeartbeatInterval is how often a running job's lease is extended;
	// keep it well under the jobs' visibility. Defaults to a third of each
	// job's visibility.
	HeartbeatInterval time.Duration
	// IdleWait is how long one blocking wait for jobs lasts when the
	// queues are empty (1 ms to queue.MaxClaimWait); a stop may wait this
	// long for the waits under way, plus up to a tick of Redis's timer
	// (see queue.ClaimOptions.Wait). Defaults to 1 s.
	IdleWait time.Duration
	// Lookahead is how long before their due time the worker claims
	// scheduled jobs, one claim for all those due meanwhile (up to its
	// free slots), to start each at its due time: by Redis's clock, never
	// before, whatever this host's clock says (the wait is measured from
	// the claim's answer). Jobs with labels or a flow key, jobs of queues
	// with limits, and jobs behind others pending are claimed when due,
	// as with no lookahead. A job so held is processing until it starts:
	// its cancel is a request, as a running job's is. Completes wait
	// up to about this long to go in one call with those of the jobs
	// held. At most queue.MaxAhead; negative: none. Defaults to 20 ms.
	Lookahead time.Duration
	// Clock is the source of time for heartbeats, timeouts and retry
	// times. Defaults to the Client's clock.
	Clock clockwork.Clock
	// Logger receives store errors and refused results. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// OnOutcome, when set, is called once per run with what became of the
	// job, from the worker's goroutines: keep it quick. Defaults to nil.
	OnOutcome func(Outcome)

	// The worker registry (package registry, GET /v1/workers): a worker
	// registers at Run with its ID, host, Labels, queues and Version,
	// refreshes every third of RegistryTTL and within a second of a change
	// in the jobs it holds (with the list of them), and deregisters at the
	// stop. A registry failure is logged and tried again; it never stops
	// the worker.

	// ID names the worker in the registry: 1 to registry.MaxIDBytes of
	// [A-Za-z0-9._:-]. Defaults to "<host>-<pid>-<6 random hex digits>".
	ID string
	// Labels are the worker's labels, passed on every claim (see
	// queue.ClaimOptions.Labels): it receives the jobs without labels and
	// those whose labels are all among these. At most
	// queue.MaxClaimLabels. Defaults to none.
	Labels []string
	// Version is the worker's software version, as the registry shows it
	// (at most registry.MaxVersionBytes). Defaults to chronoq's module
	// version in the binary's build information.
	Version string
	// RegistryTTL is how long the worker stays registered after its last
	// refresh (registry.MinTTL to registry.MaxTTL). Defaults to
	// registry.DefaultTTL (60 s).
	RegistryTTL time.Duration
	// DisableRegistry keeps the worker out of the registry. Defaults to
	// false.
	DisableRegistry bool
}

// Defaults of Config.
const (
	DefaultConcurrency     = 10
	DefaultIdleWait        = time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultLookahead       = 20 * time.Millisecond
	// maxLead is the most the claim loop wakes before a due time it was
	// handed: time for the claim's round trip, so that the jobs are held
	// when they come due.
	maxLead   = 5 * time.Millisecond
	maxWeight = 1000
	// minHeartbeat keeps a tiny visibility from spinning the heartbeats.
	minHeartbeat = 10 * time.Millisecond
)

// Worker claims and runs jobs. Create it with [New] and call Run, which
// works until its ctx ends; a worker runs once.
type Worker struct {
	cfg    Config
	client *queue.Client
	clock  clockwork.Clock
	log    *slog.Logger
	queues []*queueState
	reg    *registration // nil: Config.DisableRegistry
	// completes batches the completes of finished runs, by queue (run.go).
	completes *batch.Batcher[queue.Ack, struct{}]
	// fails batches the failures of finished runs, by queue (run.go).
	fails *batch.Batcher[failure, queue.FailResult]

	mu      sync.Mutex
	started bool // Run has been called
	free    int  // slots not running a job
	running map[*run]struct{}

	quit         chan struct{} // closed at the stop: claim no more
	dispatchDone chan struct{} // closed when the claim loop has returned
	slotFreed    chan struct{} // a slot came free (capacity 1)
	wake         chan struct{} // a watched queue has jobs, or a job is due (capacity 1)
	rearm        chan struct{} // a run asked for a retry sooner than any known (capacity 1)
	alarm        *alarm.Alarm  // rings wake when the earliest known job is due; the claim loop owns it
	holds        holds         // the runs claimed ahead, until their time

	bg         context.Context // Run's ctx without its cancellation: store calls that must finish
	runCtx     context.Context // cancelled at the stop: idle waits
	cancelRun  context.CancelFunc
	jobCtx     context.Context // parent of the handlers' contexts
	cancelJobs context.CancelCauseFunc

	live sync.WaitGroup // runs neither settled nor handed back
	wg   sync.WaitGroup // watchers, heartbeats
}

// queueState is a served queue and its bookkeeping.
type queueState struct {
	QueueConfig
	running int // under Worker.mu
	// next is the due time this worker wakes at to claim (zero: none):
	// the earliest one a claim was handed (plumbing.Client.ClaimNext) and the
	// retries this worker's runs asked for since. The claim promotes the
	// job. Under Worker.mu, like sinceClaim: the retries asked for while a
	// claim was under way, which its answer may predate.
	next, sinceClaim time.Time
	// held counts the runs claimed ahead that wait for their due time;
	// while one does, the completes of q wait at gate (see Worker.complete).
	// Both under Worker.mu.
	held   int
	gate   chan struct{}
	arm    chan struct{} // start watching (capacity 1)
	wanted atomic.Bool   // the claim loop is idle and wants to hear of jobs
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Worker, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, client: cfg.Client, completes: newCompletes(cfg.Client), free: cfg.Concurrency, running: map[*run]struct{}{},
		clock: cmp.Or[clockwork.Clock](cfg.Clock, plumbing.Of(cfg.Client).Clock()), log: cmp.Or(cfg.Logger, slog.Default()),
		quit: make(chan struct{}), dispatchDone: make(chan struct{}),
		slotFreed: make(chan struct{}, 1), wake: make(chan struct{}, 1), rearm: make(chan struct{}, 1),
		holds: holds{clock: plumbing.Of(cfg.Client).Clock()}}
	w.fails = newFails(cfg.Client, w.clock)
	var err error
	if w.queues, err = queueStates(cfg); err != nil {
		return nil, err
	}
	if w.reg, err = newRegistration(w, &cfg); err != nil {
		return nil, err
	}
	w.cfg = cfg
	return w, nil
}

// checkConfig checks cfg's required fields and bounds, and fills its
// defaults (its queues' own are queueStates').
func checkConfig(cfg *Config) error {
	if cfg.Client == nil {
		return errors.New("worker: Config.Client is required")
	}
	if cfg.Handler == nil {
		return errors.New("worker: Config.Handler is required")
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.MaxClaim = cmp.Or(cfg.MaxClaim, min(cfg.Concurrency, queue.MaxBatch))
	cfg.IdleWait = cmp.Or(cfg.IdleWait, DefaultIdleWait)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.Lookahead = cmp.Or(cfg.Lookahead, DefaultLookahead)
	if len(cfg.Queues) == 0 {
		cfg.Queues = []QueueConfig{{Name: queue.DefaultQueue}}
	}
	switch {
	case cfg.Concurrency < 1:
		return fmt.Errorf("worker: Config.Concurrency must be at least 1, got %d", cfg.Concurrency)
	case cfg.MaxClaim < 1 || cfg.MaxClaim > queue.MaxBatch:
		return fmt.Errorf("worker: Config.MaxClaim must be in [1, %d], got %d", queue.MaxBatch, cfg.MaxClaim)
	case cfg.IdleWait < time.Millisecond || cfg.IdleWait > queue.MaxClaimWait:
		return fmt.Errorf("worker: Config.IdleWait must be in [1ms, %s], got %s", queue.MaxClaimWait, cfg.IdleWait)
	case cfg.Lookahead > queue.MaxAhead:
		return fmt.Errorf("worker: Config.Lookahead must be at most %s, got %s", queue.MaxAhead, cfg.Lookahead)
	case cfg.Timeout < 0 || cfg.HeartbeatInterval < 0:
		return errors.New("worker: Config.Timeout and Config.HeartbeatInterval must not be negative")
	case cfg.Priority != Weighted && cfg.Priority != Strict:
		return fmt.Errorf("worker: Config.Priority must be Weighted or Strict, got %d", cfg.Priority)
	}
	for kind, d := range cfg.KindTimeouts {
		if d < 0 {
			return fmt.Errorf("worker: Config.KindTimeouts[%q] must not be negative", kind)
		}
	}
	labels, err := names.CanonicalLabels(cfg.Labels, queue.MaxClaimLabels)
	if err != nil {
		return fmt.Errorf("worker: Config.Labels: %w", err)
	}
	cfg.Labels = labels
	return nil
}

// queueStates checks cfg's queues (a name each, listed once, concurrency
// and weight in bounds), fills their defaults and answers their states.
func queueStates(cfg Config) ([]*queueState, error) {
	seen := map[string]bool{}
	states := make([]*queueState, 0, len(cfg.Queues))
	for i, qc := range cfg.Queues {
		if err := names.ValidateQueue(qc.Name); err != nil {
			return nil, fmt.Errorf("worker: Config.Queues[%d]: %w", i, err)
		}
		if seen[qc.Name] {
			return nil, fmt.Errorf("worker: Config.Queues[%d]: %s is listed twice", i, qc.Name)
		}
		seen[qc.Name] = true
		qc.Concurrency = cmp.Or(qc.Concurrency, cfg.Concurrency)
		qc.Weight = cmp.Or(qc.Weight, 1)
		if qc.Concurrency < 1 || qc.Weight < 1 || qc.Weight > maxWeight {
			return nil, fmt.Errorf("worker: Config.Queues[%d]: concurrency must be positive and weight in [1, %d]", i, maxWeight)
		}
		states = append(states, &queueState{QueueConfig: qc, arm: make(chan struct{}, 1)})
	}
	return states, nil
}

// Run claims and runs jobs until ctx ends, then stops: it claims no
// more, lets the running handlers return for Config.ShutdownTimeout,
// hands the jobs still running back to pending (their handlers' contexts
// end, cause ErrStopped), and flushes the completions under way. It
// answers nil when every run ended by itself, and an error wrapping
// context.DeadlineExceeded, with how many jobs went back, when it had to
// hand some back. Values of ctx reach the handlers' contexts. A worker
// runs once: a second Run answers an error at once.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.begin(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	grace, cancel := context.WithTimeout(context.Background(), max(w.cfg.ShutdownTimeout, 0))
	defer cancel()
	return w.stop(grace)
}

// begin starts claiming and returns at once.
func (w *Worker) begin(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("worker: Run called twice")
	}
	w.started = true
	w.bg = context.WithoutCancel(ctx)
	w.runCtx, w.cancelRun = context.WithCancel(w.bg)
	w.jobCtx, w.cancelJobs = context.WithCancelCause(w.bg)
	for _, q := range w.queues {
		w.wg.Add(1)
		go w.watch(q)
	}
	go w.dispatch()
	w.reg.start()
	return nil
}

// stop stops claiming, waits for the running handlers to return until
// ctx ends, then hands the jobs still running straight back to pending
// and cancels their contexts (cause ErrStopped). It flushes the
// completions under way before it returns, and answers an error wrapping
// ctx's when it handed jobs back.
func (w *Worker) stop(ctx context.Context) error {
	close(w.quit)
	w.cancelRun()

	<-w.dispatchDone // a claim under way finishes; its jobs are running
	settled := make(chan struct{})
	go func() {
		w.live.Wait()
		close(settled)
	}()
	var err error
	select {
	case <-settled:
	case <-ctx.Done():
		if n := w.handBack(); n > 0 {
			err = fmt.Errorf("worker: stop: %d running jobs handed back to pending: %w", n, ctx.Err())
		}
		<-settled
	}
	w.cancelJobs(ErrStopped)
	w.wg.Wait()
	w.reg.stop()
	return err
}

// handBack releases every job still running to the head of pending and
// cancels its handler's context; it answers how many it released.
func (w *Worker) handBack() int {
	w.mu.Lock()
	runs := make([]*run, 0, len(w.running))
	for r := range w.running {
		runs = append(runs, r)
	}
	w.mu.Unlock()
	var n atomic.Int64
	var wg sync.WaitGroup
	for _, r := range runs {
		if !r.state.CompareAndSwap(runRunning, runHandedBack) {
			continue // it returned meanwhile and settles itself
		}
		wg.Go(func() {
			defer w.live.Done()
			// The lines it logged so far go to its log first (after the
			// release they would be refused); later ones are dropped.
			r.log.close()
			// Release before cancelling: a handler that returns at once
			// must find its fail refused, not retry the job with backoff.
			err := w.client.Release(w.bg, r.job.Queue, r.job.ID, r.job.Token)
			r.stopHeartbeat()
			r.cancel(ErrStopped)
			o := Outcome{Job: r.job, Err: ErrStopped, Status: queue.StatusPending}
			if err != nil {
				o.Status, o.StoreErr = "", err
				w.log.Warn("worker: handing a job back at stop failed; it runs again once its lease lapses",
					"queue", r.job.Queue, "id", r.job.ID, "err", err)
			}
			w.report(o)
			n.Add(1)
		})
	}
	wg.Wait()
	return int(n.Load())
}

func (w *Worker) quitting() bool {
	select {
	case <-w.quit:
		return true
	default:
		return false
	}
}

// pause waits d on the clock; false when the worker stops first.
func (w *Worker) pause(d time.Duration) bool {
	t := w.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-w.quit:
		return false
	}
}

// dispatch is the claim loop: while there are free slots, claim from the
// queues in priority order; when they are all empty, wait for a watcher to
// see a job or for a slot to come free. It runs until the stop.
func (w *Worker) dispatch() {
	defer close(w.dispatchDone)
	defer func() {
		if w.alarm != nil {
			w.alarm.Stop()
		}
	}()
	for !w.quitting() {
		free := w.waitFree()
		if free == 0 {
			return
		}
		more, err := w.claimRound(free)
		switch {
		case more:
		case err != nil:
			if !w.pause(w.cfg.IdleWait) {
				return
			}
		default:
			if !w.idle() {
				return
			}
		}
	}
}

// waitFree waits for a free slot and answers how many are free, 0 when
// the worker stops first.
func (w *Worker) waitFree() int {
	for {
		w.mu.Lock()
		free := w.free
		w.mu.Unlock()
		if free > 0 {
			return free
		}
		select {
		case <-w.slotFreed:
		case <-w.quit:
			return 0
		}
	}
}

// roomLocked is how many jobs q may start with free slots over all. Call with
// w.mu held.
func (w *Worker) roomLocked(q *queueState, free int) int {
	return max(min(free, q.Concurrency-q.running), 0)
}

// claimRound claims from each queue in turn, at most as many jobs as there
// are free slots, and starts them. It answers whether a queue may have
// more: one answered all the jobs asked of it. (When none did, every queue
// was emptied, and the loop waits for its watchers rather than spend a
// round trip on a claim that would come back empty.)
func (w *Worker) claimRound(free int) (more bool, firstErr error) {
	for _, q := range w.order() {
		if free == 0 || w.quitting() {
			break
		}
		w.mu.Lock()
		room := w.roomLocked(q, free)
		w.mu.Unlock()
		if room == 0 {
			continue
		}
		// Not cancelled by the stop: jobs claimed must reach a handler (or be
		// handed back), not be lost with a cancelled reply.
		asked := min(room, w.cfg.MaxClaim)
		w.claimStarting(q)
		claimed, starts, next, err := plumbing.Of(w.client).ClaimNext(w.bg, q.Name,
			queue.ClaimOptions{Max: asked, Labels: w.cfg.Labels}, max(w.cfg.Lookahead, 0))
		jobs, _ := claimed.([]*queue.Job) // ClaimNext's jobs are a []*queue.Job
		if err != nil {
			w.log.Warn("worker: claim failed", "queue", q.Name, "err", err)
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		w.claimAnswered(q, next)
		for i, j := range jobs {
			var at time.Time
			if starts != nil {
				at = starts[i]
			}
			w.start(q, j, at)
		}
		if len(jobs) > 0 {
			w.reg.heldChanged()
		}
		free -= len(jobs)
		more = more || len(jobs) == asked
	}
	return more, firstErr
}

// order is the order in which a claim round tries the queues.
func (w *Worker) order() []*queueState {
	if w.cfg.Priority == Strict || len(w.queues) == 1 {
		return w.queues
	}
	rest := slices.Clone(w.queues)
	total := 0
	for _, q := range rest {
		total += q.Weight
	}
	out := make([]*queueState, 0, len(rest))
	for len(rest) > 0 {
		x := rand.IntN(total)
		i := 0
		for ; x >= rest[i].Weight; i++ {
			x -= rest[i].Weight
		}
		out = append(out, rest[i])
		total -= rest[i].Weight
		rest = slices.Delete(rest, i, i+1)
	}
	return out
}

// signal sends on ch unless a signal is waiting there already (ch has a
// capacity of 1).
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// earliest is the earlier of two times, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// claimStarting notes that a claim of q is about to be sent; the completes
// waiting for the runs held go now, beside it.
func (w *Worker) claimStarting(q *queueState) {
	w.mu.Lock()
	q.sinceClaim = time.Time{}
	q.openGate()
	w.mu.Unlock()
}

// openGate lets the completes waiting at q's gate go. Call with Worker.mu
// held.
func (q *queueState) openGate() {
	if q.gate != nil {
		close(q.gate)
		q.gate = nil
	}
}

// claimAnswered takes next, the due time a claim of q was handed, as the
// queue's next, unless a run asked for an earlier retry while the claim
// was under way (its answer may predate the retry). A claim handed no time
// (another worker was handed it, or nothing is scheduled) leaves this
// worker the time it holds, while that is still ahead: at worst one claim
// then finds nothing.
func (w *Worker) claimAnswered(q *queueState, next time.Time) {
	w.mu.Lock()
	if next.IsZero() && q.next.After(plumbing.Of(w.client).Clock().Now()) {
		next = q.next
	}
	q.next = earliest(next, q.sinceClaim)
	w.mu.Unlock()
}

// retryAsked notes that a run of q asked for a retry at t, and has the
// claim loop set its alarm again when that is the earliest it knows of.
func (w *Worker) retryAsked(q *queueState, t time.Time) {
	w.mu.Lock()
	sooner := q.next.IsZero() || t.Before(q.next)
	q.next = earliest(q.next, t)
	q.sinceClaim = earliest(q.sinceClaim, t)
	w.mu.Unlock()
	if sooner {
		signal(w.rearm)
	}
}

// idle arms the watchers of the queues that have room and the alarm for
// the earliest job due among them, and waits for one of those, for the
// stop (false), or, when a queue had no room, for a slot to come free. (A
// queue with room was found empty by the claim round before, and its
// watcher will see its next job: claiming it again because a slot came
// free would only come back empty: with jobs trickling in one at a time,
// an empty claim after every burst.)
func (w *Worker) idle() bool {
	w.mu.Lock()
	capped := false
	for _, q := range w.queues {
		if w.roomLocked(q, w.free) > 0 {
			q.wanted.Store(true)
			signal(q.arm)
		} else {
			capped = true
		}
	}
	w.mu.Unlock()
	defer func() {
		for _, q := range w.queues {
			q.wanted.Store(false)
		}
	}()
	for {
		w.setAlarm(w.wakeAt(w.nextDue()))
		select {
		case <-w.wake:
			return true
		case <-w.slotFreed:
			if capped {
				return true
			}
		case <-w.quit:
			return false
		case <-w.rearm:
		}
	}
}

// nextDue is the earliest due time known among the queues with room.
func (w *Worker) nextDue() time.Time {
	var due time.Time
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range w.queues {
		if w.roomLocked(q, w.free) > 0 {
			due = earliest(due, q.next)
		}
	}
	return due
}

// wakeAt is when the claim loop wakes for a job due at due (zero: none):
// with a lookahead, early enough for the claim that holds it to be back
// before then; and at due itself once that early alarm has rung, as a
// claim takes nothing ahead from some queues (limits, labels, jobs
// pending) and must come again when the job is due. The loop owns the
// alarm.
func (w *Worker) wakeAt(due time.Time) time.Time {
	if due.IsZero() || w.cfg.Lookahead <= 0 {
		return due
	}
	early := due.Add(-min(w.cfg.Lookahead/2, maxLead))
	if a := w.alarm; a != nil && (a.At().Equal(due) || a.At().Equal(early) && a.Rang()) {
		return due
	}
	return early
}

// setAlarm makes the alarm ring wake at due (none when due is zero),
// keeping the one set already for that time. It sets none again for a
// time it has rung for: then the claim that followed found the job not
// yet due, which only a Clock that does not keep time can cause, and the
// watchers and the promoter take it from there rather than a loop of
// claims.
func (w *Worker) setAlarm(due time.Time) {
	if w.alarm != nil {
		if w.alarm.At().Equal(due) && (w.alarm.Pending() || w.alarm.Rang()) {
			return
		}
		w.alarm.Stop()
		w.alarm = nil
	}
	if due.IsZero() {
		return
	}
	// The client's clock: the due times and the claim's cutoff are its.
	w.alarm = alarm.New(plumbing.Of(w.client).Clock(), due, func() {
		signal(w.wake)
	})
}

// watch waits, while the claim loop is idle, for q to have a pending job,
// and then wakes the loop. The wait holds no slot: the loop claims.
func (w *Worker) watch(q *queueState) {
	defer w.wg.Done()
	for {
		select {
		case <-q.arm:
		case <-w.quit:
			return
		}
		for q.wanted.Load() && !w.quitting() {
			ok, err := plumbing.Of(w.client).WaitClaimable(w.runCtx, q.Name, w.cfg.IdleWait, w.cfg.Labels)
			if err != nil {
				if w.runCtx.Err() == nil {
					w.log.Warn("worker: waiting for jobs failed", "queue", q.Name, "err", err)
				}
				if !w.pause(w.cfg.IdleWait) {
					return
				}
				continue
			}
			if ok {
				signal(w.wake)
				break
			}
		}
	}
}

func (w *Worker) report(o Outcome) {
	if w.cfg.OnOutcome != nil {
		w.cfg.OnOutcome(o)
	}
}
