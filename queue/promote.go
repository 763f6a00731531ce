package queue

import (
	"context"
	"fmt"
	"time"
)

// Promote implements delayed.Source: it moves up to one batch (500) of the
// jobs of queue due at now into pending, earliest first, and answers how
// many moved and when the next scheduled job is due (zero when none is).
// A job is due when now has reached its run-at millisecond, never before.
func (c *Client) Promote(ctx context.Context, queue string, now time.Time) (int, time.Time, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return 0, time.Time{}, err
	}
	v, err := c.run(ctx, promoteScript, k, now.UnixMilli(), []string{k.scheduled, k.pending, k.stats}, promoteBatch, cutoffOf(now))
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("queue: promote %s: %w", queue, err)
	}
	res, _ := v.([]any)
	if len(res) != 2 {
		return 0, time.Time{}, fmt.Errorf("queue: promote %s: unexpected reply %v", queue, v)
	}
	moved, _ := res[0].(int64)
	next, err := nextOfReply(res[1])
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("queue: promote %s: %w", queue, err)
	}
	return int(moved), next, nil
}
