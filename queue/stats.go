package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stats are a queue's depths and totals.
type Stats struct {
	Queue  string
	Paused bool
	// Depths now.
	Scheduled, Pending, Processing, Dead int64
	// CompletedHistory is the length of the capped list of recent
	// completions.
	CompletedHistory int64
	// Totals since the queue was first used.
	EnqueuedTotal, PromotedTotal, CompletedTotal, FailedTotal, RetriedTotal, ReclaimedTotal, DeadTotal int64
	// CanceledTotal counts cancels; RequeuedTotal dead jobs sent back to
	// pending.
	CanceledTotal, RequeuedTotal int64
	// OldestPendingAge is how long the next job to be claimed has been due;
	// zero when none is pending.
	OldestPendingAge time.Duration
	// NextRunAt is the due time of the earliest scheduled job; zero when
	// none is scheduled.
	NextRunAt time.Time
}

// Stats reads the depths and totals of queue in one round trip (and a
// second for the oldest pending job).
func (c *Client) Stats(ctx context.Context, queue string) (Stats, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return Stats{}, err
	}
	pipe := c.rdb.Pipeline()
	sched, pend, leased, gap := pipe.ZCard(ctx, k.scheduled), pipe.LLen(ctx, k.pending), pipe.ZCard(ctx, k.leases), pipe.LLen(ctx, k.processing)
	dead, hist := pipe.ZCard(ctx, k.dead), pipe.LLen(ctx, k.completed)
	totals, paused := pipe.HGetAll(ctx, k.stats), pipe.Exists(ctx, k.paused)
	oldest, head := pipe.LIndex(ctx, k.pending, -1), pipe.ZRangeWithScores(ctx, k.scheduled, 0, 0)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, fmt.Errorf("queue: stats of %s: %w", queue, wrapRedis(err))
	}
	t := totals.Val()
	n := func(f string) int64 { v, _ := strconv.ParseInt(t[f], 10, 64); return v }
	s := Stats{Queue: queue, Paused: paused.Val() == 1,
		Scheduled: sched.Val(), Pending: pend.Val(), Processing: leased.Val() + gap.Val(), Dead: dead.Val(), CompletedHistory: hist.Val(),
		EnqueuedTotal: n("enqueued"), PromotedTotal: n("promoted"), CompletedTotal: n("completed"), FailedTotal: n("failed"),
		RetriedTotal: n("retried"), ReclaimedTotal: n("reclaimed"), DeadTotal: n("dead"),
		CanceledTotal: n("canceled"), RequeuedTotal: n("requeued")}
	if h := head.Val(); len(h) == 1 {
		s.NextRunAt = timeOfScore(h[0].Score)
	}
	if id := oldest.Val(); id != "" {
		runAt, err := c.rdb.HGet(ctx, k.job(id), fRunAt).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Stats{}, fmt.Errorf("queue: stats of %s: %w", queue, wrapRedis(err))
		}
		if t := msTime(runAt); !t.IsZero() {
			s.OldestPendingAge = max(c.clock.Since(t), 0)
		}
	}
	return s, nil
}

// Pause stops queue handing out jobs; it keeps accepting and promoting them.
func (c *Client) Pause(ctx context.Context, queue string) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	return wrapRedis(c.rdb.Set(ctx, k.paused, "1", 0).Err())
}

// Resume undoes Pause.
func (c *Client) Resume(ctx context.Context, queue string) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	return wrapRedis(c.rdb.Del(ctx, k.paused).Err())
}
