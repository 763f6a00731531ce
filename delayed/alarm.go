package delayed

import (
	"reflect"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Alarm calls a function once its clock reaches a time. Create it with
// [NewAlarm].
type Alarm struct {
	at      time.Time
	timer   clockwork.Timer
	stopped atomic.Bool
	fired   atomic.Bool
}

// fineWait is the end of a wait that an Alarm on the real clock waits on
// a kernel timer rather than on a Go timer: a Go timer on Linux fires up
// to a millisecond late, because the runtime waits for timers in epoll,
// whose timeout is whole milliseconds (golang/go#44343; golang/go#79872
// would make it precise, behind a GODEBUG).
const fineWait = 2 * time.Millisecond

// realClockType is the type of clockwork's real clock.
var realClockType = reflect.TypeOf(clockwork.NewRealClock())

// RealTimers is implemented by a clock whose timers are the real clock's
// although its Now reads another time (a test's stand-in for a host whose
// clock is off: the time it reads is wrong, its durations are not). Its
// alarms are as precise as the real clock's.
type RealTimers interface {
	RealTimers() bool
}

// precise reports whether an Alarm on clock waits its last fineWait on a
// kernel timer.
func precise(clock clockwork.Clock) bool {
	if reflect.TypeOf(clock) == realClockType {
		return true
	}
	r, ok := clock.(RealTimers)
	return ok && r.RealTimers()
}

// NewAlarm calls f, in a goroutine of its own, once clock reaches at. On
// clockwork's real clock the last 2 ms are waited on a kernel timer, so f
// runs within the kernel's timer slack of at, not up to a millisecond
// after it, when the process has a P free to notice (see the package
// doc); so on a clock with RealTimers. Any other clock (a fake one in
// tests) is used as it is.
func NewAlarm(clock clockwork.Clock, at time.Time, f func()) *Alarm {
	a := &Alarm{at: at}
	d := clock.Until(at)
	if !precise(clock) {
		a.timer = clock.AfterFunc(d, func() { a.ring(f) })
		return a
	}
	deadline := time.Now().Add(d)
	a.timer = clock.AfterFunc(d-fineWait, func() {
		sleepUntil(deadline)
		a.ring(f)
	})
	return a
}

func (a *Alarm) ring(f func()) {
	if a.stopped.Load() {
		return
	}
	a.fired.Store(true)
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
