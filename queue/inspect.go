package queue

// Inspection: what tools that read Redis directly need (the chaos
// battery's checker, backups, migrations), in this one file. It is stable
// API of this package, with one caveat written on each: the layout it
// reads is this version's and may change with the next, so a tool reads
// the layout through these and never retypes a key or a field.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/internal/store"

	"github.com/redis/go-redis/v9"
)

// Dump is everything Redis holds for one queue, as the chaos battery reads it (plumbing.Client.Dump).
type Dump struct {
	Stats Stats
	// Jobs is every job the queue holds, by id, with its Token.
	Jobs map[string]*Job
	// Expires is when the sweep deletes each job that has ended and is
	// kept for its retention.
	Expires map[string]time.Time
	// Dead, Leased and Scheduled are the ids in the dead set, the leases
	// and the schedule; Pending the ids in the pending lists (the queue's,
	// then each label set's), stale ones (of jobs that left pending by a
	// cancel or a reschedule) included.
	Dead, Leased, Scheduled, Pending []string
	// Tombstones is how many deleted jobs still answer retried calls (see
	// Config.RetryWindow); Claims how many claims keep their retry marker
	// (until one of their jobs is acked).
	Tombstones, Claims int
}

// Dump reads the whole of queue from Redis: every job and every entry of
// its sets and lists. It is O(jobs), for tools and tests that check the
// store (the chaos battery's checker), not for serving requests. It reads
// without a script, so on a queue in use its parts may be of slightly
// different moments.
func (in *inside) Dump(ctx context.Context, queue string) (any, error) {
	return (*Client)(in).dump(ctx, queue)
}

func (c *Client) dump(ctx context.Context, queue string) (*Dump, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	st, err := c.Stats(ctx, queue)
	if err != nil {
		return nil, err
	}
	d := &Dump{Stats: st, Jobs: map[string]*Job{}, Expires: map[string]time.Time{}}
	records, err := c.hashAll(ctx, k.Jobs)
	if err != nil {
		return nil, err
	}
	data, err := c.hashAll(ctx, k.Data)
	if err != nil {
		return nil, err
	}
	claims, err := c.hashAll(ctx, k.Claims)
	if err != nil {
		return nil, err
	}
	d.Claims = len(claims)
	for id, rec := range records {
		if rec != "" && rec[0] == '-' {
			d.Tombstones++
			continue
		}
		j, err := jobFromRecord(queue, id, rec, data[id], data[store.ResultField(id)])
		if err != nil {
			return nil, fmt.Errorf("queue: dump %s: %w", queue, err)
		}
		d.Jobs[id] = j
	}
	pipe := c.rdb.Pipeline()
	dead, leased, sched := pipe.ZRange(ctx, k.Dead, 0, -1), pipe.ZRange(ctx, k.Leases, 0, -1), pipe.ZRange(ctx, k.Sched, 0, -1)
	pend, exp := pipe.LRange(ctx, k.Pending, 0, -1), pipe.ZRangeWithScores(ctx, k.Expiry, 0, -1)
	sets, err := c.refreshSets(ctx, k)
	if err != nil {
		return nil, err
	}
	setPend := make([]*redis.StringSliceCmd, len(sets.order))
	for i, id := range sets.order {
		setPend[i] = pipe.LRange(ctx, k.SetListKey(id), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: dump %s: %w", queue, wrapRedis(err))
	}
	drop := func(ids []string) []string {
		out := ids[:0]
		for _, id := range ids {
			if id != store.Sentinel {
				out = append(out, id)
			}
		}
		return out
	}
	d.Dead, d.Leased, d.Scheduled, d.Pending = drop(dead.Val()), drop(leased.Val()), drop(sched.Val()), drop(pend.Val())
	for _, p := range setPend {
		d.Pending = append(d.Pending, drop(p.Val())...)
	}
	for _, z := range exp.Val() {
		id, _ := z.Member.(string)
		if _, ok := d.Jobs[id]; ok {
			d.Expires[id] = time.UnixMilli(int64(z.Score)).UTC()
		}
	}
	return d, nil
}

// hashAll reads a hash of the queue by HSCAN, its sentinel left out.
func (c *Client) hashAll(ctx context.Context, key string) (map[string]string, error) {
	out := map[string]string{}
	iter := c.rdb.HScan(ctx, key, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		f := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		if f != store.Sentinel {
			out[f] = iter.Val()
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("queue: reading %s: %w", key, wrapRedis(err))
	}
	return out, nil
}

// decodeRecord decodes a job's record, the value of its field in the
// queue's jobs hash (see internal/store/layout.go), with its payload and result from the
// data hash, for tools that read Redis directly (the chaos battery's
// checker does). The layout is this version's and may change with the
// next: this is the one place that reads it. A tombstone or an empty record
// is ErrNotFound. Unlike Get, it sets Token: the job's last claim token.
func decodeRecord(queue, id, record, payload, result string) (*Job, error) {
	j, err := jobFromRecord(queue, id, record, payload, result)
	if err != nil {
		return nil, err
	}
	return j, nil
}
