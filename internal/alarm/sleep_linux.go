package alarm

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sleepUntil blocks until deadline on a timerfd, which the kernel fires
// within its timer slack (50 µs by default) rather than on the next
// millisecond; the goroutine runs again as soon as a P is free to read
// the poller (at once when one is idle). The goroutine waits in the runtime's network poller, so,
// unlike a nanosleep, it holds no thread and no P meanwhile: on a machine
// with two cores, a P held by a sleeping thread would be half of what the
// process has to run its other goroutines until sysmon takes it back. When
// no timerfd can be made it sleeps in nanosleep.
func sleepUntil(deadline time.Time) {
	d := time.Until(deadline)
	if d <= 0 {
		return
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		nanosleepUntil(deadline)
		return
	}
	f := os.NewFile(uintptr(fd), "timerfd") // non-blocking: a pollable File
	defer f.Close()
	if err := unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}, nil); err != nil {
		nanosleepUntil(deadline)
		return
	}
	var expirations [8]byte
	if _, err := f.Read(expirations[:]); err != nil {
		nanosleepUntil(deadline)
	}
}

// nanosleepUntil blocks its thread until deadline in nanosleep.
func nanosleepUntil(deadline time.Time) {
	for {
		d := time.Until(deadline)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
	}
}
