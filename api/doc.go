// Package api is chronoq's HTTP service: the JSON API of docs/API.md on
// Echo, over the job engine of package queue.
//
// # Shape
//
// [New] builds a [Server] from a [Config]. The handlers see the job
// engine through one small interface per role — [Producer], [Reader],
// [Manager], [Consumer], [Outputs], [Subscriber] and [Engine] — whose
// union, [Store], is what Config.Store takes (a *queue.Client); the
// recurring jobs are [CronStore] (a *cron.Store), whose routes are
// registered only when one is configured. The JSON wire layer (strict
// request decoding, the hand-written Job resource) is the internal
// package api/internal/wire.
//
//	client, _ := queue.NewClient(queue.Config{Redis: rdb})
//	srv, _ := api.New(api.Config{Store: client, Token: token})
//	http.ListenAndServe("127.0.0.1:8080", srv)
//
// # Workers
//
// The worker registry (package registry; [Config.Workers], none by
// default) serves GET /v1/workers and
// GET/PUT/DELETE /v1/workers/{id}; an HTTP worker's claim, complete,
// fail, heartbeat and cancel may carry a worker_id that registers or
// refreshes it and keeps the list of jobs it holds (see workers.go). The
// gauge chronoq_workers counts the live workers at scrape time.
//
// # Errors
//
// Every error answers {"error":{"code","message","field"}}: bad input is a
// 400 naming its field (never a 500), an unknown JSON field is a 400, a
// body over Config.BodyLimit is a 413, a stale claim token a 409
// "lease_lost", Redis out of reach a 503 "unavailable" (the server keeps
// running and answers again when Redis is back), and anything unexpected a
// 500 "internal" whose detail goes to the log, not to the client. A panic
// in a handler is recovered into that 500.
//
// # Throughput
//
// Single enqueues that arrive while another of the same queue is in flight
// go to Redis together, in one script call, and each request still gets
// exactly its own answer; so do claims that ask alike, completes and
// failures, whose scripts also answer each job, without a read after,
// and the registry's sightings of a worker that names itself (see
// coalesce.go), which also wait up to a second to be written together,
// as a Go worker's do (sightings.go; [Server.Close] writes what waits).
// Config.DisableCoalescing turns all of it off. The Job resource is
// written by hand, not by reflection.
//
// # Streams
//
// GET /v1/events streams job events as Server-Sent Events; POST
// /v1/queues/{queue}/claim long-polls. Both end at once when
// [Server.Drain] is called, which the serve command registers with
// http.Server.RegisterOnShutdown so that a graceful shutdown does not wait
// for them.
//
// # Status
//
// GET /v1/status answers the instance that serves it: its version, its
// uptime, and how far its clock is from Redis's as the engine estimates
// it (queue.Client.RedisClock), flagged past [ClockOffsetWarning].
// It reads nothing from Redis.
//
// # Metrics
//
// GET /metrics answers the Prometheus text format from the server's own
// registry ([Server.Registry]): queue depths and job totals read from Redis
// at scrape time, processing-time and lateness histograms observed on the
// HTTP worker routes, promoter batch sizes ([Server.ObservePromote], for
// delayed.Config.OnPromote) and HTTP request counts and durations by route
// template.
package api
