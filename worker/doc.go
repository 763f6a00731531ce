// Package worker runs chronoq jobs: handlers registered per kind, a pool
// of concurrent runs over one or more queues, automatic lease heartbeats,
// retries by error type, and a graceful stop.
//
// It is a package of its own, not part of queue, because it is a consumer
// of the store, not a piece of it: everything it does goes through the
// public [queue.Client] calls (Claim, CompleteMany, Fail, Heartbeat,
// Release, CancelClaimed, WaitPending), so a runtime written in another
// language could do the same over the same scripts. Keeping it apart also
// keeps goroutines, handlers and middleware out of the package that owns
// the Redis layout. Dependencies point one way: worker imports queue.
//
// # Handlers
//
// A [Mux] maps job kinds to handlers and wraps them in middleware:
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
//
// What a handler returns decides where the job goes:
//   - a nil error: completed, with the result (optional JSON) stored
//   - a plain error: retried after the job's backoff, or dead once its
//     attempts are spent
//   - [SkipRetry](err): dead at once
//   - [RetryAfter](d, err): retried d from now, whatever the backoff says
//   - a panic: recovered, recorded with its stack as the job's last error
//     ([PanicError]), and retried like a plain error
//
// # Running
//
//	w, err := worker.New(worker.Config{Client: client, Handler: mux,
//		Queues: []worker.QueueConfig{{Name: "critical"}, {Name: "default"}},
//		Priority: worker.Strict, Concurrency: 50, ShutdownTimeout: 30 * time.Second})
//	err = w.Run(ctx) // until ctx ends, then a graceful stop
//
// A worker claims as many jobs as it has free slots in one script call
// when its queues are busy. When they are empty it waits on each of them
// with [queue.Client.WaitPending] (a blocking peek that holds no slot) and
// claims the moment a job arrives. It also wakes at the earliest due time
// it knows of, from its last claim ([queue.Client.ClaimNext]) and from the
// retries its own runs asked for, and claims then: a claim promotes what
// is due, so a retry or a scheduled job starts one round trip after its
// due time, without waiting for a promoter's pass. Redis hands each due
// time to one claimer only, so of many idle worker processes one wakes
// for it; the others are woken by the promoter's push as before. Completions are group-committed: each
// queue has one completer that sends, in one CompleteMany, every ack that
// arrived while its previous call was in flight, so batches grow with load
// and an idle worker adds no delay.
//
// While a handler runs, the worker extends its lease every
// HeartbeatInterval (a third of the job's visibility by default). The
// handler's context is cancelled, with [context.Cause] saying why, when
// the lease is lost (another worker may run the job: queue.ErrLeaseLost),
// when someone asked to cancel the job ([ErrJobCanceled]; the job then
// ends as canceled), or when its timeout passes ([ErrTimeout]).
//
// When Run's ctx ends the worker stops claiming, waits for running
// handlers for Config.ShutdownTimeout, then hands the unfinished jobs
// straight back to pending (not after their visibility timeout) and
// cancels their contexts ([ErrStopped]). Run follows the convention of
// chronoq's long-running parts (the promoter and the reclaimer too): it
// blocks until its ctx ends and answers nil on a clean stop.
//
// A worker only runs jobs. It promotes the due jobs its claims find, but
// only a delayed.Promoter promotes a job no worker is waiting for (a job
// scheduled by another process while the worker sleeps, or on a busy
// queue), and jobs of crashed workers are taken back by a
// queue.Reclaimer. Run one of each somewhere (chronoq serve does).
//
// All waiting goes through the Config's clockwork.Clock (the client's by
// default), so tests drive heartbeats, timeouts and retries with a fake
// clock.
package worker
