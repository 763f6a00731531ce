package delayed

import (
	"syscall"
	"time"
)

// sleepUntil blocks until deadline in nanosleep, which the kernel ends
// within its timer slack (50 µs by default) rather than on the next
// millisecond. It holds its thread meanwhile; the runtime hands the
// thread's P to other goroutines when they need it.
func sleepUntil(deadline time.Time) {
	for {
		d := time.Until(deadline)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
	}
}
