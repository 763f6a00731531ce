//go:build unix

package main

import (
	"syscall"
	"time"
)

// selfCPU is this process's CPU (user + sys) so far: the side under
// measurement's producers and consumers, which run here, one side at a
// time. On a machine the benchmark keeps busy, Redis and this process
// share the cores, so a side's jobs/s is bounded by both figures together.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
