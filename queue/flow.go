package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/redis/go-redis/v9"
)

// Flow control: limits and fairness per flow key inside a queue.
//
// A job may carry a flow key (NewJob.FlowKey): a tenant, an account, a
// user, whatever its jobs must be limited and shared by. The queue's
// FlowLimits hold for each key on its own (at most MaxInFlight of a key's
// jobs processing, at most Rate a second), FlowOverrides give particular
// keys their own, and claims take keys in turns: a key with 100,000
// pending jobs delays a key with one by at most one turn of the keys with
// work, not by its backlog. All of it lives in the queue's slot (the
// KeyF* keys of internal/store) and is decided inside the claim script by
// Redis's clock, so it holds for every consumer at once (workers, HTTP
// claims, push dispatch, workflows) and across instances. Jobs without a
// flow key take their turn with the keys by age.

// FlowStrategy is what happens to a job of a flow key at its MaxInFlight.
type FlowStrategy string

const (
	// FlowQueue is the default: the job waits its turn.
	FlowQueue FlowStrategy = "queue"
	// FlowCancelNewest cancels a new job of a key that has MaxInFlight
	// jobs processing or pending already, at once (its status
	// "canceled", its LastError saying why), so at most MaxInFlight of a
	// key's jobs are ever in line.
	FlowCancelNewest FlowStrategy = "cancel_newest"
	// FlowCancelInProgress makes a new job of a key at MaxInFlight ask the
	// key's oldest processing job to cancel (its worker sees
	// cancel_requested at its next heartbeat) and runs when that one ends.
	FlowCancelInProgress FlowStrategy = "cancel_in_progress"
)

// FlowLimits are a queue's limits for each flow key: every key gets
// them, unless a FlowOverride gives it its own. They hold together with
// the queue's own Limits. The zero FlowLimits is none (keys still take
// turns).
type FlowLimits struct {
	// MaxInFlight is the most jobs of one key processing at once (a
	// crashed worker's job counts until its lease lapses). 0: no limit.
	MaxInFlight int `json:"max_in_flight"`
	// Rate is the most jobs of one key claimed a second, on average: a
	// token bucket per key, refilled by Redis's clock. 0: no limit.
	Rate float64 `json:"rate"`
	// Burst is a key's bucket size; defaults to a tenth of a second's
	// worth, at least 1.
	Burst int `json:"burst"`
	// Strategy is what happens to a new job of a key at MaxInFlight;
	// "" is FlowQueue.
	Strategy FlowStrategy `json:"strategy"`
}

// FlowOverride gives one flow key limits of its own: each field not 0
// replaces the queue's FlowLimits' for that key. Weight (1 to
// MaxFlowWeight, 0 is 1) gives the key that many turns for one of a
// weight-1 key's.
type FlowOverride struct {
	Key         string  `json:"key"`
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	Weight      int     `json:"weight"`
}

// FlowKeyStats are one flow key's jobs now.
type FlowKeyStats struct {
	Key      string `json:"key"`
	Pending  int64  `json:"pending"`
	InFlight int64  `json:"in_flight"`
	// Override is the key's own limits, nil when it has none.
	Override *FlowOverride `json:"override,omitempty"`
}

// Debounce makes a job stand for all the jobs of its flow key enqueued
// while it waits: one enqueued within Period of the last replaces the
// waiting job's payload and moves its due time to Period after itself,
// but never past MaxWait after the first; the enqueue answers the
// waiting job (Enqueued.Debounced). Only a job with a flow key, due now
// (no RunAt or Delay: the debounce decides), may have one.
type Debounce struct {
	// Period is how long a key must be quiet before its job runs:
	// MinDebounce to MaxDelay.
	Period time.Duration
	// MaxWait caps how long after the first job the job can be moved:
	// Period to MaxDelay; 0 is 10 × Period (at most MaxDelay).
	MaxWait time.Duration
}

// Bounds of flow control.
const (
	// MaxFlowKeyBytes is the longest flow key; a key is 1 to this many of
	// [A-Za-z0-9._:/=+@-], as a label.
	MaxFlowKeyBytes = names.MaxLabelBytes
	// MaxFlowOverrides is the most keys of a queue with an override.
	MaxFlowOverrides = 10_000
	// MaxFlowWeight is the largest FlowOverride.Weight.
	MaxFlowWeight = 100
	// MaxFlowKeysPage is the most keys FlowKeys answers at once.
	MaxFlowKeysPage = 1000
	// MinDebounce is the shortest Debounce.Period.
	MinDebounce = time.Millisecond
)

