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
//	err = sched.Start(ctx)
//	defer sched.Stop(ctx)
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
// instance computes the same tick instants. Each loop sleeps until the
// earliest next tick of its entries (at most RefreshInterval, when it reads
// the entries again and so follows changes made elsewhere) and enqueues
// every tick its clock has reached through [queue.Client.Enqueue] with the
// idempotency key "cron:<name>:<tick in Unix ms>". The first instance
// creates the job; the others get it back as a replay. After enqueueing, an
// instance records the tick in the entry's bookkeeping (its last run, and a
// set of the ticks done in the last hour) so that an instance reaching the
// tick later skips it without asking the queue.
//
// A replay needs the first job's idempotency record: it lives the queue
// client's Config.IdempotencyTTL (24 h by default), and the queue keeps a
// completed job at least that long. The set of done ticks covers a tick for
// an hour besides, even if its job was dropped sooner (dead-set caps, a
// purge). Every window in which two instances may enqueue the same tick
// (their clock skew, plus Grace for a loop that fell behind) must stay
// inside both: with the defaults about a minute against an hour and a day.
//
// # Clock skew
//
// An instance enqueues a tick when its own clock reaches it, and handles
// every tick in order from the moment it starts, never skipping one
// because another instance recorded a later tick. With clocks that
// disagree by up to s, a tick's job is therefore enqueued by the instance
// that is most ahead: up to s early in true time, never more, and exactly
// once, since the others' enqueues of the same key are replays or find the
// tick done. Skew below an hour (the memory of done ticks, and far below
// the idempotency TTL) gives no duplicate; the tests run three instances at
// -2 s, 0 and +2 s. At start, an instance counts as missed the ticks its
// own clock had passed; a tick is lost to skew only if every instance that
// runs started after it by its own clock (and then the Missed policy
// applies to it).
//
// # Missed runs
//
// A Scheduler that starts (or starts again) resumes each entry after the
// later of its last recorded tick and its last change. Ticks from there to
// the moment it starts passed while no instance ran as far as it can tell,
// and follow the entry's Missed policy: [MissedSkip] enqueues none of them,
// [MissedOnce] enqueues one catch-up job under the key of the latest of
// them, so instances starting together make one catch-up between them (and
// it is the same job as that tick's, should another instance have run it).
// A tick at the very instant of the start is on time. While running, a
// tick is on time up to Config.Grace late (Redis briefly unreachable, a
// paused process); later ones count as missed the same way. Ticks that
// pass while an entry is paused are never run, and changing an entry (or
// unpausing it) restarts its ticks from the change. Registering an
// unchanged entry, as every restart does, changes nothing.
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
// The entries hash <ns>:cron and the bookkeeping keys <ns>:cron:{<name>}:run
// and <ns>:cron:{<name>}:ticks are global keys (see keys.go); no per-queue
// script touches them, and jobs are enqueued only through the queue client.
package cron
