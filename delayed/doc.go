// Package delayed is the promoter: the [Promoter] moves scheduled jobs into
// their queue's pending list the moment they are due.
//
// It knows nothing of Redis. It drives a [Source], a small interface
// (promote one batch, read the due index, list the queues, deliver
// [Nudge]s) that the queue package's Client implements, and sleeps on a
// clockwork clock, so its timing is tested with a fake clock and no Redis
// at all (and again against Redis in the queue package's contract tests).
// Dependencies point one way: delayed imports nothing of chronoq but the
// internal alarm, and queue imports delayed for the Nudge type its Client
// returns as a Source. The retry backoff, which is stored with every job,
// is the queue package's (queue.Backoff).
//
// # Running it
//
// A promoter follows the convention of chronoq's long-running parts: Run
// works until its context ends, then waits for its loops and returns nil.
//
//	p, err := delayed.NewPromoter(delayed.Config{Source: client.Source()}) // client: a *queue.Client
//	if err != nil {
//		return err
//	}
//	go p.Run(ctx) // until ctx ends
//
// Any number of promoters may run over the same queues (each batch is
// one atomic script); `chronoq serve` runs one.
//
// # Never early, rarely late
//
// A Promoter runs one loop per queue whose next job is due soon (within
// twice MaxSleep). Each pass promotes what is due in bounded batches and
// learns the due time of the next scheduled job; the loop then sleeps
// exactly until then, never longer than MaxSleep. A queue whose next job
// is further off is parked in the Source's index and its loop ends; one
// scheduler reads the index every MaxSleep and starts the loops of the
// queues whose time nears, so idle queues cost nothing. A [Nudge] (a job
// scheduled earlier than the one the loop waits for, from this process
// or, through Redis pub/sub, from another) wakes or starts a loop at once.
// A job is promoted when the clock has reached its due time (which the
// queue package keeps to the microsecond), so never before it.
//
// A loop waits with an alarm (package internal/alarm, which the worker
// uses too, to wake at the next due time it knows of). On the default,
// real clock its wait ends on a kernel timer, to a fraction of a
// millisecond rather than the millisecond a Go timer can be late, so a
// burst of retries due a few hundred microseconds apart is promoted as
// each falls due. Any clock given in Config.Clock, a clockwork fake in
// tests, is used as it is.
package delayed
