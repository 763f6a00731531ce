// Package cron runs recurring jobs: each tick of an [Entry]'s schedule
// enqueues exactly one job, however many chronoq instances run, with no
// leader.
//
// Entries live in Redis. Declare them in code at start-up with
// [Store.Register] (or put them over the HTTP API: [Store.Put],
// [Store.Delete], [Store.Trigger]), then run a [Scheduler] in every
// instance:
//
//	store := cron.NewStore(client) // client is a *queue.Client
//	err := store.Register(ctx, cron.Entry{Name: "report", Schedule: "0 9 * * 1-5",
//		Timezone: "Europe/Berlin", Queue: "reports", Kind: "report.daily"})
//	...
//	sched, err := cron.NewScheduler(cron.Config{Client: client})
//	err = sched.Run(ctx) // until ctx ends
//
// A tick's job is an ordinary job of the entry's queue, for any worker,
// due at its tick, with the idempotency key "cron:<name>:<tick in Unix
// ms>". The package's example runs this against Redis.
//
// # What to expect
//
//   - Specs: 5 fields, 6 with leading seconds, descriptors such as
//     @hourly, and "@every d" ([Parse]); read on the wall clock of the
//     entry's Timezone (UTC by default). [Schedule.Next] says what happens
//     across daylight-saving changes: a tick is never enqueued twice.
//   - Exactly once: ticks depend on the spec alone ("@every d" ticks at
//     the multiples of d since the Unix epoch), so every instance computes
//     the same ones; the first to reach a tick enqueues it, the others
//     find it done or get the same job back.
//   - One clock, Redis's: which tick is due, Grace and the instant an
//     entry changes are read on the clock of the Redis that holds the
//     entries, never on an instance's, whose clock only sets how long it
//     sleeps. An instance whose clock is minutes off neither enqueues a
//     tick early nor wakes late for it.
//   - Checked when written: [Store.Put] and [Store.Register] refuse an
//     entry whose jobs the queue client would refuse (a payload too large,
//     a bad kind or queue name), so a tick never fails for what was known
//     when the entry was written.
//   - Missed runs: a tick more than Config.Grace late (no instance ran,
//     Redis was out of reach) follows the entry's [Missed] policy:
//     [MissedSkip] runs none, [MissedOnce] one catch-up job. A restart
//     shorter than Grace misses nothing. Ticks that pass while an entry
//     is paused never run; a change restarts its ticks from the change.
//   - Overlap: with [OverlapSkip], a tick is left out while the entry's
//     last job is scheduled, pending or processing.
//
// docs/ARCHITECTURE.md tells the rest: under "Recurring jobs", how a pass
// reads only the due entries, the Redis keys (keys.go, index.go) and how
// long a tick is remembered; under "Timing" ("One clock"), what a
// failover to a Redis master with another clock does, and how a
// fake clock moves time in tests (queue.Config.FollowClock).
package cron
