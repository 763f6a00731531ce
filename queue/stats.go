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

// oldestProbe is how many ids Stats looks at from the right end of the
// pending list for the oldest pending job.
const oldestProbe = 10

// Stats reads the depths and totals of queue in one round trip (and a
// second for the oldest pending job).
func (c *Client) Stats(ctx context.Context, queue string) (Stats, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return Stats{}, err
	}
	pipe := c.rdb.Pipeline()
	sched, pend, leased := pipe.ZCard(ctx, k.sched), pipe.LLen(ctx, k.pending), pipe.ZCard(ctx, k.leases)
	dead, hist := pipe.ZCard(ctx, k.dead), pipe.ZCard(ctx, k.done)
	meta := pipe.HGetAll(ctx, k.meta)
	// The oldest pending job: the first pending one from the right end, past
	// stale ids (of jobs canceled or rescheduled while pending).
	oldest, head := pipe.LRange(ctx, k.pending, -(oldestProbe+1), -2), pipe.ZRangeWithScores(ctx, k.sched, 0, 0)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, fmt.Errorf("queue: stats of %s: %w", queue, wrapRedis(err))
	}
	t := meta.Val()
	n := func(f string) int64 { v, _ := strconv.ParseInt(t[f], 10, 64); return v }
	less := func(v int64) int64 { return max(v-sentinels, 0) } // each key's sentinel
	s := Stats{Queue: queue, Paused: t[metaPaused] == "1",
		Scheduled: less(sched.Val()), Pending: max(less(pend.Val())-n(metaStale), 0), Processing: less(leased.Val()),
		Dead: less(dead.Val()), CompletedHistory: less(hist.Val()),
		EnqueuedTotal: n("enqueued"), PromotedTotal: n("promoted"), CompletedTotal: n("completed"), FailedTotal: n("failed"),
		RetriedTotal: n("retried"), ReclaimedTotal: n("reclaimed"), DeadTotal: n("dead"),
		CanceledTotal: n("canceled"), RequeuedTotal: n("requeued")}
	if h := head.Val(); len(h) == 1 && h[0].Member != sentinel {
		s.NextRunAt = timeOfScore(h[0].Score)
	}
	if ids := oldest.Val(); len(ids) > 0 {
		recs, err := c.rdb.HMGet(ctx, k.jobs, ids...).Result()
		if err != nil {
			return Stats{}, fmt.Errorf("queue: stats of %s: %w", queue, wrapRedis(err))
		}
		for i := len(recs) - 1; i >= 0; i-- {
			rec, _ := recs[i].(string)
			if j, err := jobFromRecord(queue, ids[i], rec, "", ""); err == nil && j.Status == StatusPending {
				s.OldestPendingAge = max(c.clock.Since(c.localOf(j.RunAt)), 0)
				break
			}
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
	if err := c.register(ctx, queue); err != nil {
		return err
	}
	return wrapRedis(c.rdb.HSet(ctx, k.meta, metaPaused, "1").Err())
}

// Resume undoes Pause.
func (c *Client) Resume(ctx context.Context, queue string) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	return wrapRedis(c.rdb.HDel(ctx, k.meta, metaPaused).Err())
}
