// Package cron runs recurring jobs: each tick of an [Entry]'s schedule
// enqueues exactly one job, however many chronoq instances run, with no
// leader.
//
// # Usage
//
// Entries live in Redis. Declare them in code at start-up with
// [Store.Register], or put them over the API ([Store.Put], [Store.Get],
// [Store.List], [Store.Delete], [Store.Trigger]); then run a [Scheduler]
// in every instance:
//
//	store := cron.NewStore(client)
//	err := store.Register(ctx, cron.Entry{Name: "report", Schedule: "0 9 * * 1-5",
//		Timezone: "Europe/Berlin", Queue: "reports", Kind: "report.daily"})
//	...
//	sched, err := cron.NewScheduler(cron.Config{Client: client})
//	err = sched.Run(ctx) // until ctx ends
//
// Put and Register refuse an entry whose jobs the queue client would
// refuse (a payload over its Config.MaxPayloadBytes, a bad kind or queue
// name, max attempts out of range), so that a tick never fails for what
// was known when the entry was written.
//
// robfig/cron parses the specs and computes the next tick ([Parse],
// [Schedule.Next]); the waiting is the Scheduler's own loop on a clockwork
// clock, so tests drive it with a fake clock.
//
// # Exactly once without a leader
//
// Ticks are a function of the spec alone (and, for "@every d", of the Unix
// epoch: the multiples of d), never of when an instance started, so every
// instance computes the same tick instants. Each entry that fires has a
// cursor in Redis, in a sorted set scored by it: the first of its ticks
// that no instance has handled yet. Each loop asks Redis for the entries
// whose cursor Redis's clock has reached (the script reads TIME), and only
// for those, enqueues their ticks through [queue.Client.Enqueue] with the
// idempotency key "cron:<name>:<tick in Unix ms>", each job due at its
// tick, and moves their cursors past them (a script that reads TIME too,
// and moves no cursor past a tick Redis's clock has not reached); then it
// sleeps until the earliest cursor, at most RefreshInterval. The first
// instance creates a tick's job; another that reads the same cursor before
// it moved gets the job back as a replay. After enqueueing, an instance
// records the tick in the entry's bookkeeping (its last run, and a set of
// the ticks done in the last hour) before it moves the cursor, so that an
// instance reaching the tick later (the move was lost: it is another
// command, in a cluster another slot) skips it without asking the queue.
//
// A pass therefore costs Redis the same with a hundred thousand entries as
// with ten: one script reads the due part of the index (a range of the
// sorted set, O(log n) plus what it answers), and the rest is the work of
// the due entries. No loop keeps a copy of the entries to refresh: Put
// writes an entry, a new version of its settings and its cursor (the first
// tick after the change; none while paused) in one MULTI, and Delete
// removes all three, so a change is in the index for every instance when
// Put returns. A loop moves a cursor only while the entry's version is the
// one it planned from, so ticks planned from old settings never move the
// cursor of new ones. A loop sleeping until a later tick sees an entry put
// meanwhile within RefreshInterval.
//
// A replay needs the first job's idempotency record: it lives the queue
// client's Config.IdempotencyTTL (24 h by default), and the queue keeps a
// completed job at least that long. The set of done ticks covers a tick for
// an hour besides, even if its job was dropped sooner (dead-set caps, a
// purge). Every window in which two instances may enqueue the same tick
// (Grace, for a loop that fell behind) must stay inside both: with the
// defaults a minute against an hour and a day.
//
// # One clock: Redis's
//
// Which tick is due is decided by the clock of the Redis that holds the
// entries and their index, never by an instance's: due.lua and
// advance.lua read TIME, and Put reads it for the instant of a change (so
// the first tick after a change is the first after it by Redis's clock).
// The instances' clocks are only for sleeping: each read of the due index
// answers Redis's time, and the loop keeps an estimate of how far Redis's
// clock is ahead of its own (Redis's time less the middle of the round
// trip, within half of it) and sleeps until the next cursor less that
// estimate. So an instance whose clock is minutes wrong neither enqueues a
// tick early nor wakes late for it; one that wakes a moment early by the
// estimate's error finds nothing due and sleeps again, a millisecond at
// least. Grace, the missed ticks and the start of a loop are counted on
// Redis's clock too. TestSchedulerSkewedClocks runs loops on clocks 30 s
// and 5 min ahead and behind, each alone and all together: every tick
// once, none before its instant by Redis's time, each enqueued within two
// seconds of it (some milliseconds, in practice). (Under a clockwork.FakeClock the scripts add the fake clock's
// distance from the real time to TIME, so that Redis's clock reads as the
// fake one: that is how the other tests move time.)
//
// A tick's job is enqueued due at the tick, an absolute run_at, so the
// queue's own Redis decides when it runs. On a Redis Cluster the index
// lives in the slot of <ns>:cron and a queue in the slot of its name,
// often on another master: the index's master decides which tick has
// come, and the target queue's master when its job becomes due. Should
// the index's master run ahead of the queue's, a tick's job waits
// scheduled until the queue's master reaches the tick; never early by the
// queue's clock. Should it run behind, the tick is enqueued that much
// late. After a failover to a master whose clock differs, ticks come by
// the new master's clock: behind, the cursor waits (a move planned on the
// old master's time is refused, the tick already recorded as done), ahead,
// the ticks in between come at once. Keep the Redis hosts on NTP.
//
// # Missed runs
//
// A tick is missed when it is more than Config.Grace late, by Redis's
// clock, when an instance reaches it (Redis was unreachable, the process
// was paused or restarted, no instance ran), and then follows the entry's
// Missed policy: [MissedSkip] enqueues none of the missed ticks,
// [MissedOnce] enqueues one catch-up job under the key of the latest of
// them (so it is the same job as that tick's, should another instance have
// run it). When a Scheduler starts (or starts again) and finds an entry's
// cursor more than Grace before its start, no instance ran: every tick up
// to its start counts as missed, and instances starting together make one
// catch-up between them. A restart shorter than Grace is no miss: its
// ticks run late, as those of a loop that fell behind. A tick at the very
// instant of the start is on time. Ticks that pass while an entry is
// paused are never run, and changing an entry (or unpausing it) restarts
// its ticks from the change. Registering an unchanged entry, as every
// restart does, changes nothing, its cursor included.
//
// # Overlap
//
// With [OverlapSkip] a tick is left out while the entry's last job (its
// last run, a trigger included) is scheduled, pending or processing. The
// check reads the job's status at the tick; a catch-up is subject to it
// too.
//
// # Daylight-saving time
//
// Specs are read on the wall clock of the entry's Timezone (UTC by
// default); "@every" ignores it. The tick key is the UTC instant, and
// [Schedule.Next] only moves forward, so a tick is never enqueued twice:
//   - Spring forward: a wall time that does not exist is skipped, not
//     moved. "30 2 * * *" in Europe/Berlin does not fire on the day the
//     clocks go from 02:00 to 03:00; it fires at 02:30 the day before and
//     the day after. A spec that fires every hour keeps its other times.
//     This is robfig/cron's behaviour, pinned by the tests.
//   - Fall back: a spec with fixed hours fires once for a wall time that
//     happens twice, at its first occurrence: "30 1 * * *" in
//     America/New_York fires at 01:30 EDT (05:30 UTC), not again at 01:30
//     EST (robfig/cron alone would fire both; Schedule drops the repeat).
//     A spec whose hour field is every hour ("0 * * * *", "*/15 * * * *")
//     keeps firing on real time through the repeated hour: 01:00 EDT,
//     01:00 EST, 02:00 EST.
//
// # Redis keys
//
// The entries hash <ns>:cron, the due index <ns>:{<ns>:cron}:due with the
// versions and their counter (in the entries' cluster slot), and the
// bookkeeping keys <ns>:cron:{<name>}:run and <ns>:cron:{<name>}:ticks are
// global keys (see keys.go and index.go); no per-queue script touches
// them, and jobs are enqueued only through the queue client. Entries
// stored by a chronoq from before the index have no version: a loop finds
// them by comparing the counts of entries and versions (two O(1) reads a
// pass) and indexes them, a few hundred a command, resuming each after
// the later of its last change and its last recorded tick.
package cron
