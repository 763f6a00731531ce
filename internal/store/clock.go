package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// Clock is Redis's clock as one client sees it: the one estimate of how
// far Redis's clock is ahead of the instance's, shared by everything built
// on the client (queue, cron, registry, dispatch, the offset gauge). Every
// decision about time is made by Redis's clock inside the scripts (they
// read TIME); the instance's clock only says how long to sleep, until a
// Redis-time instant less the offset.
//
// The estimate is fed by every script that answers Redis's time (claims,
// promoter passes, cron's due reads) and by Measure (one TIME): Redis's
// time less the middle of the round trip, within half the round trip.
//
// A test's fake clock can drive Redis's clock (follow, set through
// queue.Config.FollowClock): the scripts then add an offset to TIME (see
// OffsetUs) so that Redis's clock reads as the fake clock, and the
// estimate is 0.
type Clock struct {
	local  clockwork.Clock
	follow bool

	ahead atomic.Int64 // ns Redis's clock is ahead of local
	bound atomic.Int64 // ns: the estimate's error (half its round trip)
	at    atomic.Int64 // Unix ns on local when it was measured; 0: not yet
}

// NewClock answers the Redis clock of a client whose clock is local;
// follow makes Redis's clock follow local (a test's fake clock).
func NewClock(local clockwork.Clock, follow bool) *Clock {
	return &Clock{local: local, follow: follow}
}

// Local is the instance's clock.
func (c *Clock) Local() clockwork.Clock { return c.local }

// Follows reports whether Redis's clock follows the local clock.
func (c *Clock) Follows() bool { return c.follow }

// TimeMode is how Redis's clock follows a test's clock (see OffsetUs).
type TimeMode int

const (
	// Running means Redis's clock reads as the test's clock plus the real time
	// gone by since that clock was first used by a client. Time moves
	// when the test advances it, and otherwise runs on as Redis's does,
	// never backwards, the same for every client that shares the clock.
	// Queues use it: a job due now is due by the time it is claimed.
	Running TimeMode = iota
	// Exact means Redis's clock reads as the test's clock (plus the
	// microseconds a command takes to reach Redis, on one host). Time
	// moves only when the test advances it, so a test can say which cron
	// ticks have come, or which workers have lapsed, to the instant.
	Exact
)

// anchors holds, for each followed clock, the real time it was first used
// (see Running).
var anchors sync.Map

// OffsetUs is what a script adds to Redis's TIME, in µs: 0, except when
// Redis's clock follows the local one (see TimeMode).
func (c *Clock) OffsetUs(mode TimeMode) int64 {
	if !c.follow {
		return 0
	}
	now := c.local.Now()
	if mode == Exact {
		return now.UnixMicro() - time.Now().UnixMicro()
	}
	anchor, _ := anchors.LoadOrStore(c.local, time.Now())
	return now.Sub(anchor.(time.Time)).Microseconds()
}

// At is Redis's now as a script answered it (Unix µs, the offset
// included). When Redis's clock follows the local one it is never later
// than the local now: the microseconds a command takes to reach Redis are
// not the test's.
func (c *Clock) At(redisUs int64) time.Time {
	t := time.UnixMicro(redisUs).UTC()
	if c.follow {
		if f := c.local.Now().UTC(); f.Before(t) {
			return f
		}
	}
	return t
}

// Observe takes Redis's now (Unix µs, as a script answered it) seen
// between t0 and t1 on the local clock, and keeps the estimate. A sample
// from a round trip more than twice as long as the estimate's is passed
// over while the estimate is under clockFresh old: a slow reply (a pause,
// a busy server) would blur it. Nothing is kept when Redis's clock
// follows the local one.
func (c *Clock) Observe(redisUs int64, t0, t1 time.Time) {
	if redisUs <= 0 || c.follow {
		return
	}
	bound := t1.Sub(t0) / 2
	if at := c.at.Load(); at != 0 && t1.Sub(time.Unix(0, at)) < clockFresh &&
		bound > 2*time.Duration(c.bound.Load()) {
		return
	}
	mid := t0.Add(bound)
	c.ahead.Store(int64(time.UnixMicro(redisUs).Sub(mid)))
	c.bound.Store(int64(bound))
	c.at.Store(t1.UnixNano())
}

// clockFresh is how long a clock estimate holds against samples from
// slower round trips.
const clockFresh = 10 * time.Second

// Estimate is an estimate of Redis's clock against the instance's.
type Estimate struct {
	// Offset is how far Redis's clock is ahead of the instance's
	// (negative: behind).
	Offset time.Duration
	// Bound is the estimate's error: the truth is within Offset ± Bound
	// (half the round trip it was measured over).
	Bound time.Duration
	// At is when it was measured, on the instance's clock; zero before
	// the first measurement (then Offset is 0).
	At time.Time
}

// Estimate is the current estimate. When Redis's clock follows the local
// one the two are one: the offset is 0, measured now.
func (c *Clock) Estimate() Estimate {
	if c.follow {
		return Estimate{At: c.local.Now()}
	}
	at := c.at.Load()
	if at == 0 {
		return Estimate{}
	}
	return Estimate{Offset: time.Duration(c.ahead.Load()), Bound: time.Duration(c.bound.Load()), At: time.Unix(0, at)}
}

// Offset is Estimate().Offset: what the offset gauge reads.
func (c *Clock) Offset() time.Duration { return c.Estimate().Offset }

// Measure measures the distance to Redis's clock now, with one TIME on
// rdb, and answers the estimate. On a cluster it is one node's clock; a
// queue's time is its master's. The error is Redis's, unwrapped.
func (c *Clock) Measure(ctx context.Context, rdb redis.UniversalClient) (Estimate, error) {
	t0 := c.local.Now()
	tm, err := rdb.Time(ctx).Result()
	t1 := c.local.Now()
	if err != nil {
		return c.Estimate(), err
	}
	c.Observe(tm.UnixMicro(), t0, t1)
	return c.Estimate(), nil
}

// Now estimates Redis's now.
func (c *Clock) Now() time.Time { return c.local.Now().Add(c.Offset()) }

// RedisOf is t, an instant of the local clock, on Redis's clock.
func (c *Clock) RedisOf(t time.Time) time.Time { return t.Add(c.Offset()) }

// LocalOf is t, an instant of Redis's clock, on the local clock: when to
// wake for it. The zero time stays zero.
func (c *Clock) LocalOf(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-c.Offset())
}
