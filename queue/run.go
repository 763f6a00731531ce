package queue

import (
	"context"

	"github.com/chronoq/chronoq/internal/store"
)

// common are the common arguments of a script on queue k, with the label
// sets lsets (see store.Common).
func (c *Client) common(k store.Keys, lsets string) store.Common {
	return store.Common{OffsetUs: c.timeOffset(), Pubcmd: c.pubcmd, Channel: k.Events, Lsets: lsets}
}

// call runs op on the keys of queue k with p, applies the attention marks
// its reply carries (see attention.go) and reads the reply without them.
// A script that takes label sets is given the queue's (see callSets).
func call[P, R any](ctx context.Context, c *Client, op *store.Op[P, R], k store.Keys, p *P) (R, error) {
	if op.Sets && op.Name() != "enqueue" {
		return callSets(ctx, c, op, k, p, nil, nil)
	}
	return callKeys(ctx, c, op, k, nil, "", p)
}

// callKeys is call with the keys of label sets after the script's own
// (extra) and their ids (lsets).
func callKeys[P, R any](ctx context.Context, c *Client, op *store.Op[P, R], k store.Keys, extra []string, lsets string, p *P) (R, error) {
	var zero R
	v, err := c.eng.Run(ctx, op.Script, op.Keys(k, extra), op.Argv(c.common(k, lsets), p))
	if err != nil {
		c.uncertain(k.Name, err)
		return zero, err
	}
	v, m, err := store.UnwrapMarks(op.Name(), v)
	if err != nil {
		return zero, err
	}
	c.mark(ctx, k.Name, m)
	return op.Reply(v)
}

// callSets runs op with every label set of k as this client knows them;
// eligible, when not nil, is the argument of p that names the sets a
// claimer with labels may take from, set from them. When the script
// answers that the queue's sets are others (it wrote nothing), it reads
// them again and runs it again.
func callSets[P, R any](ctx context.Context, c *Client, op *store.Op[P, R], k store.Keys, p *P, labels []string, eligible *string) (R, error) {
	for attempt := 0; ; attempt++ {
		v, err := c.setsOf(ctx, k)
		if err != nil {
			var zero R
			return zero, err
		}
		if eligible != nil {
			*eligible = v.eligibleFor(labels).ids
		}
		res, err := callKeys(ctx, c, op, k, v.keys, v.ids, p)
		if isStaleSets(err) && attempt < maxStaleRetries {
			if _, err := c.refreshSets(ctx, k); err != nil {
				return res, err
			}
			continue
		}
		return res, err
	}
}

// callWF runs op, a script of a workflow's slot, on workflow id.
func callWF[P, R any](ctx context.Context, c *Client, op *store.Op[P, R], id string, p *P) (R, error) {
	v, err := c.eng.Run(ctx, op.Script, op.WFKeys(store.WorkflowKeys(c.ns, id)), op.Argv(store.Common{OffsetUs: c.timeOffset()}, p))
	if err != nil {
		var zero R
		return zero, err
	}
	return op.Reply(v)
}

// wrapRedis wraps an error from Redis as store.WrapRedis does.
func wrapRedis(err error) error { return store.WrapRedis(err) }

// migrating reports whether err is Redis saying the slot is moving.
func migrating(err error) bool { return store.Migrating(err) }

// ErrUnavailable wraps errors from Redis (unreachable, timed out, failing
// over): the operation may be retried.
var ErrUnavailable = store.ErrUnavailable
