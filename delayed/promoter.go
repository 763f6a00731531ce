package delayed

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/internal/alarm"
)

// Source is what a [Promoter] drives. The queue package's Client is one.
type Source interface {
	// Promote moves the jobs of queue that are due into its pending list,
	// one bounded batch, and answers how many moved and the due time of
	// the earliest job still scheduled (the zero time when none is), or a
	// later time to pass again at (the queue package answers when a due
	// time it handed to a worker's claim lapses: until then the claim
	// promotes it). What is due is the source's to decide (the queue
	// package decides by Redis's clock); next is on the Promoter's clock,
	// for it to sleep until. When nothing is due within horizon, the source parks the
	// queue in its index, for Due to name it again when it nears.
	Promote(ctx context.Context, queue string, horizon time.Duration) (moved int, next time.Time, err error)
	// Due answers, earliest first, the queues whose earliest scheduled
	// job is due within the next `within` by the source's index, with when
	// (on the Promoter's clock): limit of them from the offset-th. It may
	// name a queue with nothing due; it names every queue that has
	// something, but after a lost index update, which a reconcile repairs.
	Due(ctx context.Context, within time.Duration, offset, limit int) ([]Nudge, error)
	// Queues lists the known queues, for a reconcile.
	Queues(ctx context.Context) ([]string, error)
	// Nudges delivers a Nudge each time a job is scheduled ahead of the
	// earliest one of its queue, until ctx ends; then the channel closes.
	Nudges(ctx context.Context) <-chan Nudge
}

// Nudge says that queue has a job due at At, earlier than any before.
type Nudge struct {
	Queue string
	At    time.Time
}

// Config configures a [Promoter].
type Config struct {
	// Source is the queue store to promote in. Required.
	Source Source
	// Queues are the queues to promote. When empty, every queue of the
	// Source. Defaults to empty.
	Queues []string
	// Clock drives the waits. Defaults to the real clock, whose waits end
	// on time to a fraction of a millisecond (see the package doc); a
	// clock given (clockwork.NewRealClock() too) is used as it is, with
	// Go timers.
	Clock clockwork.Clock
	// MaxSleep caps the wait between two passes over a queue whose next
	// job is due soon, and is how often the Source's index is read for
	// queues whose next job nears. A queue whose next job is further off
	// than twice this is parked in the index, and costs nothing until
	// then. Defaults to 1 s.
	MaxSleep time.Duration
	// ReconcileInterval is how often every queue gets one pass whatever
	// the index says, which repairs an index entry left late by a producer
	// that died between its enqueue and the index update. (A worker's
	// claim promotes what is due by itself, so such a job is late only
	// for a queue no worker is waiting on.) The first reconcile is when
	// Run starts. Defaults to 5 minutes.
	ReconcileInterval time.Duration
	// OnPromote, when set, is called after each pass that moved jobs
	// (metrics: batch sizes). Defaults to nil.
	OnPromote func(queue string, moved int)
	// Logger receives errors from Redis. Defaults to slog.Default().
	Logger *slog.Logger
}

// dueBatch is how many queues one read of the index answers.
const dueBatch = 1000

// Promoter moves due jobs into the pending lists. Any number of promoters
// may run on the same queues: promotion is one atomic script per batch, so
// no job is promoted twice.
//
// Its cost follows the queues with jobs due soon, not the queues there
// are: a queue gets a loop of its own (a pass, a sleep until its next due
// job) only while its next job is due within the horizon (2×MaxSleep); its
// loop then parks it in the Source's index and ends. One scheduler reads
// the index every MaxSleep and starts a loop for each queue whose time
// nears; a nudge (a job scheduled ahead of its queue's earliest) starts
// one at once.
type Promoter struct {
	cfg     Config
	clock   clockwork.Clock
	log     *slog.Logger
	horizon time.Duration
	only    map[string]bool // cfg.Queues as a set; nil: every queue
	mu      sync.Mutex
	wakes   map[string]chan struct{}
	inRun   bool            // Run is under way
	runCtx  context.Context // the loops', until Run's ctx ends; nil otherwise
	wg      sync.WaitGroup  // the loops and the nudge dispatcher
}

// NewPromoter checks cfg and fills its defaults.
func NewPromoter(cfg Config) (*Promoter, error) {
	if cfg.Source == nil {
		return nil, errors.New("delayed: Config.Source is required")
	}
	cfg.MaxSleep = cmp.Or(cfg.MaxSleep, time.Second)
	cfg.ReconcileInterval = max(cmp.Or(cfg.ReconcileInterval, 5*time.Minute), cfg.MaxSleep)
	p := &Promoter{cfg: cfg, clock: cmp.Or(cfg.Clock, alarm.Real()),
		log: cmp.Or(cfg.Logger, slog.Default()), horizon: 2 * cfg.MaxSleep, wakes: map[string]chan struct{}{}}
	for _, q := range cfg.Queues {
		if p.only == nil {
			p.only = map[string]bool{}
		}
		p.only[q] = true
	}
	return p, nil
}

// Run promotes until ctx ends, then waits for its loops and returns nil.
// One Run at a time: a second one while the first is under way answers
// an error at once.
func (p *Promoter) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.inRun {
		p.mu.Unlock()
		return errors.New("delayed: the promoter is running already")
	}
	p.inRun, p.runCtx = true, ctx
	p.mu.Unlock()
	nudges := p.cfg.Source.Nudges(ctx)
	p.wg.Add(1)
	go p.dispatch(ctx, nudges)
	p.schedule(ctx) // until ctx ends
	p.mu.Lock()
	p.runCtx = nil // no loop starts from here on (see wakeLocked)
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	clear(p.wakes)
	p.inRun = false
	p.mu.Unlock()
	return nil
}

