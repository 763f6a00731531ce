package delayed

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Source is what a [Promoter] drives. The queue package's Client is one.
type Source interface {
	// Promote moves the jobs of queue that are due into its pending list,
	// one bounded batch, and answers how many moved and the due time of
	// the earliest job still scheduled (the zero time when none is). What
	// is due is the source's to decide (the queue package decides by
	// Redis's clock); next is on the Promoter's clock, for it to sleep
	// until.
	Promote(ctx context.Context, queue string) (moved int, next time.Time, err error)
	// Queues lists the known queues.
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
	// Queues are the queues to promote. When empty, every queue the Source
	// knows, refreshed every RefreshInterval and on each nudge. Defaults to
	// empty.
	Queues []string
	// Clock drives the waits. Defaults to the real clock, whose waits end
	// on time to a fraction of a millisecond (see the package doc).
	Clock clockwork.Clock
	// MaxSleep caps the wait between two passes over a queue that has jobs
	// scheduled, so a lost nudge delays a job by MaxSleep at the most.
	// Defaults to 1 s.
	MaxSleep time.Duration
	// IdleSleep caps the wait over a queue with nothing scheduled: it
	// wakes for a nudge (a job scheduled into it), and otherwise passes
	// over it this often, so that 1,000 idle queues cost one promote call
	// each per IdleSleep, not per MaxSleep. A job scheduled into an idle
	// queue whose nudge was lost (a reconnect of the nudge subscription)
	// waits up to this long past its due time, unless a worker claims it
	// first (a claim promotes what is due). Defaults to 1 minute.
	IdleSleep time.Duration
	// RefreshInterval is how often the list of queues is read again when
	// Queues is empty. Defaults to 5 s.
	RefreshInterval time.Duration
	// OnPromote, when set, is called after each pass that moved jobs
	// (metrics: batch sizes). Defaults to nil.
	OnPromote func(queue string, moved int)
	// Logger receives errors from Redis. Defaults to slog.Default().
	Logger *slog.Logger
}

// Promoter moves due jobs into the pending lists. Any number of promoters
// may run on the same queues: promotion is one atomic script per batch, so
// no job is promoted twice.
type Promoter struct {
	cfg    Config
	clock  clockwork.Clock
	log    *slog.Logger
	mu     sync.Mutex
	wakes  map[string]chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewPromoter checks cfg and fills its defaults.
func NewPromoter(cfg Config) (*Promoter, error) {
	if cfg.Source == nil {
		return nil, errors.New("delayed: Config.Source is required")
	}
	cfg.MaxSleep = cmp.Or(cfg.MaxSleep, time.Second)
	cfg.IdleSleep = max(cmp.Or(cfg.IdleSleep, time.Minute), cfg.MaxSleep)
	cfg.RefreshInterval = cmp.Or(cfg.RefreshInterval, 5*time.Second)
	p := &Promoter{cfg: cfg, clock: cmp.Or[clockwork.Clock](cfg.Clock, clockwork.NewRealClock()),
		log: cmp.Or(cfg.Logger, slog.Default()), wakes: map[string]chan struct{}{}}
	return p, nil
}

// Start starts the loops and returns at once. The loops run until Stop is
// called or ctx ends.
func (p *Promoter) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return errors.New("delayed: promoter already started")
	}
	ctx, p.cancel = context.WithCancel(ctx)
	nudges := p.cfg.Source.Nudges(ctx)
	for _, q := range p.cfg.Queues {
		p.startLocked(ctx, q)
	}
	p.wg.Add(1)
	go p.dispatch(ctx, nudges)
	if len(p.cfg.Queues) == 0 {
		p.wg.Add(1)
		go p.refresh(ctx)
	}
	return nil
}

// Stop ends the loops and waits for them, or for ctx to end.
func (p *Promoter) Stop(ctx context.Context) error {
	p.mu.Lock()
	cancel := p.cancel
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wake makes the loop of queue pass over it now. Unknown queues are
// started when the promoter follows every queue.
func (p *Promoter) Wake(queue string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.wakes[queue]
	if !ok {
		return
	}
	select {
	case w <- struct{}{}:
	default:
	}
}

func (p *Promoter) startLocked(ctx context.Context, queue string) {
	if _, ok := p.wakes[queue]; ok {
		return
	}
	w := make(chan struct{}, 1)
	p.wakes[queue] = w
	p.wg.Add(1)
	go p.loop(ctx, queue, w)
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
			p.mu.Lock()
			if len(p.cfg.Queues) == 0 && ctx.Err() == nil {
				p.startLocked(ctx, n.Queue)
			}
			p.mu.Unlock()
			p.Wake(n.Queue)
		}
	}
}

func (p *Promoter) refresh(ctx context.Context) {
	defer p.wg.Done()
	for {
		qs, err := p.cfg.Source.Queues(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("promoter: listing queues failed", "err", err)
		}
		p.mu.Lock()
		if ctx.Err() == nil {
			for _, q := range qs {
				p.startLocked(ctx, q)
			}
		}
		p.mu.Unlock()
		t := p.clock.NewTimer(p.cfg.RefreshInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
	}
}

// loop promotes one queue: a pass, then a sleep until the next due job (at
// most MaxSleep), cut short by a wake.
func (p *Promoter) loop(ctx context.Context, queue string, wake <-chan struct{}) {
	defer p.wg.Done()
	for ctx.Err() == nil {
		moved, next, err := p.cfg.Source.Promote(ctx, queue)
		wait := p.cfg.MaxSleep
		switch {
		case err == nil && next.IsZero():
			wait = p.cfg.IdleSleep // nothing scheduled: a nudge wakes it
		case err != nil:
			if ctx.Err() == nil {
				p.log.Warn("promoter: promote failed", "queue", queue, "err", err)
			}
		case !next.IsZero():
			// From the clock as it is now, after the round trip: the sleep
			// ends at the due time, not a round trip after it.
			wait = min(wait, p.clock.Until(next))
		}
		if moved > 0 && p.cfg.OnPromote != nil {
			p.cfg.OnPromote(queue, moved)
		}
		if wait <= 0 {
			continue // more is due already: the next batch
		}
		if !p.sleep(ctx, wait, wake) {
			return
		}
	}
}

// sleep waits d, or until a wake or ctx's end; false when ctx ended. The
// wait is an [Alarm], so on the real clock it ends on time to a fraction
// of a millisecond.
func (p *Promoter) sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	rang := make(chan struct{}, 1)
	a := NewAlarm(p.clock, p.clock.Now().Add(d), func() { rang <- struct{}{} })
	defer a.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-rang:
	case <-wake:
	}
	return true
}
