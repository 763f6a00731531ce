//go:build !linux

package alarm

import "time"

// sleepUntil blocks until deadline. Off Linux it is time.Sleep, whose
// precision is the platform's.
func sleepUntil(deadline time.Time) {
	for d := time.Until(deadline); d > 0; d = time.Until(deadline) {
		time.Sleep(d)
	}
}
