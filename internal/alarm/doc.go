// Package alarm wakes a goroutine at a time, on time to a fraction of a
// millisecond on the real clock. The promoter (package delayed) sleeps on
// one until a queue's next due job; the worker sets one for the earliest
// due time it knows of.
//
//	a := alarm.New(clock, due, func() { signal(wake) })
//	defer a.Stop()
//
// On the [Real] clock (and any clock with [RealTimers]) an Alarm waits
// the last 2 ms on a kernel timer (a timerfd on Linux) rather than on a Go timer, which the runtime fires up
// to a millisecond late. A burst of retries due a few hundred
// microseconds apart is then promoted as each falls due, not a
// millisecond of batches later. The goroutine waits for the timerfd in
// the runtime's network poller, so it holds no thread: a nanosleep would
// hold a P, half of a two-core machine's, for as long as it slept. The
// poller is read at once when the process has an idle P; when every P is
// busy it is read when the scheduler gets to it (up to about 10 ms, as
// for every network reply of the process then).
//
// Any other clock, a clockwork fake in tests above all, is used as it is:
// the alarm is its AfterFunc, and advancing the fake rings it. A clock
// says that its timers are real by the [RealTimers] interface, not by
// its type: clockwork's real clock has no such method, so the default
// clock of chronoq's parts is [Real], which adds it.
package alarm
