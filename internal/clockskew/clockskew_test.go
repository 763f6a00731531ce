package clockskew_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/alarm"
	"github.com/chronoq/chronoq/internal/clockskew"
)

func TestSkewedClock(t *testing.T) {
	t.Parallel()
	c := clockskew.New(-5 * time.Minute)
	require.InDelta(t, -5*time.Minute, time.Until(c.Now()), float64(time.Second))
	now := time.Now()
	require.InDelta(t, -5*time.Minute, c.Since(now), float64(time.Second))
	require.InDelta(t, 5*time.Minute, c.Until(now), float64(time.Second))
	start := time.Now()
	<-c.After(20 * time.Millisecond) // timers run in real time
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	require.Less(t, time.Since(start), time.Minute)
	rt, ok := c.(alarm.RealTimers)
	require.True(t, ok && rt.RealTimers(), "delayed's alarms are as precise on it as on the real clock")
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == clockskew.Env {
				return v
			}
			return ""
		}
	}
	c, d, err := clockskew.FromEnv(env(""))
	require.NoError(t, err)
	require.Nil(t, c)
	require.Zero(t, d)
	c, d, err = clockskew.FromEnv(env("30s"))
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, d)
	require.InDelta(t, 30*time.Second, time.Until(c.Now()), float64(time.Second))
	_, _, err = clockskew.FromEnv(env("soon"))
	require.Error(t, err)
}
