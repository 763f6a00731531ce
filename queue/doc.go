// Package queue is chronoq's job engine on Redis: enqueue, claim, complete,
// fail, heartbeat, release and reclaim, each one atomic Lua script.
//
// # The path of a job
//
// [Client.Enqueue] writes the job's hash and puts its id in the queue's
// scheduled sorted set (score: run-at in ms) or, when due, its pending list.
// A promoter (package delayed) moves due ids into pending with
// [Client.Promote]. [Client.Claim] moves ids from pending into the
// processing list, gives each claim a fresh token and a lease (an entry in
// the leases sorted set) and counts the attempt. [Client.Complete],
// [Client.Fail], [Client.Heartbeat] and [Client.Release] first check the
// token inside the script: a worker whose job was reclaimed, or finished by
// someone else, gets [ErrLeaseLost] and changes nothing. [Client.Reclaim]
// takes back jobs whose lease lapsed, and ids a claimer left in processing
// when it died between BLMOVE and the lease write.
//
// # Guarantees
//
//   - At least once: a job accepted by Enqueue is run until it completes or
//     dies; a crashed worker's job runs again once its lease lapses.
//   - Never early: a job is promoted only once the clock has reached its
//     run-at, compared in microseconds (a due time is rounded up to the
//     microsecond; the run_at a job shows is its millisecond).
//   - Fenced: only the current claim's token changes a claimed job.
//   - Bounded: every script works in batches; histories, dead sets,
//     finished jobs and idempotency records are capped by count or time.
//   - One slot per queue: every key of a queue carries its hash tag, so the
//     engine runs unchanged on Redis Cluster.
//   - Retry-safe: go-redis may send a script twice after a lost reply;
//     every script gives the same outcome when run twice with the same
//     arguments.
//
// Time comes from the Config's clockwork.Clock and is passed to every
// script, so tests drive it with a fake clock. Instances whose clocks
// disagree by s promote jobs up to s early or late: keep clocks in sync
// (NTP keeps them within milliseconds).
package queue