// Wake makes the loop of queue pass over it now, starting one if it has
// none (and the promoter follows the queue).
func (p *Promoter) Wake(queue string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeLocked(queue)
}

func (p *Promoter) wakeLocked(queue string) {
	if p.runCtx == nil || p.runCtx.Err() != nil || p.only != nil && !p.only[queue] {
		return
	}
	w, ok := p.wakes[queue]
	if !ok {
		w = make(chan struct{}, 1)
		p.wakes[queue] = w
		p.wg.Add(1)
		go p.loop(p.runCtx, queue, w)
		return
	}
	select {
	case w <- struct{}{}:
	default:
	}
}

func (p *Promoter) dispatch(ctx context.Context, nudges <-chan Nudge) {
	defer p.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-nudges:
			if !ok {
				return
			}
			p.Wake(n.Queue)
		}
	}
}

// schedule starts the loops of the queues whose time nears, reading the
// index every MaxSleep, and of every queue each ReconcileInterval.
func (p *Promoter) schedule(ctx context.Context) {
	var reconciled time.Time
	for ctx.Err() == nil {
		if reconciled.IsZero() || p.clock.Since(reconciled) >= p.cfg.ReconcileInterval {
			if p.reconcile(ctx) {
				reconciled = p.clock.Now()
			}
		} else {
			p.startDue(ctx)
		}
		t := p.clock.NewTimer(p.cfg.MaxSleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
	}
}

// startDue starts a loop for each queue the index names whose time nears.
// It reads the index a page at a time: the entries of queues whose loops
// run are often early (a running loop does not write its entry), and
// must not hide the rest.
func (p *Promoter) startDue(ctx context.Context) {
	for offset := 0; ; offset += dueBatch {
		due, err := p.cfg.Source.Due(ctx, p.horizon, offset, dueBatch)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("promoter: reading the due index failed", "err", err)
			}
			return
		}
		p.mu.Lock()
		for _, d := range due {
			if _, running := p.wakes[d.Queue]; !running {
				p.wakeLocked(d.Queue)
			}
		}
		p.mu.Unlock()
		if len(due) < dueBatch {
			return
		}
	}
}

// reconcile passes over every queue once, one at a time, and starts a
// loop for each whose next job is due within the horizon; it answers
// whether it could list them.
func (p *Promoter) reconcile(ctx context.Context) bool {
	qs := p.cfg.Queues
	if len(qs) == 0 {
		var err error
		if qs, err = p.cfg.Source.Queues(ctx); err != nil {
			if ctx.Err() == nil {
				p.log.Warn("promoter: listing queues failed", "err", err)
			}
			return false
		}
	}
	for _, q := range qs {
		if ctx.Err() != nil {
			return false
		}
		if p.running(q) || p.only != nil && !p.only[q] {
			continue
		}
		moved, next, err := p.cfg.Source.Promote(ctx, q, p.horizon)
		if moved > 0 && p.cfg.OnPromote != nil {
			p.cfg.OnPromote(q, moved)
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("promoter: promote failed", "queue", q, "err", err)
			}
			p.Wake(q) // its loop tries again
		} else if !next.IsZero() && p.clock.Until(next) <= p.horizon {
			p.Wake(q)
		}
	}
	return true
}

func (p *Promoter) running(queue string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.wakes[queue]
	return ok
}

// loop promotes one queue: a pass, then a sleep until the next due job (at
// most MaxSleep), cut short by a wake; it ends once the queue has nothing
// due within the horizon (the pass parked it in the index).
func (p *Promoter) loop(ctx context.Context, queue string, wake chan struct{}) {
	defer p.wg.Done()
	for ctx.Err() == nil {
		moved, next, err := p.cfg.Source.Promote(ctx, queue, p.horizon)
		if moved > 0 && p.cfg.OnPromote != nil {
			p.cfg.OnPromote(queue, moved)
		}
		wait := p.cfg.MaxSleep
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("promoter: promote failed", "queue", queue, "err", err)
			}
		} else if next.IsZero() || p.clock.Until(next) > p.horizon {
			if p.park(queue, wake) {
				return
			}
			continue // woken meanwhile: another pass
		} else {
			// From the clock as it is now, after the round trip: the sleep
			// ends at the due time, not a round trip after it.
			wait = min(wait, p.clock.Until(next))
		}
		if wait <= 0 {
			continue // more is due already: the next batch
		}
		if !p.sleep(ctx, wait, wake) {
			return
		}
	}
}

// park ends queue's loop unless a wake came in meanwhile (which the loop
// must not miss): answers whether it ended.
func (p *Promoter) park(queue string, wake chan struct{}) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-wake:
		return false
	default:
	}
	delete(p.wakes, queue)
	return true
}

// sleep waits d, or until a wake or ctx's end; false when ctx ended. The
// wait is an alarm (package internal/alarm), so on the real clock it ends
// on time to a fraction of a millisecond.
func (p *Promoter) sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	rang := make(chan struct{}, 1)
	a := alarm.New(p.clock, p.clock.Now().Add(d), func() { rang <- struct{}{} })
	defer a.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-rang:
	case <-wake:
	}
	return true
}
