package cron

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/tracing"
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
	// maxEntriesPerPass bounds the due entries one pass reads, earliest
	// cursor first; the loop goes round again at once for the rest.
	maxEntriesPerPass = 100
	// repairInterval is how often at most a loop repairs the due index
	// while the entries and their versions do not match (see repair).
	repairInterval = time.Minute
	// minWait is the shortest sleep until a tick Redis's clock has not
	// reached: when the estimate of that clock says it has, the loop looks
	// again this soon rather than at once.
	minWait = time.Millisecond
)

// Config configures a [Scheduler].
type Config struct {
	// Client is the queue client the ticks are enqueued through; its
	// namespace holds the entries. Required.
	Client *queue.Client
	// Clock drives the loop's sleeps. Defaults to the Client's clock.
	// Which tick is due is decided by the clock of the Redis that holds
	// the entries, never by this one: the loop sleeps until a tick's
	// instant on Redis's clock, less its estimate of how far that clock is
	// ahead of this one.
	Clock clockwork.Clock
	// RefreshInterval is the longest the loop sleeps between two looks at
	// the due index, and so how late at most it sees a tick of an entry
	// put, on any instance, after the loop went to sleep until a later
	// one. Each look reads only the entries that are due. Defaults to 1 s.
	RefreshInterval time.Duration
	// Grace is how late a tick may be enqueued, by Redis's clock, and
	// still count as on time (Redis was unreachable, the process was
	// paused, or restarted: see the package's "Missed runs"). Ticks later than that count as missed
	// and follow the entry's Missed policy. Must be at most 30 min.
	// Defaults to 1 min.
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

	mu      sync.Mutex
	running bool
}

// NewScheduler checks cfg and fills its defaults.
func NewScheduler(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, errors.New("cron: Config.Client is required")
	}
	cfg.Clock = cmp.Or(cfg.Clock, plumbing.Of(cfg.Client).Clock())
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

// Run runs the tick loop until ctx ends, then answers nil; a second Run
// while one runs answers an error. When ctx ends, a tick being enqueued
// is finished or abandoned; either way another instance, or the Missed
// policy at the next start, covers it. Run again after it returned, the
// Scheduler behaves as a freshly started instance (ticks missed meanwhile
// follow the entries' Missed policy). (internal/lifecycle gives the
// Start/Stop of this convention.)
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("cron: the scheduler is running already")
	}
	s.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
	s.run(ctx)
	return nil
}

// loop is the state of one run of the Scheduler. The entries' state is in
// Redis (their cursors); the loop keeps only what concerns itself.
type loop struct {
	s *Scheduler
	// startLocal is when the loop started, on its clock; start is that
	// instant on Redis's clock, set at the first read of the due index:
	// ticks before it of an entry no instance had handled for longer than
	// Grace were missed.
	startLocal, start time.Time
	// pins keep, for an entry whose missed ticks a pass found but failed
	// to handle, the cut-off it used: the retry picks the same catch-up
	// tick. Dropped when the entry's cursor moves.
	pins map[string]pin
	// broken remembers the entries whose settings cannot be read, by
	// version, so that each is logged once.
	broken map[string]string
	// repairedAt is when the loop last repaired the index; zero: never.
	repairedAt time.Time
}

func newLoop(s *Scheduler, start time.Time) *loop {
	return &loop{s: s, startLocal: start, pins: map[string]pin{}, broken: map[string]string{}}
}

// pin is the cut-off of missed ticks used for an entry at a cursor.
type pin struct {
	version string
	cursor  time.Time
	cutoff  time.Time
}

