package queue

import (
	"context"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/store"
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
// second for the oldest pending job). Pending counts the jobs of every
// label set's list too.
func (c *Client) Stats(ctx context.Context, queue string) (Stats, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return Stats{}, err
	}
	v, err := c.setsOf(ctx, k)
	if err != nil {
		return Stats{}, err
	}
	for attempt := 0; ; attempt++ {
		s, current, err := c.stats(ctx, k, v)
		if err != nil || current || attempt >= maxStaleRetries {
			return s, err
		}
		if v, err = c.refreshSets(ctx, k); err != nil {
			return Stats{}, err
		}
	}
}

// stats is Stats with the label sets of v, and whether they are the
// queue's.
func (c *Client) stats(ctx context.Context, k store.Keys, v *setView) (Stats, bool, error) {
	queue := k.Name
	pipe := c.rdb.Pipeline()
	sched, pend, leased := pipe.ZCard(ctx, k.Sched), pipe.LLen(ctx, k.Pending), pipe.ZCard(ctx, k.Leases)
	dead, hist := pipe.ZCard(ctx, k.Dead), pipe.ZCard(ctx, k.Done)
	flow := pipe.ZCard(ctx, k.FPend) // the pending jobs of flow keys (no stale ids there)
	meta := pipe.HGetAll(ctx, k.Meta)
	// The oldest pending job: the first pending one from the right end, past
	// stale ids (of jobs canceled or rescheduled while pending), of each list.
	oldest, head := pipe.LRange(ctx, k.Pending, -(oldestProbe+1), -2), pipe.ZRangeWithScores(ctx, k.Sched, 0, 0)
	lens := make([]*redis.IntCmd, len(v.order))
	heads := make([]*redis.StringSliceCmd, len(v.order))
	for i, id := range v.order {
		lens[i], heads[i] = pipe.LLen(ctx, k.SetListKey(id)), pipe.LRange(ctx, k.SetListKey(id), -(oldestProbe+1), -2)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, false, fmt.Errorf("queue: stats of %s: %w", queue, wrapRedis(err))
	}
	t := meta.Val()
	if t[store.MetaLsets] != v.ids {
		return Stats{}, false, nil
	}
	pending := max(pend.Val()-store.Sentinels, 0)
	probes := [][]string{oldest.Val()}
	for i := range v.order {
		pending += max(lens[i].Val()-store.Sentinels, 0)
		probes = append(probes, heads[i].Val())
	}
	n := func(f string) int64 { v, _ := strconv.ParseInt(t[f], 10, 64); return v }
	less := func(v int64) int64 { return max(v-store.Sentinels, 0) } // each key's sentinel
	s := Stats{Queue: queue, Paused: t[store.MetaPaused] == "1",
		Scheduled: less(sched.Val()), Pending: max(pending-n(store.MetaStale), 0) + less(flow.Val()), Processing: less(leased.Val()),
		Dead: less(dead.Val()), CompletedHistory: less(hist.Val()),
		EnqueuedTotal: n(store.MetaEnqueued), PromotedTotal: n(store.MetaPromoted), CompletedTotal: n(store.MetaCompleted), FailedTotal: n(store.MetaFailed),
		RetriedTotal: n(store.MetaRetried), ReclaimedTotal: n(store.MetaReclaimed), DeadTotal: n(store.MetaDead),
		CanceledTotal: n(store.MetaCanceled), RequeuedTotal: n(store.MetaRequeued)}
	if h := head.Val(); len(h) == 1 && h[0].Member != store.Sentinel {
		s.NextRunAt = timeOfScore(h[0].Score)
	}
	for _, ids := range probes {
		if len(ids) == 0 {
			continue
		}
		recs, err := c.rdb.HMGet(ctx, k.Jobs, ids...).Result()
		if err != nil {
			return Stats{}, false, fmt.Errorf("queue: stats of %s: %w", queue, wrapRedis(err))
		}
		for i := len(recs) - 1; i >= 0; i-- {
			rec, _ := recs[i].(string)
			if j, err := jobFromRecord(queue, ids[i], rec, "", ""); err == nil && j.Status == StatusPending {
				s.OldestPendingAge = max(s.OldestPendingAge, c.clock.Since(c.localOf(j.RunAt)), 0)
				break
			}
		}
	}
	return s, true, nil
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
	return wrapRedis(c.rdb.HSet(ctx, k.Meta, store.MetaPaused, "1").Err())
}

// Resume undoes Pause.
func (c *Client) Resume(ctx context.Context, queue string) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	return wrapRedis(c.rdb.HDel(ctx, k.Meta, store.MetaPaused).Err())
}
