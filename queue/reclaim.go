package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// Reclaim takes back, now, the jobs of queue whose worker is gone: those
// whose lease has lapsed by Redis's clock go back to the head of pending
// with their attempts kept, to the dead set when their attempts are spent,
// or end canceled when their cancellation was requested. It also deletes
// the finished jobs whose retention is over and trims the dead set by age
// and count. It works in bounded batches and answers the ids taken back.
// (A claim is one script, so no claimer can die holding a job without a
// lease.) Last, it parks the queue in the sweep index at its next work's
// time (see attention.go).
func (c *Client) Reclaim(ctx context.Context, queue string) ([]string, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	var ids []string
	for range maxScriptLoops {
		res, err := call(ctx, c, store.Reclaim, k, &store.ReclaimArgs{Limit: reclaimBatch, DeadMax: c.cfg.DeadMaxJobs,
			DeadAgeMs: c.cfg.DeadMaxAge.Milliseconds(), RetentionMs: max(c.cfg.Retention.Milliseconds(), 0), TombMs: c.tombMs()})
		if err != nil {
			return ids, fmt.Errorf("queue: reclaim %s: %w", queue, err)
		}
		more, next, seq := res.More, res.NextMs, res.NowUs
		if res.WF != 0 {
			c.mark(ctx, queue, marked{WFMs: res.WF, Seq: seq}) // workflow nodes ended (see workflow.go)
		}
		for i := range res.IDs {
			id, err := store.Str("reclaim", res.IDs, i, "id")
			if err != nil {
				return ids, fmt.Errorf("queue: reclaim %s: %w", queue, err)
			}
			ids = append(ids, id)
		}
		if more == 0 {
			a := store.AttentionKeys(c.ns)
			return ids, c.park(ctx, a.Sweep, a.SweepSeq, queue, next, seq)
		}
	}
	return ids, nil
}

// ReclaimerConfig configures a [Reclaimer].
type ReclaimerConfig struct {
	// Client is the queue store. Required.
	Client *Client
	// Queues to sweep. Defaults to every known queue.
	Queues []string
	// Interval between sweeps. A lapsed lease waits at most this long on
	// top of its visibility. Defaults to 5 s.
	Interval time.Duration
	// ReconcileInterval is how often a sweep looks at every queue rather
	// than only those the sweep index names (see [Reclaimer]): it repairs
	// an index entry left late by a client that died between a change and
	// its mark, and forgets queues idle for Config.IdleQueueTTL. The first
	// sweep is one. Defaults to 5 minutes.
	ReconcileInterval time.Duration
	// OnReclaim, when set, is called with the ids each sweep took back.
	OnReclaim func(queue string, ids []string)
	// Logger receives errors. Defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultReconcileInterval is how often a Reclaimer sweep, and a
// delayed.Promoter pass, looks at every queue (ReclaimerConfig and
// delayed.Config's ReconcileInterval).
const DefaultReconcileInterval = 5 * time.Minute

// sweepBatch is how many queues a sweep reads from the sweep index at
// once; a sweep reads on while it gets as many.
const sweepBatch = 1000

// Reclaimer runs [Client.Reclaim] over the queues on a schedule. Any number
// may run at once: each reclaim is atomic per batch. A sweep costs Redis in
// proportion to the queues that have work then, not to the queues there
// are: it reads from the namespace's sweep index (see attention.go) the
// queues whose next lease deadline, retention end or dead job's age has
// come, and reclaims those, each of which parks itself in the index again
// at its next work's time. Every ReconcileInterval a sweep reconciles
// instead: it reads every queue's heads in one pipeline (see
// sweepPlan), reclaims those with work now or an index entry
// later than their work, and forgets the idle ones.
type Reclaimer struct {
	cfg        ReclaimerConfig
	clock      clockwork.Clock
	log        *slog.Logger
	only       map[string]bool // cfg.Queues as a set; nil: every queue
	running    atomic.Bool
	reconciled time.Time // by Run's goroutine only
}

// NewReclaimer checks cfg and fills its defaults.
func NewReclaimer(cfg ReclaimerConfig) (*Reclaimer, error) {
	if cfg.Client == nil {
		return nil, errors.New("queue: ReclaimerConfig.Client is required")
	}
	var only map[string]bool
	for _, q := range cfg.Queues {
		if err := names.ValidateQueue(q); err != nil {
			return nil, err
		}
		if only == nil {
			only = map[string]bool{}
		}
		only[q] = true
	}
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	cfg.ReconcileInterval = cmp.Or(cfg.ReconcileInterval, DefaultReconcileInterval)
	return &Reclaimer{cfg: cfg, clock: cfg.Client.clock, log: cmp.Or(cfg.Logger, slog.Default()), only: only}, nil
}

// Run sweeps until ctx ends, then returns nil once the sweep under way
// has stopped. One Run at a time: a second one while the first is under
// way answers an error at once.
func (r *Reclaimer) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("queue: the reclaimer is running already")
	}
	defer r.running.Store(false)
	for {
		r.sweep(ctx)
		t := r.clock.NewTimer(r.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.Chan():
		}
	}
}

// sweep is one tick: a reconcile when one is due, else the queues the
// sweep index names.
func (r *Reclaimer) sweep(ctx context.Context) {
	if r.reconciled.IsZero() || r.clock.Since(r.reconciled) >= r.cfg.ReconcileInterval {
		if r.reconcile(ctx) {
			r.reconciled = r.clock.Now()
		}
		return
	}
	seen := map[string]bool{}
	for range maxScriptLoops {
		due, err := r.cfg.Client.sweepDue(ctx, sweepBatch)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("reclaimer: reading the sweep index failed", "err", err)
			}
			return
		}
		fresh := 0
		for _, d := range due {
			if seen[d.Queue] || r.only != nil && !r.only[d.Queue] {
				continue
			}
			seen[d.Queue] = true
			fresh++
			r.reclaim(ctx, d.Queue)
		}
		if len(due) < sweepBatch || fresh == 0 {
			return
		}
	}
}

