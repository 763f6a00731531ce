package cron

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lastBefore agrees with walking the ticks one by one.
func TestLastBefore(t *testing.T) {
	t.Parallel()
	from := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct{ spec, zone string }{
		{"@every 1s", ""}, {"@every 7s", ""}, {"*/5 * * * * *", ""}, {"0 9 * * 1-5", "Europe/Berlin"},
		{"30 1 * * *", "America/New_York"}, {"0 0 29 2 *", ""}, {"@hourly", "Asia/Kolkata"},
	} {
		s, err := Parse(tc.spec, tc.zone)
		require.NoError(t, err)
		for _, gap := range []time.Duration{0, time.Second, 1500 * time.Millisecond, time.Minute, 26 * time.Hour, 400 * 24 * time.Hour} {
			lo, hi := from, from.Add(gap)
			want, walked := time.Time{}, 0
			for at := s.firstAtOrAfter(lo); !at.IsZero() && at.Before(hi) && walked < 1e5; at = s.Next(at) {
				want, walked = at, walked+1
			}
			if walked == 1e5 {
				continue // too many ticks to walk: the sparse specs cover the long gaps
			}
			require.Equal(t, want, s.lastBefore(lo, hi), "%s %s", tc.spec, gap)
		}
	}
	s, err := Parse("30 1 * * *", "America/New_York")
	require.NoError(t, err)
	// Across the fall back of 2030-11-03: 01:30 EST (06:30Z) is no tick.
	got := s.lastBefore(time.Date(2030, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 11, 3, 7, 0, 0, 0, time.UTC))
	require.Equal(t, time.Date(2030, 11, 3, 5, 30, 0, 0, time.UTC), got)
}