func (s *Scheduler) run(ctx context.Context) {
	l := newLoop(s, s.clock.Now())
	for ctx.Err() == nil {
		wait := l.pass(ctx)
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

// pass enqueues the due ticks and answers how long to sleep, on the
// loop's clock: until the earliest cursor comes by Redis's clock (less
// the estimate of how far it is ahead), at most RefreshInterval (an entry
// put meanwhile may come sooner); 0 when more is due at once.
func (l *loop) pass(ctx context.Context) time.Duration {
	again, wake, err := l.tick(ctx)
	switch {
	case err != nil:
		l.warn(ctx, "cron: enqueueing ticks failed", "err", err)
		return l.s.cfg.RefreshInterval // retry then
	case again:
		return 0
	case wake.IsZero():
		return l.s.cfg.RefreshInterval
	}
	d := l.s.store.rc.localOf(wake).Sub(l.s.clock.Now())
	return max(min(d, l.s.cfg.RefreshInterval), minWait)
}

func (l *loop) warn(ctx context.Context, msg string, args ...any) {
	if ctx.Err() == nil {
		l.s.log.Warn(msg, args...)
	}
}

// planned is a due entry and what a pass does with it.
type planned struct {
	dueEntry
	entry Entry
	sched *Schedule
	ticks []plannedTick
	// next is the entry's cursor once its ticks are handled: after its
	// last tick, or after the missed ones it let pass.
	next time.Time
	// moved: the pass handled ticks (or let them pass); next is to be
	// written. through is the latest instant they reach: the last tick
	// handled, or the cut-off of the missed ones let pass.
	moved   bool
	through time.Time
	capped  bool
}

// plannedTick is a tick to enqueue and where the entry's cursor is after
// it.
type plannedTick struct {
	at      time.Time
	after   time.Time
	catchUp bool
}

// tick reads the due entries at Redis's now, enqueues their ticks in
// order and moves their cursors. It answers whether more is due at once,
// or else the earliest cursor after now, on Redis's clock (zero: none).
func (l *loop) tick(ctx context.Context) (again bool, wake time.Time, err error) {
	read, err := l.s.store.readDue(ctx, maxEntriesPerPass)
	if err != nil {
		return false, time.Time{}, err
	}
	if l.start.IsZero() {
		l.start = l.s.store.rc.redisOf(l.startLocal)
	}
	repaired, err := l.repairIfDue(ctx, read)
	if err != nil || repaired {
		return repaired, time.Time{}, err // repaired: read the index again
	}
	plans, withTicks := l.planAll(read.due, read.now)
	failed, err := l.enqueueAll(ctx, withTicks)
	if err != nil {
		return false, time.Time{}, err // nothing enqueued, no cursor moves
	}
	// The cursors of what was handled move, a failed pass included: the
	// next one retries from the tick that failed.
	moves, again, wake := l.movesOf(plans, read.now, read.next)
	if err := l.s.store.advance(ctx, moves); err != nil && failed == nil {
		failed = err
	}
	if failed != nil {
		return false, time.Time{}, failed
	}
	if again || (len(read.due) == maxEntriesPerPass && len(moves) > 0) {
		return true, time.Time{}, nil // more is due than one pass takes
	}
	return false, wake, nil
}

// repairIfDue repairs the index (see Store.repair) when read's counts of
// entries and versions differ, at most once a repairInterval; it answers
// whether it repaired anything.
func (l *loop) repairIfDue(ctx context.Context, read dueRead) (bool, error) {
	if read.entries == read.versions || (!l.repairedAt.IsZero() && read.now.Sub(l.repairedAt) < repairInterval) {
		return false, nil
	}
	l.repairedAt = read.now
	n, err := l.s.store.repair(ctx)
	if err != nil {
		return false, err
	}
	if n > 0 {
		l.s.log.Info("cron: indexed entries stored without a cursor, or dropped the index of deleted ones", "repaired", n)
	}
	return n > 0, nil
}

// planAll plans each due entry at now (see plan); withTicks are the plans
// with ticks to enqueue.
func (l *loop) planAll(due []dueEntry, now time.Time) (plans, withTicks []*planned) {
	for _, d := range due {
		p := l.plan(d, now)
		if p == nil {
			continue
		}
		plans = append(plans, p)
		if len(p.ticks) > 0 {
			withTicks = append(withTicks, p)
		}
	}
	return plans, withTicks
}

// enqueueAll enqueues the ticks of plans, entry after entry, and stops
// at the first that fails: failed is that error. err is a failure to
// read the entries' runs first, before anything was enqueued.
func (l *loop) enqueueAll(ctx context.Context, plans []*planned) (failed, err error) {
	if len(plans) == 0 {
		return nil, nil
	}
	runs, done, err := l.readRuns(ctx, plans)
	if err != nil {
		return nil, err
	}
	for i, p := range plans {
		if err := l.enqueue(ctx, p, &runs[i], done[i]); err != nil {
			return err, nil
		}
	}
	return nil, nil
}

// movesOf answers the cursor moves of the plans that handled ticks, and
// whether more is due at once, or else the earliest cursor after now,
// from next (the index's) and the moved cursors.
func (l *loop) movesOf(plans []*planned, now, next time.Time) (moves []advanced, again bool, wake time.Time) {
	wake = next
	for _, p := range plans {
		if !p.moved {
			continue
		}
		delete(l.pins, p.name)
		moves = append(moves, advanced{name: p.name, version: p.version, through: p.through, cursor: p.next})
		if p.capped || (!p.next.IsZero() && !p.next.After(now)) {
			again = true
		} else if !p.next.IsZero() && (wake.IsZero() || p.next.Before(wake)) {
			wake = p.next
		}
	}
	return moves, again, wake
}

// plan decodes a due entry and lists its ticks to enqueue at now: a
// catch-up for the missed ones (policy once), then those on time, at most
// maxTicksPerPass. nil when there is nothing to do: the entry is gone,
// paused or unreadable, or not indexed yet.
//
// Missed ticks are those more than Grace late at now, and, when the
// entry's cursor was more than Grace before the loop's start (no instance
// handled it for that long: none ran), all those before the start.
func (l *loop) plan(d dueEntry, now time.Time) *planned {
	st, sched, ok, err := decodeDue(d)
	if err != nil {
		if l.broken[d.name] != d.version {
			l.broken[d.name] = d.version
			l.s.log.Error("cron: ignoring a stored entry", "name", d.name, "err", err)
		}
		return nil
	}
	if !ok || st.Paused {
		return nil // gone, or paused, since the read; or repair will index it
	}
	delete(l.broken, d.name)
	p := &planned{dueEntry: d, entry: st.Entry, sched: sched, next: d.cursor}
	cutoff := now.Add(-l.s.cfg.Grace)
	if d.cursor.Before(l.start.Add(-l.s.cfg.Grace)) && l.start.After(cutoff) {
		cutoff = l.start
	}
	if pn, ok := l.pins[d.name]; ok && pn.version == d.version && pn.cursor.Equal(d.cursor) && pn.cutoff.After(cutoff) {
		cutoff = pn.cutoff
	}
	start := d.cursor
	if start.Before(cutoff) {
		l.pins[d.name] = pin{version: d.version, cursor: d.cursor, cutoff: cutoff}
		first := sched.firstAtOrAfter(cutoff)
		if st.Missed == MissedOnce {
			if m := sched.lastBefore(start, cutoff); !m.IsZero() {
				p.ticks = append(p.ticks, plannedTick{at: m, after: first, catchUp: true})
			}
		}
		if len(p.ticks) == 0 {
			l.s.log.Info("cron: skipping missed ticks", "name", d.name, "from", start, "before", cutoff)
			p.next, p.moved, p.through = first, true, cutoff
		}
		start = first
	}
	for at := start; !at.IsZero() && !at.After(now); {
		if len(p.ticks) == maxTicksPerPass {
			p.capped = true
			break
		}
		next := sched.Next(at)
		p.ticks = append(p.ticks, plannedTick{at: at, after: next})
		at = next
	}
	return p
}

// readRuns reads, in one round trip, the last run of each planned entry
// and which of its planned ticks are done already.
func (l *loop) readRuns(ctx context.Context, plans []*planned) ([]lastRun, [][]bool, error) {
	ns := l.s.store.ns
	pipe := l.s.store.rdb.Pipeline()
	runCmds := make([]*redis.MapStringStringCmd, len(plans))
	doneCmds := make([]*redis.FloatSliceCmd, len(plans))
	for i, p := range plans {
		runCmds[i] = pipe.HGetAll(ctx, runKey(ns, p.name))
		members := make([]string, len(p.ticks))
		for j, pt := range p.ticks {
			members[j] = strconv.FormatInt(pt.at.UnixMilli(), 10)
		}
		doneCmds[i] = pipe.ZMScore(ctx, ticksKey(ns, p.name), members...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, redisErr("read due entries", err)
	}
	runs := make([]lastRun, len(plans))
	done := make([][]bool, len(plans))
	for i, p := range plans {
		runs[i] = parseLastRun(runCmds[i].Val())
		scores := doneCmds[i].Val()
		done[i] = make([]bool, len(p.ticks))
		for j := range done[i] {
			// ZMSCORE answers nil (0 here) for a member that is absent;
			// a tick's score is its ms, never 0.
			done[i][j] = j < len(scores) && scores[j] != 0
		}
	}
	return runs, done, nil
}

// enqueue enqueues the planned ticks of one entry in order, moving its
// cursor past each. A Redis failure stops it; the next pass retries from
// the tick that failed, under the same idempotency key.
func (l *loop) enqueue(ctx context.Context, p *planned, run *lastRun, done []bool) error {
	for i, pt := range p.ticks {
		if !done[i] {
			if err := l.enqueueTick(ctx, p, run, pt); err != nil {
				return err
			}
		}
		p.next, p.moved, p.through = pt.after, true, pt.at
	}
	return nil
}

// fire enqueues a tick's job. While tracing is on, under a span of its
// own, "cron <entry>", the root of the trace the job's run joins (a tick
// has no request to descend from).
func (l *loop) fire(ctx context.Context, name string, pt plannedTick, nj queue.NewJob) (queue.Enqueued, error) {
	t, on := tracing.Tracer()
	if !on {
		return l.s.cfg.Client.Enqueue(ctx, nj)
	}
	ctx, span := t.Start(ctx, "cron "+name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("chronoq.cron.entry", name), attribute.String("chronoq.cron.tick", pt.at.UTC().Format(time.RFC3339Nano)),
			attribute.Bool("chronoq.cron.catch_up", pt.catchUp)))
	res, err := l.s.cfg.Client.Enqueue(ctx, nj)
	tracing.End(span, err)
	return res, err
}

func (l *loop) enqueueTick(ctx context.Context, p *planned, run *lastRun, pt plannedTick) error {
	name := p.name
	if p.entry.Overlap == OverlapSkip && run.jobID != "" {
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
	// Due at the tick: the queue's Redis decides when it runs (on a
	// cluster, the master of the queue's slot, whose clock may differ from
	// that of the master of the due index).
	nj := newJob(p.entry, tickIdempotencyKey(name, pt.at))
	nj.RunAt = pt.at
	res, err := l.fire(ctx, name, pt, nj)
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
