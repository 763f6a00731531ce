package queue

import (
	"context"
	"fmt"
	"github.com/chronoq/chronoq/internal/store"
	"time"
)

// DefaultIdleQueueTTL is how long an empty queue that nothing is enqueued
// into is kept before the reclaim sweep forgets it (Config.IdleQueueTTL).
const DefaultIdleQueueTTL = 7 * 24 * time.Hour

// DeleteQueue deletes queue and every job of it, in every state, in one
// script: reads of the queue and its jobs then answer ErrNoQueue and
// ErrNotFound, and it leaves the list of queues. While a job of it is
// processing it answers ErrQueueBusy and deletes nothing, unless force
// (then that worker's later complete, fail or heartbeat answers
// ErrNotFound). A queue never used, or deleted already, is ErrNoQueue.
// An enqueue into the queue afterwards makes it anew.
func (c *Client) DeleteQueue(ctx context.Context, queue string, force bool) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	res, err := call(ctx, c, store.Delete, k, &store.DeleteArgs{Force: force})
	if err != nil {
		return fmt.Errorf("queue: delete %s: %w", queue, err)
	}
	switch res.Code {
	case 1:
		return c.forget(ctx, queue)
	case 0:
		return fmt.Errorf("%w: %s (delete with force to delete them too)", ErrQueueBusy, queue)
	}
	// No keys: the name is left as it is. Taking it out here could race a
	// first enqueue between its register and its create.
	return fmt.Errorf("%w: %s", ErrNoQueue, queue)
}

// forgetIdle deletes queue when it holds no job and nothing was enqueued
// into it for Config.IdleQueueTTL, and answers whether it did.
func (c *Client) forgetIdle(ctx context.Context, queue string) (bool, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return false, err
	}
	res, err := call(ctx, c, store.Delete, k, &store.DeleteArgs{IdleMs: c.cfg.IdleQueueTTL.Milliseconds()})
	if err != nil {
		return false, fmt.Errorf("queue: forget idle %s: %w", queue, err)
	}
	if res.Code != 1 {
		return false, nil
	}
	return true, c.forget(ctx, queue)
}

// forget takes a deleted queue's name out of the set of queues. The name
// and the keys are in different slots, so this is a second step: should
// an enqueue have made the queue again meanwhile, its name goes back (and
// the enqueue puts it back too once its job is in: either sees the other).
//
// Its entries in the attention indexes go too; should the queue be back,
// they are put back at now, for a pass to set right.
func (c *Client) forget(ctx context.Context, queue string) error {
	c.known.Delete(queue)
	c.labelSets.Delete(queue)
	if err := c.unmark(ctx, queue); err != nil {
		return err
	}
	qk := store.QueuesKey(c.ns)
	if err := c.rdb.SRem(ctx, qk, queue).Err(); err != nil {
		return wrapRedis(err)
	}
	n, err := c.rdb.Exists(ctx, store.QueueKeys(c.ns, queue).Meta).Result()
	if err != nil {
		return wrapRedis(err)
	}
	if n == 1 {
		now := c.redisNow().UnixMilli()
		c.mark(ctx, queue, marked{DueMs: now, SweepMs: now})
		return wrapRedis(c.rdb.SAdd(ctx, qk, queue).Err())
	}
	return nil
}
