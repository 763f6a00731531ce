package alarm

import (
	"testing"
	"time"
)

func TestSleepUntilNeverReturnsEarly(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 700 * time.Microsecond, 3 * time.Millisecond} {
		deadline := time.Now().Add(d)
		sleepUntil(deadline)
		if now := time.Now(); now.Before(deadline) {
			t.Errorf("sleepUntil(now + %s) returned %s early", d, deadline.Sub(now))
		}
	}
}