// ValidateFlowKey checks a flow key (a *FieldError naming field flow_key).
func ValidateFlowKey(key string) error {
	if fe := checkFlowKey(key); fe != nil {
		return fe
	}
	return nil
}

// checkFlowKey is ValidateFlowKey, its error typed.
func checkFlowKey(key string) *FieldError {
	if _, err := names.CanonicalLabels([]string{key}, 1); err != nil || key == "" {
		return invalid("flow_key", "want 1 to %d of [A-Za-z0-9._:/=+@-], got %q", MaxFlowKeyBytes, key)
	}
	return nil
}

// validate checks l and fills its defaults: the bounds and defaults of
// the queue's own Limits, and a strategy.
func (l *FlowLimits) validate() error {
	ql := Limits{Rate: l.Rate, Burst: l.Burst, MaxInFlight: l.MaxInFlight}
	if err := ql.validate(); err != nil {
		return err
	}
	l.Burst = ql.Burst
	switch l.Strategy {
	case "":
		l.Strategy = FlowQueue
	case FlowQueue, FlowCancelNewest, FlowCancelInProgress:
	default:
		return invalid("strategy", "want %q, %q or %q, got %q", FlowQueue, FlowCancelNewest, FlowCancelInProgress, l.Strategy)
	}
	return nil
}

// SetFlowLimits makes l the limits of each of queue's flow keys (the zero
// FlowLimits removes them), creating the queue when it does not exist,
// and answers them as kept, defaults filled in. Limits out of range are
// a *FieldError naming the field. A key's bucket keeps its tokens; a
// lower MaxInFlight lets a key's processing jobs finish; a higher one
// reaches a key held at the old one when one of its jobs ends (a
// FlowOverride's change reaches its key at once).
func (c *Client) SetFlowLimits(ctx context.Context, queue string, l FlowLimits) (FlowLimits, error) {
	if err := l.validate(); err != nil {
		return FlowLimits{}, err
	}
	set := map[string]string{store.MetaFlowRate: "", store.MetaFlowBurst: "", store.MetaFlowFlight: "", store.MetaFlowStrategy: ""}
	if l.Rate > 0 {
		set[store.MetaFlowRate] = strconv.FormatFloat(l.Rate, 'f', -1, 64)
		set[store.MetaFlowBurst] = strconv.Itoa(l.Burst)
	}
	if l.MaxInFlight > 0 {
		set[store.MetaFlowFlight] = strconv.Itoa(l.MaxInFlight)
	}
	if l.Strategy != FlowQueue {
		set[store.MetaFlowStrategy] = string(l.Strategy)
	}
	if err := c.writeSettings(ctx, queue, set); err != nil {
		return FlowLimits{}, err
	}
	return l, nil
}

// ClearFlowLimits takes queue's flow limits away (its overrides stay).
// Unlike SetFlowLimits it makes no queue: one never used (or deleted)
// is ErrNoQueue.
func (c *Client) ClearFlowLimits(ctx context.Context, queue string) error {
	if err := c.mustExist(ctx, queue); err != nil {
		return err
	}
	_, err := c.SetFlowLimits(ctx, queue, FlowLimits{})
	return err
}

// FlowLimits reads queue's flow limits (none: the zero FlowLimits, its
// Strategy FlowQueue).
func (c *Client) FlowLimits(ctx context.Context, queue string) (FlowLimits, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return FlowLimits{}, err
	}
	vals, err := c.rdb.HMGet(ctx, k.Meta, store.MetaFlowRate, store.MetaFlowBurst, store.MetaFlowFlight, store.MetaFlowStrategy).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return FlowLimits{}, fmt.Errorf("queue: flow limits of %s: %w", queue, wrapRedis(err))
	}
	l := FlowLimits{Strategy: FlowQueue}
	if s, ok := vals[0].(string); ok {
		l.Rate, _ = strconv.ParseFloat(s, 64)
	}
	if s, ok := vals[1].(string); ok {
		l.Burst, _ = strconv.Atoi(s)
	}
	if s, ok := vals[2].(string); ok {
		l.MaxInFlight, _ = strconv.Atoi(s)
	}
	if s, ok := vals[3].(string); ok && s != "" {
		l.Strategy = FlowStrategy(s)
	}
	return l, nil
}