// reconcile sweeps with every queue in view (see Reclaimer), and answers
// whether it read them all.
func (r *Reclaimer) reconcile(ctx context.Context) bool {
	qs := r.cfg.Queues
	if len(qs) == 0 {
		var err error
		if qs, err = r.cfg.Client.Queues(ctx); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("reclaimer: listing queues failed", "err", err)
			}
			return false
		}
	}
	work, empty, err := r.cfg.Client.sweepPlan(ctx, qs)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reclaimer: reading what to sweep failed", "err", err)
		}
		return false
	}
	for _, q := range work {
		r.reclaim(ctx, q)
	}
	for _, q := range empty {
		if gone, err := r.cfg.Client.forgetIdle(ctx, q); err != nil && ctx.Err() == nil {
			r.log.Warn("reclaimer: forgetting an idle queue failed", "queue", q, "err", err)
		} else if gone {
			r.log.Info("reclaimer: forgot an idle, empty queue", "queue", q)
		}
	}
	return true
}

func (r *Reclaimer) reclaim(ctx context.Context, q string) {
	ids, err := r.cfg.Client.Reclaim(ctx, q)
	if err != nil && ctx.Err() == nil {
		r.log.Warn("reclaimer: sweep failed", "queue", q, "err", err)
	}
	if len(ids) > 0 {
		r.log.Info("reclaimer: took back jobs of lost workers", "queue", q, "count", len(ids))
		if r.cfg.OnReclaim != nil {
			r.cfg.OnReclaim(q, ids)
		}
	}
}

// sweepPlan reads, in one pipeline, what a reclaim sweep of each of qs
// would act on, and answers the queues with work (a lease lapsed, a job or
// idempotency record past its time, a dead set past its age or count, by
// Redis's clock, read in the same pipeline, a second ahead to be safe, or
// an entry in the sweep index later than the queue's next such time) and
// those that hold no job at all and saw no enqueue for
// Config.IdleQueueTTL (which the sweep forgets). It costs Redis a few
// reads per queue, however many jobs the queues hold.
func (c *Client) sweepPlan(ctx context.Context, qs []string) (work, empty []string, err error) {
	type probe struct {
		lease, expiry, dead *redis.ZSliceCmd
		ndead, njobs        *redis.IntCmd
		active              *redis.SliceCmd
	}
	if len(qs) == 0 {
		return nil, nil, nil
	}
	pipe := c.rdb.Pipeline()
	clock := pipe.Time(ctx) // Redis's (a cluster's: one node's), as the scripts read it
	index := pipe.ZMScore(ctx, store.AttentionKeys(c.ns).Sweep, qs...)
	probes := make([]probe, len(qs))
	for i, q := range qs {
		k, err := c.keysFor(q)
		if err != nil {
			return nil, nil, err
		}
		probes[i] = probe{lease: pipe.ZRangeWithScores(ctx, k.Leases, 0, 0), expiry: pipe.ZRangeWithScores(ctx, k.Expiry, 0, 0),
			dead: pipe.ZRangeWithScores(ctx, k.Dead, 0, 0), ndead: pipe.ZCard(ctx, k.Dead), njobs: pipe.HLen(ctx, k.Jobs),
			active: pipe.HMGet(ctx, k.Meta, store.MetaActive, store.MetaCreated)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("queue: reading what to sweep: %w", wrapRedis(err))
	}
	redisNow := clock.Val().Add(time.Duration(c.timeOffset()) * time.Microsecond)
	nowMs := float64(redisNow.Add(time.Second).UnixMilli())
	head := func(z *redis.ZSliceCmd, plus float64) float64 {
		h := z.Val()
		if len(h) == 1 && h[0].Member != store.Sentinel {
			return h[0].Score + plus
		}
		return math.Inf(1)
	}
	scores := index.Val()
	for i, p := range probes {
		next := min(head(p.lease, 0), head(p.expiry, 0), head(p.dead, float64(c.cfg.DeadMaxAge.Milliseconds())))
		if p.ndead.Val()-store.Sentinels > int64(c.cfg.DeadMaxJobs) {
			next = math.Inf(-1)
		}
		indexed := math.Inf(1)
		if i < len(scores) && scores[i] != 0 { // ZMSCORE answers nil, read as 0, for a queue not in it
			indexed = scores[i]
		}
		if next <= nowMs || next < math.Inf(1) && indexed > next {
			work = append(work, qs[i])
		}
		if p.njobs.Val() <= store.Sentinels && lastActive(p.active.Val())+float64(c.cfg.IdleQueueTTL.Milliseconds()) <= nowMs {
			empty = append(empty, qs[i])
		}
	}
	return work, empty, nil
}

// lastActive reads the meta fields active_ms, created_ms as HMGET answers
// them: the last enqueue, or the queue's creation.
func lastActive(v []any) float64 {
	for _, x := range v {
		if s, ok := x.(string); ok {
			if ms, err := strconv.ParseFloat(s, 64); err == nil {
				return ms
			}
		}
	}
	return 0
}

// LeaseExpiredError begins the last error of a job the reclaim sweep put
// in the dead set: its lease lapsed on its last attempt (its worker died
// or hung). reclaim.lua writes it; a test holds the two equal.
const LeaseExpiredError = "lease expired: worker lost"
