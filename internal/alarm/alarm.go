package alarm

import (
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Alarm calls a function once its clock reaches a time. Create it with
// [New].
type Alarm struct {
	at      time.Time
	timer   clockwork.Timer
	stopped atomic.Bool
	fired   atomic.Bool
}

// fineWait is the end of a wait that an Alarm on a clock with
// [RealTimers] waits on a kernel timer rather than on a Go timer: a Go
// timer on Linux fires up to a millisecond late, because the runtime
// waits for timers in epoll, whose timeout is whole milliseconds
// (golang/go#44343; golang/go#79872 would make it precise, behind a
// GODEBUG).
const fineWait = 2 * time.Millisecond

// RealTimers is implemented by a clock whose timers run in real time: the
// clock [Real] answers, and a test's clock whose Now reads the real time
// off by a fixed offset (a host whose clock is off: the time it reads is
// wrong, its durations are not). An Alarm on such a clock waits its last
// 2 ms on a kernel timer. A clock without it, or whose method answers
// false (a clockwork fake above all), is used as it is.
type RealTimers interface {
	RealTimers() bool
}

// realClock is clockwork's real clock, with RealTimers.
type realClock struct{ clockwork.Clock }

func (realClock) RealTimers() bool { return true }

// Real is the real clock: clockwork's, with [RealTimers], so that an
// Alarm on it ends its wait on a kernel timer. It is the default clock of
// the queue client and the promoter (and so of the worker); a clock
// passed in, clockwork.NewRealClock() included, is used as it is.
func Real() clockwork.Clock { return realClock{clockwork.NewRealClock()} }

// precise reports whether an Alarm on clock waits its last fineWait on a
// kernel timer.
func precise(clock clockwork.Clock) bool {
	r, ok := clock.(RealTimers)
	return ok && r.RealTimers()
}

// New calls f, in a goroutine of its own, once clock reaches at. On a
// clock with [RealTimers] ([Real]'s) the last 2 ms are waited on a kernel
// timer, so f runs within the kernel's timer slack of at, not up to a
// millisecond after it, when the process has a P free to notice (see the
// package doc). Any other clock (a clockwork fake in tests) is used as it
// is.
func New(clock clockwork.Clock, at time.Time, f func()) *Alarm {
	a := &Alarm{at: at}
	d := clock.Until(at)
	if !precise(clock) {
		a.timer = clock.AfterFunc(d, func() { a.ring(f) })
	} else {
		deadline := time.Now().Add(d)
		a.timer = clock.AfterFunc(d-fineWait, func() {
			sleepUntil(deadline)
			a.ring(f)
		})
	}
	// The clock may have passed at between reading it and setting the
	// timer (a test advancing its fake clock meanwhile): the timer then
	// waits past at, so the alarm rings now. It rings once either way.
	if d > 0 && !clock.Now().Before(at) {
		go a.ring(f)
	}
	return a
}

func (a *Alarm) ring(f func()) {
	if a.stopped.Load() || !a.fired.CompareAndSwap(false, true) {
		return
	}
	f()
}

// At is the time the alarm was set for.
func (a *Alarm) At() time.Time { return a.at }

// Rang reports whether the alarm has rung (or is ringing).
func (a *Alarm) Rang() bool { return a.fired.Load() }

// Pending reports whether the alarm has neither rung nor been stopped.
func (a *Alarm) Pending() bool { return !a.fired.Load() && !a.stopped.Load() }

// Stop keeps the alarm from ringing, unless it is ringing already (f
// has been called or is about to be).
func (a *Alarm) Stop() {
	a.stopped.Store(true)
	a.timer.Stop()
}