// validate checks o and fills its defaults (weight 1, the burst of a rate).
func (o *FlowOverride) validate() error {
	if err := ValidateFlowKey(o.Key); err != nil {
		return err
	}
	l := FlowLimits{MaxInFlight: o.MaxInFlight, Rate: o.Rate, Burst: o.Burst}
	if err := l.validate(); err != nil {
		return err
	}
	o.Burst = l.Burst
	if o.Weight < 0 || o.Weight > MaxFlowWeight {
		return invalid("weight", "must be in [0, %d], got %d", MaxFlowWeight, o.Weight)
	}
	o.Weight = max(o.Weight, 1)
	return nil
}

// encode is the override as the fover hash keeps it (see KeyFOver).
func (o FlowOverride) encode() string {
	rate := ""
	if o.Rate > 0 {
		rate = strconv.FormatFloat(o.Rate, 'f', -1, 64)
	}
	return strconv.Itoa(o.MaxInFlight) + "|" + rate + "|" + strconv.Itoa(o.Burst) + "|" + strconv.Itoa(o.Weight)
}

// decodeOverride reads what encode wrote.
func decodeOverride(key, s string) FlowOverride {
	o := FlowOverride{Key: key, Weight: 1}
	p := strings.Split(s, "|")
	if len(p) == 4 {
		o.MaxInFlight, _ = strconv.Atoi(p[0])
		o.Rate, _ = strconv.ParseFloat(p[1], 64)
		o.Burst, _ = strconv.Atoi(p[2])
		o.Weight, _ = strconv.Atoi(p[3])
	}
	return o
}

// SetFlowOverride gives o.Key limits of its own in queue (creating the
// queue when it does not exist), replacing any it had, and answers them
// with their defaults filled in. A queue holds at most MaxFlowOverrides:
// one more is ErrTooManyOverrides.
func (c *Client) SetFlowOverride(ctx context.Context, queue string, o FlowOverride) (FlowOverride, error) {
	if err := o.validate(); err != nil {
		return FlowOverride{}, err
	}
	k, err := c.keysFor(queue)
	if err != nil {
		return FlowOverride{}, err
	}
	if err := c.register(ctx, queue); err != nil {
		return FlowOverride{}, err
	}
	res, err := call(ctx, c, store.FlowOverride, k, &store.FlowOverrideArgs{Key: o.Key, Value: o.encode(), Max: MaxFlowOverrides})
	if err != nil {
		return FlowOverride{}, fmt.Errorf("queue: flow override of %s: %w", queue, err)
	}
	switch res.Code {
	case -1:
		return FlowOverride{}, fmt.Errorf("%w: %s", ErrNoQueue, queue)
	case -2:
		return FlowOverride{}, fmt.Errorf("%w: the cap is %d keys a queue", ErrTooManyOverrides, MaxFlowOverrides)
	}
	return o, nil
}

// DeleteFlowOverride takes key's own limits away (it gets the queue's
// FlowLimits again); a key without an override is not an error.
func (c *Client) DeleteFlowOverride(ctx context.Context, queue, key string) error {
	if err := ValidateFlowKey(key); err != nil {
		return err
	}
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	res, err := call(ctx, c, store.FlowOverride, k, &store.FlowOverrideArgs{Key: key})
	if err != nil {
		return fmt.Errorf("queue: flow override of %s: %w", queue, err)
	}
	if res.Code == -1 {
		return fmt.Errorf("%w: %s", ErrNoQueue, queue)
	}
	return nil
}

// FlowOverrides lists queue's overrides a page at a time, in no
// particular order: from cursor ("" the first page), about limit of them
// (1 to MaxFlowKeysPage), and the cursor of the next page ("" when this
// was the last).
func (c *Client) FlowOverrides(ctx context.Context, queue, cursor string, limit int) ([]FlowOverride, string, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, "", err
	}
	if limit < 1 || limit > MaxFlowKeysPage {
		return nil, "", invalid("limit", "must be in [1, %d], got %d", MaxFlowKeysPage, limit)
	}
	var cur uint64
	if cursor != "" {
		if cur, err = strconv.ParseUint(cursor, 10, 64); err != nil {
			return nil, "", invalid("cursor", "not a cursor this listing gave: %q", cursor)
		}
	}
	kv, next, err := c.rdb.HScan(ctx, k.FOver, cur, "", int64(limit)).Result()
	if err != nil {
		return nil, "", fmt.Errorf("queue: flow overrides of %s: %w", queue, wrapRedis(err))
	}
	out := make([]FlowOverride, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] != store.Sentinel {
			out = append(out, decodeOverride(kv[i], kv[i+1]))
		}
	}
	nextCursor := ""
	if next != 0 {
		nextCursor = strconv.FormatUint(next, 10)
	}
	return out, nextCursor, nil
}

