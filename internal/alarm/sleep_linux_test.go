package alarm

import (
	"testing"
	"time"
)

// The fallback when no timerfd can be made.
func TestNanosleepUntilNeverReturnsEarly(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 700 * time.Microsecond} {
		deadline := time.Now().Add(d)
		nanosleepUntil(deadline)
		if now := time.Now(); now.Before(deadline) {
			t.Errorf("nanosleepUntil(now + %s) returned %s early", d, deadline.Sub(now))
		}
	}
}
