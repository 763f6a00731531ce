// Package clockskew gives a process a clock that is wrong on purpose: the
// real clock read off by a fixed offset, its timers running in real time.
// It stands for an instance whose host clock drifted (NTP off, a paused
// VM, a container with a bad clock): the chaos battery's skew scenario
// runs `chronoq serve` and its workers on such clocks, and the tests use
// it through testutil.SkewedClock. chronoq keeps time by Redis's clock, so
// such an instance must still never be early and never take a live lease.
package clockskew

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
)

// Env names the environment variable that gives `chronoq serve` (and the
// battery's workers) a skewed clock: a Go duration such as "30s" or
// "-5m". For tests only; it is not among serve's documented settings.
const Env = "CHRONOQ_CLOCK_SKEW"

// New is the real clock read off by skew.
func New(skew time.Duration) clockwork.Clock {
	return clock{Clock: clockwork.NewRealClock(), skew: skew}
}

// FromEnv reads Env through getenv: a skewed clock and its skew, or a nil
// clock when the variable is unset or empty.
func FromEnv(getenv func(string) string) (clockwork.Clock, time.Duration, error) {
	v := getenv(Env)
	if v == "" {
		return nil, 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%s=%q: want a duration such as 30s or -5m", Env, v)
	}
	return New(d), d, nil
}

// clock reads the real time plus skew. Its timers, tickers and sleeps are
// the real clock's: a duration is the same on a wrong clock.
type clock struct {
	clockwork.Clock
	skew time.Duration
}

// RealTimers tells internal/alarm that this clock's timers are the
// real clock's: an alarm on it is as precise as on a host whose own clock
// is off.
func (clock) RealTimers() bool { return true }

func (c clock) Now() time.Time                  { return c.Clock.Now().Add(c.skew) }
func (c clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
