// Package worker runs chronoq jobs in Go: handlers registered per kind, a
// pool of concurrent runs over one or more queues, automatic lease
// heartbeats, retries by error type, and a graceful stop.
//
// Register handlers on a [Mux], then run a [Worker] over a
// [queue.Client]:
//
//	mux := worker.NewMux()
//	mux.Use(worker.Logging(logger, nil), worker.Recover)
//	mux.HandleFunc("email.send", func(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
//		var p EmailPayload
//		if err := json.Unmarshal(job.Payload, &p); err != nil {
//			return nil, worker.SkipRetry(err) // retrying cannot fix bad input
//		}
//		return nil, send(ctx, p)
//	})
//	w, err := worker.New(worker.Config{Client: client, Handler: mux,
//		Queues: []worker.QueueConfig{{Name: "critical"}, {Name: "default"}},
//		Priority: worker.Strict, Concurrency: 50, ShutdownTimeout: 30 * time.Second})
//	err = w.Run(ctx) // until ctx ends, then a graceful stop
//
// The package's examples run this against Redis.
//
// # What a handler returns
//
//   - a nil error: the job is completed, with the result (optional JSON)
//     stored
//   - a plain error: retried after the job's backoff, or dead once its
//     attempts are spent
//   - [SkipRetry](err): dead at once
//   - [RetryAfter](d, err): retried d from now, whatever the backoff says
//   - a panic: recovered, recorded with its stack as the job's last error
//     ([PanicError]), and retried like a plain error ([Recover] shows it
//     as that error to the middleware outside it)
//
// The handler's context is cancelled, with [context.Cause] saying why, when
// the lease is lost (queue.ErrLeaseLost: another worker may run the job),
// when someone asked to cancel the job ([ErrJobCanceled]), when its
// timeout passes ([ErrTimeout]), or when the worker stops and
// Config.ShutdownTimeout is over ([ErrStopped]; the job goes straight back
// to pending).
//
// # Scheduled jobs
//
// A worker wakes shortly before the due times it knows of (its claims are
// handed the queue's next one) and claims, in one call, what comes due
// within Config.Lookahead (20 ms): it holds those jobs and starts each at
// its due time by Redis's clock, never before, and their completes go
// together. A job held so is processing before its handler runs: a
// cancel of it is a request, as of a running job (its handler's context
// is cancelled when the worker hears of it); at the stop it goes back to
// wait for its time.
//
// # Logs, progress and artifacts
//
// A handler's context carries its run, fenced by its claim token:
//
//   - [Log](ctx) is an io.Writer to the job's log, [Logger](ctx) a
//     *slog.Logger on it: each line is appended to the job's capped log
//     (queue.MaxLogLines, queue.MaxLogBytes), sent in the background in
//     batches, and all of it before the job's outcome;
//   - [Progress](ctx, percent, msg) is sent at once with a heartbeat (the
//     last one before the outcome), shown as the job's progress;
//   - [Attach](ctx, name, value) sets a named JSON artifact of the job now.
//
// A stream of them (GET /v1/queues/{queue}/jobs/{id}/stream) shows a job
// live. Lines logged after the lease was lost, or once the handler has
// returned, are dropped.
//
// # Stopping
//
// When Run's ctx ends the worker stops claiming, lets running handlers
// return for Config.ShutdownTimeout, hands the unfinished jobs back, and
// flushes the completions under way. Run follows the convention of
// chronoq's long-running parts (the promoter and the reclaimer too): it
// blocks until its ctx ends and answers nil on a clean stop.
//
// # The registry
//
// A worker registers itself in the worker registry (package registry,
// GET /v1/workers) at Run, with Config.ID (by default
// "<host>-<pid>-<6 hex digits>"), its host, Config.Labels, its queues and
// Config.Version; it refreshes every third of Config.RegistryTTL (60 s),
// sends the jobs it runs within a second of a change, and deregisters at
// the stop. A worker that dies expires at its TTL. Registry failures are
// logged and tried again; they never stop the worker.
// Config.DisableRegistry leaves it out.
// # Labels
//
// Config.Labels are the worker's labels, sent with every claim: it runs
// the jobs without labels and those whose labels it has all of (see
// queue.ClaimOptions.Labels). A job whose labels no worker has waits,
// pending, for one that has them.
//
// # Tracing
//
// While tracing is on (a program installed an OpenTelemetry
// TracerProvider, see otel.SetTracerProvider), a handler's ctx carries the
// span of its run, "process <queue>" (a consumer span): a child of the
// job's enqueue (queue.Job.TraceParent) on its first attempt, a root
// linked to it on a retry. Jobs it enqueues with that ctx join the trace,
// and its outcome is recorded under it. Off, the worker starts no span.
//
// # What else to run
//
// A worker only runs jobs. It promotes the due jobs its claims find, but a
// delayed.Promoter is what promotes a job no worker is waiting for, and a
// queue.Reclaimer takes back the jobs of crashed workers: run one of each
// somewhere (chronoq serve does).
//
// The worker uses only the public [queue.Client] calls, so a runtime in
// another language could do the same over HTTP. How it claims, waits and
// commits completions: docs/ARCHITECTURE.md, "The Go worker". All waiting
// goes through the Config's clockwork.Clock, so tests drive heartbeats,
// timeouts and retries with a fake clock.
package worker
