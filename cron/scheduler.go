package cron

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
)

// Defaults and limits of a [Config].
const (
	DefaultRefreshInterval = time.Second
	DefaultGrace           = time.Minute
	MaxGrace               = 30 * time.Minute // below tickMemory
	// maxTicksPerPass bounds the ticks one pass enqueues for one entry;
	// the loop goes round again at once for the rest.
	maxTicksPerPass = 1000
)

// Config configures a [Scheduler].
type Config struct {
	// Client is the queue client the ticks are enqueued through; its
	// namespace holds the entries. Required.
	Client *queue.Client
	// Clock drives the loop. Defaults to the Client's clock.
	Clock clockwork.Clock
	// RefreshInterval is how often the entries are read again from Redis,
	// and so how soon a change made on another instance is followed.
	// Defaults to 1 s.
	RefreshInterval time.Duration
	// Grace is how late a tick may be enqueued and still count as on time
	// while the loop runs (Redis was unreachable, the process was paused).
	// Ticks later than that count as missed and follow the entry's Missed
	// policy. Must be at most 30 min. Defaults to 1 min.
	Grace time.Duration
	// Logger receives errors from Redis and skipped ticks. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Scheduler is the tick loop of one instance. Run one in every instance:
// they need no leader, and each tick is enqueued once however many run.
type Scheduler struct {
	cfg   Config
	store *Store
	clock clockwork.Clock
	log   *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewScheduler checks cfg and fills its defaults.
func NewScheduler(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, errors.New("cron: Config.Client is required")
	}
	cfg.Clock = cmp.Or(cfg.Clock, cfg.Client.Clock())
	cfg.RefreshInterval = cmp.Or(cfg.RefreshInterval, DefaultRefreshInterval)
	cfg.Grace = cmp.Or(cfg.Grace, DefaultGrace)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.RefreshInterval < 0 {
		return nil, errors.New("cron: Config.RefreshInterval must be positive")
	}
	if cfg.Grace < 0 || cfg.Grace > MaxGrace {
		return nil, fmt.Errorf("cron: Config.Grace must be in (0, %s]", MaxGrace)
	}
	return &Scheduler{cfg: cfg, store: NewStore(cfg.Client), clock: cfg.Clock, log: cfg.Logger}, nil
}

// Start starts the loop and returns at once. It runs until Stop is called
// or ctx ends. A stopped Scheduler may be started again: it then behaves
// as a freshly started instance (ticks missed meanwhile follow the
// entries' Missed policy).
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("cron: scheduler already started")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.run(ctx, s.done)
	return nil
}

// Stop ends the loop and waits for it, or for ctx to end. A tick being
// enqueued is finished or abandoned; either way another instance, or the
// Missed policy at the next start, covers it.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	if s.done == done {
		s.cancel, s.done = nil, nil
	}
	s.mu.Unlock()
	return nil
}

// tracked is the loop's state of one entry.
type tracked struct {
	raw    string // the stored JSON: a change starts the entry afresh
	broken bool   // raw does not decode or parse: logged once, ignored
	entry  Entry
	sched  *Schedule
	since  time.Time // UpdatedAt: ticks at or before it are not the entry's
	// fresh: the entry was there when the loop started, so ticks before
	// the first pass passed while no instance ran (as far as this one
	// knows).
	fresh bool
	init  bool // next is not known yet (the last run must be read)
	// next is the first tick not handled yet; zero when none comes.
	next time.Time
	// missedBefore: ticks before it count as missed (the start, or the
	// cut-off of a gap longer than Grace, kept so that a retried
	// catch-up picks the same tick).
	missedBefore time.Time
}

// loop is the state of one run of the Scheduler.
type loop struct {
	s           *Scheduler
	entries     map[string]*tracked
	loaded      bool
	nextRefresh time.Time
}

func (s *Scheduler) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	l := &loop{s: s, entries: map[string]*tracked{}}
	for ctx.Err() == nil {
		wait := l.pass(ctx, s.clock.Now())
		if wait <= 0 {
			continue // more ticks are due than one pass takes
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
	}
}

// pass reads the entries when they are due for a refresh, enqueues every
// due tick and answers how long to sleep: until the earliest next tick,
// at most until the next refresh.
func (l *loop) pass(ctx context.Context, now time.Time) time.Duration {
	failed := false
	if !l.loaded || !now.Before(l.nextRefresh) {
		l.nextRefresh = now.Add(l.s.cfg.RefreshInterval)
		if err := l.refresh(ctx); err != nil {
			failed = true
			l.warn(ctx, "cron: reading the entries failed", "err", err)
		}
	}
	capped, err := l.tick(ctx, now)
	if err != nil {
		failed = true
		l.warn(ctx, "cron: enqueueing ticks failed", "err", err)
	}
	if failed {
		return l.s.cfg.RefreshInterval // retry then
	}
	if capped {
		return 0
	}
	wait := l.nextRefresh.Sub(now)
	for _, t := range l.entries {
		if !t.broken && !t.init && !t.next.IsZero() {
			wait = min(wait, t.next.Sub(now))
		}
	}
	return wait
}

