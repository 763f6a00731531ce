// Package demo is the simulated worker pool and the batch producer behind
// `chronoq demo`: a newcomer starts workers from the dashboard, gives them
// a work latency, a failure rate and a hang rate, enqueues batches of the
// demo kinds (email, webhook, thumbnail, invoice), and watches delayed
// jobs promoted, failures retried into the dead set and hung jobs
// reclaimed.
//
// The workers use a [queue.Client] directly (Claim, Heartbeat,
// Complete, Fail, Release, AppendLog) rather than the worker package, so that a hang can be
// simulated faithfully: a hung worker has crashed holding its job, which
// it never completes nor heartbeats, so the job's lease lapses and a
// reclaim sweep returns it to pending. All waiting is on the pool's
// [clockwork.Clock].
//
// With [Config.Registry] the simulated workers are in the worker registry
// (package registry) as demo-1..N (see [WorkerID]), with the job each
// holds, so the dashboard's workers page lists them; a hung worker's
// entry is left to expire with its job, as a crashed worker's would.
//
// A job's work is cut into steps (MinSteps to MaxSteps, one per
// StepEvery): the worker logs a line when it claims the job, one per step
// and one at the end (or the error of a simulated failure), carries the
// progress in each step's heartbeat, and completes the job with the
// artifact ArtifactName (what the job made), so that the job's page on the
// dashboard shows a live log, progress and an output.
//
// [Pool.Routes] are the /v1/demo routes, for [api.Config.Routes], and
// [OpenAPI] their OpenAPI paths, for [api.Config.RoutesOpenAPI]. What the
// page offers: docs/DASHBOARD.md, "The demo".
package demo
