package cron

import (
	"github.com/chronoq/chronoq/internal/plumbing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
)

// redisClock is Redis's clock as a cron store sees it: the queue client's
// one estimate (internal/store.Clock), read in cron's time mode. Which
// tick is due, and the move of a cursor past it, are decided by the clock
// of the Redis that holds the due index: cron_due.lua and
// cron_advance.lua read TIME, and Put reads TIME for the instant a change
// is made. The instance's clock is only for sleeping: each reply that carries Redis's
// time feeds the client's estimate, and the loop sleeps until a
// Redis-time instant less that estimate.
//
// When Redis's clock follows a test's fake clock (queue.Config.FollowClock)
// cron reads it in store.Exact mode: Redis's clock reads as the fake clock
// plus the microseconds the command took to reach Redis, and the loop
// plans at the fake clock's instant (see at). Time moves only when the
// test advances the clock, and a test can say exactly which ticks have
// come, a tick at the very instant of a cut-off included. (The queue's
// scripts read the same clock in store.Running mode, which also runs on
// in real time from its first use; a tick's job, due at the tick, is
// therefore already due for the queue when the cron index finds the tick
// due.)
type redisClock struct {
	c     *store.Clock
	clock clockwork.Clock // the client's: what round trips are timed by
}

func newRedisClock(client *queue.Client) *redisClock {
	c := plumbing.Of(client).Engine().Clock()
	return &redisClock{c: c, clock: c.Local()}
}

// offsetArg is what a script adds to Redis's TIME, in µs.
func (r *redisClock) offsetArg() int64 { return r.c.OffsetUs(store.Exact) }

// observe takes Redis's now (Unix µs, the offset included) seen between
// t0 and t1 on the instance's clock.
func (r *redisClock) observe(redisUs int64, t0, t1 time.Time) { r.c.Observe(redisUs, t0, t1) }

// at is Redis's now as a script answered it (see store.Clock.At).
func (r *redisClock) at(redisUs int64) time.Time { return r.c.At(redisUs) }

// now estimates Redis's now.
func (r *redisClock) now() time.Time { return r.c.Now() }

// redisOf is t, an instant of the instance's clock, on Redis's clock.
func (r *redisClock) redisOf(t time.Time) time.Time { return r.c.RedisOf(t) }

// localOf is t, an instant of Redis's clock, on the instance's clock:
// when to wake for it.
func (r *redisClock) localOf(t time.Time) time.Time { return t.Add(-r.c.Offset()) }