func (l *loop) warn(ctx context.Context, msg string, args ...any) {
	if ctx.Err() == nil {
		l.s.log.Warn(msg, args...)
	}
}

// refresh reads the entries and follows their changes.
func (l *loop) refresh(ctx context.Context) error {
	all, err := l.s.store.load(ctx)
	if err != nil {
		return err
	}
	fresh := !l.loaded
	l.loaded = true
	for name := range l.entries {
		if _, ok := all[name]; !ok {
			delete(l.entries, name)
		}
	}
	for name, raw := range all {
		if t, ok := l.entries[name]; ok && t.raw == raw {
			continue
		}
		t := &tracked{raw: raw, fresh: fresh, init: true}
		l.entries[name] = t
		st, err := decodeStored(raw)
		if err == nil {
			t.entry, t.since = st.Entry, time.UnixMilli(st.UpdatedAtMs).UTC()
			t.sched, err = Parse(st.Schedule, st.Timezone)
		}
		if err != nil {
			t.broken = true
			l.s.log.Error("cron: ignoring a stored entry", "name", name, "err", err)
		}
	}
	return nil
}

// plannedTick is a tick to enqueue and where the entry's next is after it.
type plannedTick struct {
	at      time.Time
	after   time.Time
	catchUp bool
}

// tick enqueues the due ticks of every entry. capped is true when an
// entry had more due ticks than one pass takes.
func (l *loop) tick(ctx context.Context, now time.Time) (capped bool, err error) {
	names := make([]string, 0, len(l.entries))
	for name, t := range l.entries {
		if !t.broken && !t.entry.Paused {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if err := l.initEntries(ctx, names, now); err != nil {
		return false, err
	}
	plans := map[string][]plannedTick{}
	var due []string
	for _, name := range names {
		p, c := l.plan(name, l.entries[name], now)
		capped = capped || c
		if len(p) > 0 {
			plans[name] = p
			due = append(due, name)
		}
	}
	if len(due) == 0 {
		return capped, nil
	}
	runs, done, err := l.readDue(ctx, due, plans)
	if err != nil {
		return false, err
	}
	for i, name := range due {
		if err := l.enqueue(ctx, name, l.entries[name], &runs[i], plans[name], done[i]); err != nil {
			return false, err
		}
	}
	return capped, nil
}

// initEntries finds where the new entries among names resume: after their
// last recorded tick or their last change, whichever is later, but never
// after now. Ticks from now on are this instance's to run whatever was
// recorded: a record past now comes from an instance whose clock is ahead,
// and may follow ticks it counted as missed at its start that are still
// ahead here (those found done are skipped).
func (l *loop) initEntries(ctx context.Context, names []string, now time.Time) error {
	var fresh []string
	for _, name := range names {
		if l.entries[name].init {
			fresh = append(fresh, name)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	runs, err := l.s.store.lastRuns(ctx, fresh)
	if err != nil {
		return err
	}
	for i, name := range fresh {
		t := l.entries[name]
		from := t.since
		if last := time.UnixMilli(runs[i].tickMs).UTC(); runs[i].tickMs > 0 && last.After(from) {
			from = last
		}
		if limit := now.Add(-time.Nanosecond); from.After(limit) {
			from = limit
		}
		if from.Before(t.since) {
			from = t.since
		}
		t.next = t.sched.Next(from)
		if t.fresh {
			t.missedBefore = now
		}
		t.init = false
	}
	return nil
}

// plan lists the ticks of t to enqueue at now: a catch-up for the missed
// ones (policy once), then those on time, at most maxTicksPerPass.
func (l *loop) plan(name string, t *tracked, now time.Time) (p []plannedTick, capped bool) {
	if t.next.IsZero() || t.next.After(now) {
		return nil, false
	}
	cutoff := now.Add(-l.s.cfg.Grace)
	if t.missedBefore.After(cutoff) {
		cutoff = t.missedBefore
	}
	start := t.next
	if start.Before(cutoff) {
		t.missedBefore = cutoff
		first := t.sched.firstAtOrAfter(cutoff)
		if t.entry.Missed == MissedOnce {
			if m := t.sched.lastBefore(start, cutoff); !m.IsZero() {
				p = append(p, plannedTick{at: m, after: first, catchUp: true})
			}
		}
		if len(p) == 0 {
			l.s.log.Info("cron: skipping missed ticks", "name", name, "from", start, "before", cutoff)
			t.next = first
		}
		start = first
	}
	for at := start; !at.IsZero() && !at.After(now); {
		if len(p) == maxTicksPerPass {
			return p, true
		}
		next := t.sched.Next(at)
		p = append(p, plannedTick{at: at, after: next})
		at = next
	}
	return p, false
}

// readDue reads, in one round trip, the last run of each due entry and
// which of its planned ticks are done already.
func (l *loop) readDue(ctx context.Context, due []string, plans map[string][]plannedTick) ([]lastRun, [][]bool, error) {
	ns := l.s.store.ns
	pipe := l.s.store.rdb.Pipeline()
	runCmds := make([]*redis.MapStringStringCmd, len(due))
	doneCmds := make([]*redis.FloatSliceCmd, len(due))
	for i, name := range due {
		runCmds[i] = pipe.HGetAll(ctx, runKey(ns, name))
		members := make([]string, len(plans[name]))
		for j, pt := range plans[name] {
			members[j] = strconv.FormatInt(pt.at.UnixMilli(), 10)
		}
		doneCmds[i] = pipe.ZMScore(ctx, ticksKey(ns, name), members...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, redisErr("read due entries", err)
	}
	runs := make([]lastRun, len(due))
	done := make([][]bool, len(due))
	for i := range due {
		runs[i] = parseLastRun(runCmds[i].Val())
		scores := doneCmds[i].Val()
		done[i] = make([]bool, len(plans[due[i]]))
		for j := range done[i] {
			// ZMSCORE answers nil (0 here) for a member that is absent;
			// a tick's score is its ms, never 0.
			done[i][j] = j < len(scores) && scores[j] != 0
		}
	}
	return runs, done, nil
}

// enqueue enqueues the planned ticks of one entry in order, advancing its
// next after each. A Redis failure stops it; the next pass retries from
// the tick that failed, under the same idempotency key.
func (l *loop) enqueue(ctx context.Context, name string, t *tracked, run *lastRun, plan []plannedTick, done []bool) error {
	for i, pt := range plan {
		if !done[i] {
			if err := l.enqueueTick(ctx, name, t, run, pt); err != nil {
				return err
			}
		}
		t.next = pt.after
	}
	return nil
}

func (l *loop) enqueueTick(ctx context.Context, name string, t *tracked, run *lastRun, pt plannedTick) error {
	if t.entry.Overlap == OverlapSkip && run.jobID != "" {
		j, err := l.s.cfg.Client.Get(ctx, run.queue, run.jobID)
		switch {
		case err == nil && active(j.Status):
			l.s.log.Debug("cron: tick skipped: the previous run is not finished", "name", name,
				"tick", pt.at, "job", run.jobID, "status", j.Status)
			return nil
		case err != nil && !errors.Is(err, queue.ErrNotFound) && !errors.Is(err, queue.ErrInvalid):
			return err
		}
	}
	res, err := l.s.cfg.Client.Enqueue(ctx, newJob(t.entry, tickIdempotencyKey(name, pt.at)))
	if err != nil {
		if errors.Is(err, queue.ErrInvalid) || errors.Is(err, queue.ErrTooManyQueues) || errors.Is(err, queue.ErrPayloadTooLarge) {
			// Retrying cannot help: drop this tick, keep the next. Put
			// refuses the entries whose jobs the client refuses, so this
			// is a queue past Config.MaxQueues, or an entry stored before
			// a client with a lower cap started.
			l.s.log.Error("cron: tick dropped", "name", name, "tick", pt.at, "err", err)
			return nil
		}
		return fmt.Errorf("cron: enqueue tick %s of %q: %w", pt.at.Format(time.RFC3339), name, err)
	}
	if pt.catchUp {
		l.s.log.Info("cron: caught up missed ticks with one run", "name", name, "tick", pt.at,
			"job", res.Job.ID, "replayed", res.Replayed)
	}
	if err := l.s.store.record(ctx, name, pt.at, res.Job); err != nil {
		return err
	}
	if ms := pt.at.UnixMilli(); ms > run.tickMs {
		*run = lastRun{tickMs: ms, at: pt.at, queue: res.Job.Queue, jobID: res.Job.ID}
	}
	return nil
}

// active reports whether a job with status s has not finished.
func active(s queue.Status) bool {
	return s == queue.StatusScheduled || s == queue.StatusPending || s == queue.StatusProcessing
}
