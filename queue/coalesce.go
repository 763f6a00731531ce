package queue

import (
	"context"
	"errors"

	"github.com/chronoq/chronoq/internal/batch"
)

// Coalescing single enqueues.
//
// Most producers send one job at a time, and a script call has a fixed
// cost (the round trip, reading the request and writing the reply, the
// script's own set-up) several times what one more job in the same call
// costs. So concurrent Enqueue calls into one queue share script calls,
// through package batch: while one enqueue of a queue is in flight, the
// calls that arrive wait, and then go together in one enqueue.lua call
// (group commit). Nothing waits on purpose: a call that finds its queue
// idle goes at once.
//
// Each call still gets exactly its own answer. A job is validated
// (prepare) before it joins a batch, so a batch cannot be refused for one
// of its jobs; an error of the call as a whole (Redis away) is every
// job's, as it would have been alone. One batch is one script call on one
// queue: written whole or not at all. The jobs of a batch keep the order
// in which their calls arrived. A caller whose ctx ends while its job
// waits takes it out (never sent); once sent, it answers ctx's error
// while the batch goes on, as a single call cut short would.

// newEnqueues answers the batcher of c's single enqueues, by queue.
func (c *Client) newEnqueues() *batch.Batcher[prepared, Enqueued] {
	return batch.New(c.sendEnqueues, batch.Config[prepared]{Size: func(p prepared) int { return len(p.job.Payload) }})
}

// enqueueOne enqueues the validated job p, in a script call with the
// enqueues of its queue that arrive meanwhile.
func (c *Client) enqueueOne(ctx context.Context, p prepared) (Enqueued, error) {
	if err := c.register(ctx, p.job.Queue); err != nil {
		return Enqueued{}, err
	}
	return c.enqueues.Do(ctx, p.job.Queue, p)
}

// sendEnqueues enqueues ps, jobs of queue q, in one script call and
// answers each.
func (c *Client) sendEnqueues(ctx context.Context, q string, ps []prepared) ([]Enqueued, []error, error) {
	out := make([]Enqueued, len(ps))
	err := c.enqueueQueue(ctx, q, ps, indexes(len(ps)), out)
	if !errors.Is(err, ErrTooManyLabelSets) || len(ps) == 1 {
		return out, nil, err
	}
	// One job's new label set passes the cap: the others go alone, each
	// with its own answer (a batch is never refused for one job).
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = c.enqueueQueue(ctx, q, []prepared{p}, []int{0}, out[i:i+1])
	}
	return out, errs, nil
}
