package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/internal/tracing"
	"go.opentelemetry.io/otel/trace"
)

// Promote moves up to one batch (500) of the jobs of queue that are due by
// Redis's clock into pending, earliest first, and answers how many moved
// and when the next scheduled job is due (zero when none is), on this
// client's clock (see Client.localOf). When that job's due time was handed
// to a worker's claim to wake at (ClaimNext) and the hand-out still holds
// (until 2 ms after the due time), it moves nothing, leaving the jobs to
// that claim, which promotes and takes them in one call, and answers when
// the hand-out lapses: the promoter passes again then. A job is due when Redis's clock has
// reached its due time, to the microsecond, never before. Unless more is
// due already, it parks the queue in the due index at its next job's time
// (see attention.go), but only when that job is not due within horizon
// (or nothing is scheduled): a promoter that sleeps until a job due sooner
// makes no index write for it (horizon 0: always). It is delayed.Source's
// Promote.
func (c *Client) Promote(ctx context.Context, queue string, horizon time.Duration) (int, time.Time, error) {
	if t, on := tracing.Tracer(); on {
		start := time.Now()
		moved, next, err := c.promote(ctx, queue, horizon)
		if moved > 0 || err != nil {
			tracing.StartedAt(ctx, t, start, queue, "promote", "", trace.SpanKindClient, nil, err, tracing.AttrBatchCount.Int(moved))
		}
		return moved, next, err
	}
	return c.promote(ctx, queue, horizon)
}

// promote is Promote without its span.
func (c *Client) promote(ctx context.Context, queue string, horizon time.Duration) (int, time.Time, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return 0, time.Time{}, err
	}
	t0 := c.clock.Now()
	res, err := call(ctx, c, store.Promote, k, &store.PromoteArgs{Limit: promoteBatch})
	t1 := c.clock.Now()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("queue: promote %s: %w", queue, err)
	}
	moved, nowUs := res.Moved, res.NowUs
	next, err := nextOfReply(res.Next)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("queue: promote %s: %w", queue, err)
	}
	c.eng.Clock().Observe(nowUs, t0, t1)
	if next.IsZero() || next.Sub(time.UnixMicro(nowUs)) > horizon {
		a := store.AttentionKeys(c.ns)
		var at int64
		if !next.IsZero() {
			at = next.UnixMilli() // floored: never later than the job
		}
		if err := c.park(ctx, a.Due, a.DueSeq, queue, at, nowUs); err != nil {
			return int(moved), c.localOf(next), err
		}
	}
	return int(moved), c.localOf(next), nil
}
