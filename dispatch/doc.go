// Package dispatch is chronoq's push delivery: a queue can be given an
// HTTP target, and dispatchers send each of its jobs there when it is due,
// as Google Cloud Tasks and Upstash QStash do, with everything the pull
// path guarantees (fenced attempts, backoff, the dead set, due times to
// the millisecond).
//
// # Why a package of its own
//
// A dispatcher is a consumer of the store, like package worker: it claims
// jobs with the ordinary fenced claim and acknowledges them with the
// ordinary complete and fail, through the public queue.Client calls (in
// fact it is a worker.Worker per push queue, whose handler is the HTTP
// request). What it adds is not the store's business and would weigh on
// every user of queue: an HTTP client, Standard Webhooks signing, an SSRF
// guard with its own view of the network, callbacks and their summaries.
// Keeping it apart keeps package queue the owner of the Redis layout only
// (the config is a queue setting, queue.SettingPush, in the queue's meta
// hash; attempts are logged with queue.Client.Note), and lets chronoq run
// dispatchers in serve or alone (chronoq dispatch) to scale them apart.
// Dependencies point one way: dispatch imports worker and queue.
//
// # Pieces
//
//   - QueueConfig and Store: a queue's target (URL, method, headers,
//     timeout), its signing secrets and its concurrency, in Redis.
//   - PushJob and Envelope: a job with its own target or callbacks;
//     CheckEnvelope checks an envelope made by hand exactly as NewJob
//     checks the options it is made of, and the dispatcher checks each
//     one again before its request.
//   - Dispatcher: serves every push queue; maps each response to where the
//     job goes (see mapStatus): 2xx completed with the body (≤ 64 KiB) as
//     its result; 429 or 503 with Retry-After retried then (≤ 1 h); any
//     other 4xx but 408, 425 and 429 dead at once; 5xx, 408, 425, 429 and
//     503 without Retry-After, timeouts, connection errors and redirects
//     (never followed) retried with the job's backoff. Every attempt's
//     status, duration, error and outcome is noted on the job
//     (plumbing.Client.Notes).
//   - Sign and Verify: Standard Webhooks signatures, for receivers too.
//   - Guard: the SSRF guard, on by default, checked on the dialled address.
//
// Each push queue's worker is in the worker registry (package registry)
// under a readable id, dispatch-<host>-<pid>-<queue>-<n> (see WorkerID),
// with the config's labels.
//
// A push config may give the endpoint labels (QueueConfig.Labels): the
// queue's worker claims with them, so a job that requires labels is
// pushed when they are all among the endpoint's, and otherwise waits for
// a pull worker that has them (a pull claim with those labels takes it).
//
// Rate and in-flight limits are not this package's: they are a queue's
// (queue.Limits), enforced by the claim for pull workers too, and so for
// the dispatchers' workers.
//
// A job whose last attempt's dispatcher died (its lease lapsed, and the
// reclaim sweep of package queue sent it to the dead set) gets its failure
// callback from the dispatchers' look at the dead sets (see sweepDead).
//
// While tracing is on (an OpenTelemetry TracerProvider is installed), each
// request has the span "dispatch <queue>", a child of the run's (package
// worker), and carries its traceparent header (and what else the global
// propagator writes); the signature does not cover it.
package dispatch
