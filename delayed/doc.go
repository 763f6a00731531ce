// Package delayed decides when jobs run: the exponential [Backoff] policy of
// retries, and the [Promoter], the loop that moves scheduled jobs into their
// queue's pending list the moment they are due.
//
// It is a package of its own, below queue, because both halves are about
// time and not about Redis: the promoter drives any [Source] (the queue
// client is one) and sleeps on a clockwork clock, so its timing is tested
// with a fake clock and no Redis at all, while queue stores the backoff
// policy with every job. Dependencies point one way: queue imports delayed.
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
// A loop waits with an [Alarm] (the worker package uses one too, to wake
// at the next due time it knows of). On clockwork's real clock an Alarm
// waits the last 2 ms on a kernel timer (a timerfd on Linux) rather than
// on a Go timer, which the runtime fires up to a millisecond late. A burst
// of retries due a few hundred microseconds apart is then promoted as
// each falls due, not a millisecond of batches later. The goroutine waits
// for the timerfd in the runtime's network poller, so it holds no thread:
// a nanosleep would hold a P, half of a two-core machine's, for as long as
// it slept. The poller is read at once when the process has an idle P;
// when every P is busy it is read when the scheduler gets to it (up to
// about 10 ms, as for every network reply of the process then).
package delayed
