// Package queue is chronoq's job engine on Redis: enqueue, claim, complete,
// fail, heartbeat, release and reclaim, each one atomic Lua script.
//
//	c, err := queue.NewClient(queue.Config{Redis: rdb}) // a *redis.Client or *redis.ClusterClient
//	e, err := c.Enqueue(ctx, queue.NewJob{Queue: "emails", Kind: "welcome",
//		Payload: json.RawMessage(`{"to":"a@example.com"}`), Delay: time.Hour})
//	jobs, err := c.Claim(ctx, "emails", queue.ClaimOptions{Max: 10})
//	err = c.Complete(ctx, "emails", jobs[0].ID, jobs[0].Token, queue.CompleteOptions{})
//
// Most programs do not claim by hand: package worker runs handlers, the
// promoter (package delayed) and the [Reclaimer] keep time, and package
// api serves all of it over HTTP. See Example for a job's whole path.
//
// # The path of a job
//
// [Client.Enqueue] writes the job's record and puts its id in the queue's
// schedule (a sorted set scored by its due time) or, when due, its pending
// list. A promoter (package delayed) moves due ids into pending with
// [Client.Promote]. [Client.Claim] takes ids from pending, gives each claim
// a fresh token and a lease (an entry in the leases sorted set), counts
// the attempt and raises the job's fence. [Client.Complete], [Client.Fail],
// [Client.Heartbeat] and [Client.Release] first check the token inside the
// script: a worker whose job was reclaimed, or finished by someone else,
// gets [ErrLeaseLost] and changes nothing. [Client.Reclaim] takes back jobs
// whose lease lapsed. Where each key and each script argument is defined:
// the engine's layout (internal/store/layout.go), which runs every script.
//
// While it runs, a job may leave more than its result, each fenced by its
// token like a complete and deleted with the job: named JSON artifacts
// ([Client.AttachArtifacts], or with the completion, [Client.Complete];
// read with [Client.Artifacts] and [Client.Get]), lines of a capped,
// append-only log ([Client.AppendLog], read with [Client.Logs]) and its
// progress, carried by a heartbeat ([Client.Heartbeat], shown as
// [Job].Progress). The caps are named constants: [MaxArtifacts],
// [MaxLogLines] and their siblings.
//
// A caller may wait for a job's end with [Client.WaitEnded]: it answers
// the job once it has completed (with its result), died or been canceled
// (a retry is no end), or as it is when the wait runs out. The waits of a
// client share one subscription to the events the scripts publish (see
// [Client.Subscribe] and endwait.go), so a wait holds no Redis connection.
//
// # Labels
//
// A job may require labels ([NewJob].Labels) and a claim may declare its
// claimer's ([ClaimOptions].Labels): a claim receives jobs without labels
// and those whose labels are all among the claimer's, never another. The
// pending jobs of each distinct label set wait in a list of their own (at
// most [MaxLabelSets] sets a queue), so a claim never scans for a job it
// may take, and a waiting claimer is woken only by a job it can take.
// See labels.go and docs/ARCHITECTURE.md, "Worker labels".
//
// # Guarantees
//
//   - At least once: a job accepted by Enqueue is run until it completes or
//     dies; a crashed worker's job runs again once its lease lapses.
//   - Never early: a job is promoted only once Redis's clock has reached
//     its run-at, compared in microseconds (a due time is rounded up to the
//     microsecond; the run_at a job shows is its millisecond).
//   - Fenced: only the current claim's token changes a claimed job.
//   - Bounded: every script works in batches; histories, dead sets,
//     finished jobs and idempotency records are capped by count or time.
//   - One slot per queue: every key of a queue carries its hash tag, every
//     key a script touches is declared, and every key of a queue exists
//     while it does, so the engine runs unchanged on Redis Cluster and a
//     slot migration is only latency.
//   - Retry-safe: go-redis may send a script twice after a lost reply;
//     every script gives the same outcome when run twice with the same
//     arguments.
//
// Workflows (package workflow) are built on single-slot steps of this
// package (workflow.go): a node's job is created waiting, whatever ends
// it leaves an entry in its queue's outbox in the same script, and the
// workflow's own hash is written only by the wf_*.lua scripts. Those
// steps, and what else only chronoq's own packages call (a push queue's
// settings, a worker's idle wait, the gauges of /metrics), are not
// Client's methods: they are internal/plumbing's, reached with
// plumbing.Of(client).
//
// Time is Redis's: the scripts read TIME, so an instance whose clock is
// wrong is never early and never takes a live lease. The Config's
// clockwork.Clock is only for sleeping; a fake one shifts the time the
// scripts see, so tests move time by advancing it (see Config.Clock).
package queue
