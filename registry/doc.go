// Package registry keeps the worker registry: every worker, a Go
// [worker.Worker] or a program speaking the HTTP API, with its id, host,
// labels, queues, version, start time, last sighting and the jobs it
// holds. A worker that stops refreshing its entry for longer than its TTL
// expires: it is no longer listed, counted or kept.
//
//	reg, err := registry.New(client, registry.Config{}) // client is a *queue.Client
//	err = reg.Register(ctx, registry.Registration{Info: registry.Info{ID: "w1",
//		Host: "box-1", Queues: []string{"emails"}}})
//	page, err := reg.List(ctx, registry.ListOptions{})
//
// A Go worker registers itself (worker.Config.ID and friends); the API
// registers an HTTP worker when its calls carry a worker_id, and serves
// the registry at GET /v1/workers (see docs/API.md).
//
// # Why a package of its own
//
// Both the worker runtime and the HTTP API write the registry, and the
// API reads it. In package queue it would sit beside the job store it has
// nothing to do with (no script of a queue touches it); in package worker
// the API would depend on the Go worker runtime. Here it depends on queue
// only for the client it shares (its Redis, namespace and clock) and the
// name rules and errors of the API, and the graph stays one way:
// api -> registry -> queue, worker -> registry -> queue.
//
// # Keys and clock
//
// The registry is a few namespace-level keys in one Redis Cluster slot of
// their own, "<ns>:{<ns>:workers}:...", all built in keys.go, each change
// one Lua script over all of them (internal/store/lua/registry_*.lua, run
// through the queue client's engine; see keys.go for what each holds). Every
// decision about time is made by Redis's clock inside the scripts: the
// last sighting, the start time, and expiry (an entry is live while
// Redis's now is before its last sighting plus its TTL). The instance's
// clock only paces refreshes. When the queue client's Redis clock follows
// a test's fake clock (queue.Config.FollowClock) the scripts add the fake
// clock's distance from the real time to Redis's, as package cron does,
// so advancing the fake clock expires workers.
//
// Expired entries are deleted by the scripts themselves, a bounded batch
// at each call (sweepBatch); until then they are neither listed nor
// counted. Every cap is a named constant below, checked before anything
// is written.
package registry
