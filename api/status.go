package api

import (
	"cmp"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
)

// ClockOffsetWarning is how far this instance's clock may be from Redis's
// before GET /v1/status flags it (redis_clock_warning) and the dashboard
// shows it as a warning; `chronoq serve` logs a warning past it too.
// chronoq decides nothing by an instance's clock (the scripts read
// Redis's), but a clock that far off is a host to fix (NTP): logs and
// metrics carry its times.
const ClockOffsetWarning = time.Second

// statusJSON is GET /v1/status.
type statusJSON struct {
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

// status: GET /v1/status, this instance: its build, its uptime, and how
// far its clock is from Redis's as the engine estimates it. It reads
// nothing from Redis, so it answers while Redis is away too.
func (s *Server) status(c echo.Context) error {
	now := s.clock.Now()
	est := s.engine.RedisClock()
	off := est.Offset
	var at *string
	if !est.At.IsZero() {
		v := est.At.UTC().Format(wire.TimeLayout)
		at = &v
	}
	return writeJSON(c, http.StatusOK, statusJSON{
		Version:           buildVersion(),
		GoVersion:         runtime.Version(),
		StartedAt:         s.started.UTC().Format(wire.TimeLayout),
		UptimeSeconds:     max(0, now.Sub(s.started).Seconds()),
		Time:              now.UTC().Format(wire.TimeLayout),
		RedisTime:         now.Add(off).UTC().Format(wire.TimeLayout),
		RedisClockOffset:  off.Seconds(),
		RedisClockBound:   est.Bound.Seconds(),
		RedisClockAt:      at,
		RedisClockWarning: off > ClockOffsetWarning || off < -ClockOffsetWarning,
	})
}

// buildVersion is the version of the running binary as Go stamped it:
// the main module's version ("v1.2.0", or a pseudo-version with the
// commit), "(devel)" with the commit when built from a work tree without
// one, "(devel)" alone in tests.
var buildVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := cmp.Or(bi.Main.Version, "(devel)")
	if v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value[:min(12, len(st.Value))]
		case "vcs.modified":
			if st.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return v
})
