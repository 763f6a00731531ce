package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/chronoq/chronoq/internal/store"

	"github.com/redis/go-redis/v9"
)

// Limits are a queue's rate and concurrency limits, kept in its meta hash
// (its slot: every instance reads the same) and enforced inside the claim
// script, so they hold for every consumer at once: push dispatchers,
// workers of package worker, HTTP claims. A claim takes no more jobs than
// they allow; a claim they hold back waits (Claim with a Wait, the
// worker's watchers) until the bucket's next token, or, when the queue is
// at MaxInFlight, on its wake streams until a lease ends (the scripts
// that end one write the queue's stream and each label set's that has
// jobs pending). The zero Limits is none.
type Limits struct {
	// Rate is the most jobs claimed a second, on average: a token bucket,
	// refilled by Redis's clock, of which each claimed job takes a token.
	// 0: no rate limit. At most MaxRate.
	Rate float64
	// Burst is the bucket's size: the most jobs claimed at once after a
	// quiet spell. Defaults to a tenth of a second's worth, at least 1.
	Burst int
	// MaxInFlight is the most jobs of the queue processing at once (leased
	// by any consumer). 0: no limit.
	MaxInFlight int
}

// Bounds of Limits.
const (
	MaxRate        = 1e6
	MaxLimitBurst  = 1_000_000
	MaxLimitFlight = 1_000_000
)

// validate checks l and fills its defaults.
func (l *Limits) validate() error {
	switch {
	case math.IsNaN(l.Rate) || l.Rate < 0 || l.Rate > MaxRate:
		return invalid("rate", "must be in [0, %g] jobs a second, got %g", float64(MaxRate), l.Rate)
	case l.Burst < 0 || l.Burst > MaxLimitBurst:
		return invalid("burst", "must be in [0, %d], got %d", MaxLimitBurst, l.Burst)
	case l.MaxInFlight < 0 || l.MaxInFlight > MaxLimitFlight:
		return invalid("max_in_flight", "must be in [0, %d], got %d", MaxLimitFlight, l.MaxInFlight)
	case l.Burst > 0 && l.Rate == 0:
		return invalid("burst", "a burst needs a rate")
	}
	if l.Rate > 0 && l.Burst == 0 {
		l.Burst = max(int(math.Ceil(l.Rate/10)), 1)
	}
	return nil
}

// SetLimits makes l queue's limits (the zero Limits removes them),
// creating the queue when it does not exist, and answers them as kept,
// their defaults filled in. Limits out of range are a *FieldError
// naming the field. The token bucket starts full.
func (c *Client) SetLimits(ctx context.Context, queue string, l Limits) (Limits, error) {
	if err := l.validate(); err != nil {
		return Limits{}, err
	}
	set := map[string]string{store.MetaLimitRate: "", store.MetaLimitBurst: "", store.MetaLimitFlight: "", store.MetaTBTokens: "", store.MetaTBAt: ""}
	if l.Rate > 0 {
		set[store.MetaLimitRate] = strconv.FormatFloat(l.Rate, 'f', -1, 64) // a decimal: the embedded Redis's Lua reads "1e-05" as nil
		set[store.MetaLimitBurst] = strconv.Itoa(l.Burst)
	}
	if l.MaxInFlight > 0 {
		set[store.MetaLimitFlight] = strconv.Itoa(l.MaxInFlight)
	}
	if err := c.writeSettings(ctx, queue, set); err != nil {
		return Limits{}, err
	}
	return l, nil
}

// ClearLimits takes queue's limits away. Unlike SetLimits it makes no
// queue: one never used (or deleted) is ErrNoQueue.
func (c *Client) ClearLimits(ctx context.Context, queue string) error {
	if err := c.mustExist(ctx, queue); err != nil {
		return err
	}
	_, err := c.SetLimits(ctx, queue, Limits{})
	return err
}

// mustExist answers ErrNoQueue for a queue never used (or deleted): the
// Clear* calls, which make no queue.
func (c *Client) mustExist(ctx context.Context, queue string) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	n, err := c.rdb.Exists(ctx, k.Meta).Result()
	if err != nil {
		return wrapRedis(err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrNoQueue, queue)
	}
	return nil
}

// Limits reads queue's limits (none: the zero Limits).
func (c *Client) Limits(ctx context.Context, queue string) (Limits, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return Limits{}, err
	}
	vals, err := c.rdb.HMGet(ctx, k.Meta, store.MetaLimitRate, store.MetaLimitBurst, store.MetaLimitFlight).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Limits{}, fmt.Errorf("queue: limits of %s: %w", queue, wrapRedis(err))
	}
	var l Limits
	if s, ok := vals[0].(string); ok {
		l.Rate, _ = strconv.ParseFloat(s, 64)
	}
	if s, ok := vals[1].(string); ok {
		l.Burst, _ = strconv.Atoi(s)
	}
	if s, ok := vals[2].(string); ok {
		l.MaxInFlight, _ = strconv.Atoi(s)
	}
	return l, nil
}

// LimitWait is the time this client's claims and waits have spent held
// back by queues' limits (see Limits), over its life.
func (in *inside) LimitWait() time.Duration { return time.Duration(in.limitWaitNs.Load()) }

// limitWaited adds d to LimitWait.
func (c *Client) limitWaited(d time.Duration) {
	if d > 0 {
		c.limitWaitNs.Add(int64(d))
	}
}

// sleepLimited waits for a queue's limits: until at on the client's
// clock (the next token), but no longer than left in
// real time (a claim's or a wait's deadline is real time, as Redis
// waits), or until ctx ends. It adds the time waited to LimitWait.
func (c *Client) sleepLimited(ctx context.Context, at time.Time, left time.Duration) {
	d := max(at.Sub(c.clock.Now()), time.Millisecond)
	t0 := time.Now()
	t := c.clock.NewTimer(d)
	defer t.Stop()
	deadline := time.NewTimer(max(left, 0))
	defer deadline.Stop()
	select {
	case <-ctx.Done():
	case <-t.Chan():
	case <-deadline.C:
	}
	c.limitWaited(time.Since(t0))
}

// parseLimitAt reads the "at" of a held-back answer: Unix ms on Redis's
// clock, "" for none.
func (c *Client) parseLimitAt(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return c.localOf(time.UnixMilli(ms))
}
