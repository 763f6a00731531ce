package cron

import (
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/queue"
)

// redisClock is Redis's clock as one cron store sees it. Which tick is
// due, and the move of a cursor past it, are decided by the clock of the
// Redis that holds the due index: cron_due.lua and cron_advance.lua read TIME, and
// Put reads TIME for the instant a change is made. The instance's own
// clock is only for sleeping: each reply that carries Redis's time
// updates the estimate of how far Redis's clock is ahead of the
// instance's (Redis's time less the middle of the round trip, within half
// of it), and the loop sleeps until a Redis-time instant less that
// estimate.
//
// Under a *clockwork.FakeClock (tests), the scripts add to TIME the
// fake clock's distance from the real time at the moment the command is
// sent, so that Redis's clock reads as the fake clock plus the
// microseconds the command took to reach Redis (on one host), and the
// loop plans at the fake clock's instant (see at): time moves only when
// the test advances the clock, and a test can say exactly which ticks
// have come, a tick at the very instant of a cut-off included. (The queue
// client's fake time also runs on in real time from its first use; a
// tick's job, due at the tick, is therefore already due for the queue
// when the cron index finds the tick due.)
type redisClock struct {
	clock  clockwork.Clock
	client *queue.Client
	ahead  atomic.Int64 // ns Redis's clock is ahead of clock
	seen   atomic.Bool  // ahead holds an observation
}

func newRedisClock(clock clockwork.Clock, client *queue.Client) *redisClock {
	return &redisClock{clock: clock, client: client}
}

func (r *redisClock) fake() bool {
	_, ok := r.clock.(*clockwork.FakeClock)
	return ok
}

// offsetArg is what a script adds to Redis's TIME, in µs: 0, except
// under a fake clock (see redisClock).
func (r *redisClock) offsetArg() int64 {
	fc, ok := r.clock.(*clockwork.FakeClock)
	if !ok {
		return 0
	}
	return fc.Now().UnixMicro() - time.Now().UnixMicro()
}

// observe takes Redis's now (Unix µs, the offset included) seen between
// t0 and t1 on the instance's clock.
func (r *redisClock) observe(redisUs int64, t0, t1 time.Time) {
	if redisUs <= 0 || r.fake() {
		return
	}
	mid := t0.Add(t1.Sub(t0) / 2)
	r.ahead.Store(int64(time.UnixMicro(redisUs).Sub(mid)))
	r.seen.Store(true)
}

// at is Redis's now as a script answered it (Unix µs, the offset
// included). Under a fake clock it is the fake clock's instant when that
// is earlier: the microseconds the command took to reach Redis are not
// the test's.
func (r *redisClock) at(redisUs int64) time.Time {
	t := time.UnixMicro(redisUs).UTC()
	if fc, ok := r.clock.(*clockwork.FakeClock); ok {
		if f := fc.Now().UTC(); f.Before(t) {
			return f
		}
	}
	return t
}

// offset is how far Redis's clock is ahead of the instance's (negative:
// behind): this store's last observation, or the queue client's estimate
// before it has one. 0 under a fake clock.
func (r *redisClock) offset() time.Duration {
	switch {
	case r.fake():
		return 0
	case r.seen.Load():
		return time.Duration(r.ahead.Load())
	}
	return r.client.RedisClockOffset()
}

// now estimates Redis's now.
func (r *redisClock) now() time.Time { return r.clock.Now().Add(r.offset()) }

// redisOf is t, an instant of the instance's clock, on Redis's clock.
func (r *redisClock) redisOf(t time.Time) time.Time { return t.Add(r.offset()) }

// localOf is t, an instant of Redis's clock, on the instance's clock:
// when to wake for it.
func (r *redisClock) localOf(t time.Time) time.Time { return t.Add(-r.offset()) }
