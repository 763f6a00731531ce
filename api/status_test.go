package api_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/client"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

type statusView struct {
	Version           string  `json:"version"`
	GoVersion         string  `json:"go_version"`
	StartedAt         string  `json:"started_at"`
	UptimeSeconds     float64 `json:"uptime_seconds"`
	Time              string  `json:"time"`
	RedisTime         string  `json:"redis_time"`
	RedisClockOffset  float64 `json:"redis_clock_offset_seconds"`
	RedisClockBound   float64 `json:"redis_clock_bound_seconds"`
	RedisClockAt      *string `json:"redis_clock_measured_at"`
	RedisClockWarning bool    `json:"redis_clock_warning"`
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

// TestStatus: GET /v1/status answers this instance's build, uptime and
// clocks; under the fake clock the engine's clock and Redis's are one.
func TestStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, withToken("tok"))
	start := b.clock.Now()
	b.clock.Advance(90 * time.Second)
	r := b.do(t, http.MethodGet, "/v1/status", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	st := decodeAs[statusView](t, r)
	require.NotEmpty(t, st.Version)
	require.Equal(t, runtime.Version(), st.GoVersion)
	require.Equal(t, start.UTC().Format("2006-01-02T15:04:05.000Z07:00"), st.StartedAt)
	require.Equal(t, 90.0, st.UptimeSeconds)
	require.Equal(t, start.Add(90*time.Second), parseTime(t, st.Time))
	require.Equal(t, st.Time, st.RedisTime)
	require.Zero(t, st.RedisClockOffset)
	require.Zero(t, st.RedisClockBound)
	require.Equal(t, &st.Time, st.RedisClockAt, "under a fake clock the two clocks are one, known now")
	require.False(t, st.RedisClockWarning)

	// Like every /v1 route, it needs the token.
	nb := *b
	nb.token = ""
	requireError(t, nb.do(t, http.MethodGet, "/v1/status", nil), http.StatusUnauthorized, "unauthenticated", "")
}

// TestStatusSkewedClock: an instance whose clock is 30 s ahead of Redis's
// (a real clock, off) learns the offset from its first script round trip
// and reports it, with the warning, and Redis's time as it estimates it;
// on Redis Cluster too. Read with the generated client, so its Status
// type is proven too.
func TestStatusSkewedClock(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		skew    time.Duration
		cluster bool
	}{{30 * time.Second, false}, {-30 * time.Second, false}, {0, false}, {30 * time.Second, true}} {
		if tt.cluster && testing.Short() {
			continue // cluster skipped in -short mode
		}
		skew := tt.skew
		b := setup(t, func(sc *setupConfig) {
			sc.clock = testutil.SkewedClock(skew)
			if tt.cluster {
				sc.rdb = testutil.Cluster(t) // the offset is to the clock of the master that answered
			}
		})
		c, err := client.NewClientWithResponses(b.http.URL, client.WithHTTPClient(b.http.Client()))
		require.NoError(t, err)
		res, err := c.StatusWithResponse(b.ctx)
		require.NoError(t, err)
		require.NotNil(t, res.JSON200, "%d %s", res.StatusCode(), res.Body)
		require.Nil(t, res.JSON200.RedisClockMeasuredAt, "nothing measured yet")
		require.Zero(t, res.JSON200.RedisClockOffsetSeconds)
		// A claim (of nothing) is a script that answers Redis's time.
		before := time.Now().Add(skew)
		_, err = b.client.Claim(b.ctx, "q", queue.ClaimOptions{Max: 1})
		require.NoError(t, err)

		res, err = c.StatusWithResponse(b.ctx)
		require.NoError(t, err)
		require.NotNil(t, res.JSON200, "%d %s", res.StatusCode(), res.Body)
		st := res.JSON200
		require.NotNil(t, st.RedisClockMeasuredAt)
		require.WithinDuration(t, before, *st.RedisClockMeasuredAt, time.Second, "measured at the claim, on the instance's clock")
		require.Positive(t, st.RedisClockBoundSeconds, "half a round trip")
		require.Less(t, st.RedisClockBoundSeconds, 0.5)
		require.InDelta(t, -skew.Seconds(), st.RedisClockOffsetSeconds, 0.5, "skew %s, cluster %v", skew, tt.cluster)
		require.Equal(t, skew != 0, st.RedisClockWarning, "skew %s, cluster %v", skew, tt.cluster)
		require.WithinDuration(t, time.Now().Add(skew), st.Time, time.Second, "the instance's clock")
		require.WithinDuration(t, time.Now(), st.RedisTime, time.Second, "Redis's, as the instance estimates it")
		// Each time is written to the millisecond.
		require.WithinDuration(t, st.Time.Add(time.Duration(st.RedisClockOffsetSeconds*float64(time.Second))), st.RedisTime,
			time.Millisecond, "redis_time is time plus the offset")
	}
	require.Equal(t, time.Second, api.ClockOffsetWarning)
}