// FlowKeys lists queue's flow keys that have jobs pending or processing,
// the most first (ties by key), from offset, at most limit (1 to
// MaxFlowKeysPage) of them, and how many keys have jobs in all. Keys
// with no jobs are not kept: they cost nothing.
func (c *Client) FlowKeys(ctx context.Context, queue string, offset, limit int) ([]FlowKeyStats, int64, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > MaxFlowKeysPage {
		return nil, 0, invalid("limit", "must be in [1, %d], got %d", MaxFlowKeysPage, limit)
	}
	if offset < 0 {
		return nil, 0, invalid("offset", "must be >= 0, got %d", offset)
	}
	pipe := c.rdb.Pipeline()
	total := pipe.ZCard(ctx, k.FCount)
	// the sentinel's score is +inf: it is the first of the reverse range
	keys := pipe.ZRevRange(ctx, k.FCount, int64(offset)+1, int64(offset+limit))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("queue: flow keys of %s: %w", queue, wrapRedis(err))
	}
	out, err := c.flowStats(ctx, k, keys.Val())
	if err != nil {
		return nil, 0, fmt.Errorf("queue: flow keys of %s: %w", queue, err)
	}
	return out, max(total.Val()-store.Sentinels, 0), nil
}

// FlowKey reads one flow key's counts and override (a key with neither
// jobs nor override answers zeros).
func (c *Client) FlowKey(ctx context.Context, queue, key string) (FlowKeyStats, error) {
	if err := ValidateFlowKey(key); err != nil {
		return FlowKeyStats{}, err
	}
	k, err := c.keysFor(queue)
	if err != nil {
		return FlowKeyStats{}, err
	}
	out, err := c.flowStats(ctx, k, []string{key})
	if err != nil {
		return FlowKeyStats{}, fmt.Errorf("queue: flow key %s of %s: %w", key, queue, err)
	}
	return out[0], nil
}

// flowRange is the lexicographic range of key's members in the fpend
// and frun sets ("<key>\x00<id>").
func flowRange(key string) *redis.ZRangeBy {
	return &redis.ZRangeBy{Min: "[" + key + "\x00", Max: "(" + key + "\x01"}
}

// flowStats reads the counts and overrides of keys in one round trip.
func (c *Client) flowStats(ctx context.Context, k store.Keys, keys []string) ([]FlowKeyStats, error) {
	if len(keys) == 0 {
		return []FlowKeyStats{}, nil
	}
	pipe := c.rdb.Pipeline()
	type cmds struct {
		pending, running *redis.IntCmd
		over             *redis.StringCmd
	}
	cs := make([]cmds, len(keys))
	for i, key := range keys {
		r := flowRange(key)
		cs[i] = cmds{pipe.ZLexCount(ctx, k.FPend, r.Min, r.Max), pipe.ZLexCount(ctx, k.FRun, r.Min, r.Max), pipe.HGet(ctx, k.FOver, key)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapRedis(err)
	}
	out := make([]FlowKeyStats, len(keys))
	for i, key := range keys {
		out[i] = FlowKeyStats{Key: key, Pending: cs[i].pending.Val(), InFlight: cs[i].running.Val()}
		if v, err := cs[i].over.Result(); err == nil {
			o := decodeOverride(key, v)
			out[i].Override = &o
		}
	}
	return out, nil
}

// FlowKeyJobs lists the ids of key's pending and processing jobs, the
// first enqueued first, at most limit (1 to MaxFlowKeysPage) of each.
func (c *Client) FlowKeyJobs(ctx context.Context, queue, key string, limit int) (pending, processing []string, err error) {
	if err := ValidateFlowKey(key); err != nil {
		return nil, nil, err
	}
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, nil, err
	}
	if limit < 1 || limit > MaxFlowKeysPage {
		return nil, nil, invalid("limit", "must be in [1, %d], got %d", MaxFlowKeysPage, limit)
	}
	r := flowRange(key)
	r.Count = int64(limit)
	pipe := c.rdb.Pipeline()
	p := pipe.ZRangeByLex(ctx, k.FPend, r)
	q := pipe.ZRangeByLex(ctx, k.FRun, r)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("queue: jobs of flow key %s: %w", key, wrapRedis(err))
	}
	ids := func(members []string) []string {
		out := make([]string, 0, len(members))
		for _, m := range members {
			out = append(out, m[len(key)+1:])
		}
		return out
	}
	return ids(p.Val()), ids(q.Val()), nil
}
