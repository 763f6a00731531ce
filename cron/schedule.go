package cron

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // every IANA zone, also on hosts without a zoneinfo database

	robfig "github.com/robfig/cron/v3"

	"github.com/chronoq/chronoq/queue"
)

// parser reads 5-field specs, 6-field specs with leading seconds and the
// descriptors (@yearly, @monthly, @weekly, @daily, @midnight, @hourly).
// "@every <duration>" is parsed by Parse itself (see Schedule.Next).
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// allHours is the Hour bit set of a spec that fires in every hour of the day.
const allHours = 1<<24 - 1

// DefaultTimezone is the zone of an entry that names none.
const DefaultTimezone = "UTC"

// Schedule is a parsed spec in its time zone: the tick times of an entry.
// Every instance computes the same ticks from the same spec.
type Schedule struct {
	spec  *robfig.SpecSchedule // nil for @every
	every time.Duration        // > 0 for @every
	// wallOnce: the spec names fixed hours, so a wall-clock time that a
	// fall-back transition repeats fires once, at its first occurrence.
	wallOnce bool
}

// Parse parses spec in the IANA zone timezone ("" is UTC). Errors are
// *FieldError naming "schedule" or "timezone".
//
// Accepted specs: 5 fields (minute hour day-of-month month day-of-week),
// 6 fields with leading seconds, the descriptors @yearly (@annually),
// @monthly, @weekly, @daily (@midnight), @hourly, and "@every <d>" with d a
// whole number of seconds, at least 1 s. "CRON_TZ=" and "TZ=" prefixes are
// refused: the zone is the timezone argument.
func Parse(spec, timezone string) (*Schedule, error) {
	loc, err := loadLocation(timezone)
	if err != nil {
		return nil, err
	}
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "":
		return nil, invalid("schedule", "empty")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return nil, invalid("schedule", "%q: give the zone in timezone, not in the spec", spec)
	case strings.HasPrefix(spec, "@every"):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(spec, "@every")))
		if err != nil {
			return nil, invalid("schedule", "%q: %v", spec, err)
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, invalid("schedule", "%q: @every takes a whole number of seconds, at least 1s", spec)
		}
		return &Schedule{every: d}, nil
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, invalid("schedule", "%q: %v", spec, err)
	}
	ss, ok := s.(*robfig.SpecSchedule)
	if !ok {
		return nil, invalid("schedule", "%q: unsupported", spec)
	}
	ss.Location = loc // the parser sets time.Local; the entry's zone rules
	sched := &Schedule{spec: ss, wallOnce: ss.Hour&allHours != allHours}
	if sched.Next(time.Unix(0, 0)).IsZero() {
		return nil, invalid("schedule", "%q never fires", spec)
	}
	return sched, nil
}

func loadLocation(name string) (*time.Location, error) {
	switch name {
	case "", DefaultTimezone:
		return time.UTC, nil
	case "Local":
		// The host's zone differs between instances: ticks would too.
		return nil, invalid("timezone", `"Local" is not allowed: name an IANA zone such as "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalid("timezone", "%q is not an IANA time zone", name)
	}
	return loc, nil
}

// Next is the first tick strictly after t, in UTC; the zero time when the
// spec has no tick within five years of t.
//
// "@every d" ticks at the whole multiples of d since the Unix epoch
// (1970-01-01T00:00:00Z), whatever the zone: @every 1h fires on the hour,
// @every 24h at midnight UTC. Anchoring on the epoch rather than on the
// time an instance started is what makes every instance compute the same
// ticks.
//
// Other specs are read on the wall clock of the zone. Across daylight-saving
// transitions:
//   - Spring forward: a wall time that does not exist that day (02:30 in
//     Europe/Berlin on the last Sunday of March) is skipped; the spec fires
//     at its next existing match, normally the next day. Specs that fire
//     every hour (hour field "*") lose nothing but the skipped hour's own
//     times: "*/30 * * * *" goes 01:30 CET, 03:00 CEST.
//   - Fall back: a spec with fixed hours fires once for a wall time that
//     happens twice, at its first occurrence (01:30 EDT, not 01:30 EST, in
//     America/New_York on the first Sunday of November). A spec that fires
//     every hour keeps firing on real time through the repeated hour:
//     "0 * * * *" fires at 01:00 EDT, 01:00 EST and 02:00 EST.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		d := int64(s.every / time.Second)
		secs := t.Unix() // floor, t.Nanosecond() aside
		k := secs / d
		if secs < 0 && secs%d != 0 {
			k-- // floor division before the epoch
		}
		return time.Unix((k+1)*d, 0).UTC()
	}
	for range 4 { // one jump leaves a repeated span; the bound is slack
		n := s.spec.Next(t.In(s.spec.Location))
		if n.IsZero() {
			return n
		}
		end, repeated := repeatedUntil(n)
		if !s.wallOnce || !repeated {
			return n.UTC()
		}
		t = end.Add(-time.Nanosecond) // the first tick at or after the span's end
	}
	return time.Time{}
}

// firstAtOrAfter is the first tick at or after t (ticks fall on whole
// seconds).
func (s *Schedule) firstAtOrAfter(t time.Time) time.Time {
	return s.Next(t.Add(-time.Nanosecond))
}

// lastBefore is the latest tick in [lo, hi), or the zero time when there is
// none. It binary-searches whole seconds on firstAtOrAfter, which grows
// with its argument: at most ~40 steps whatever the gap.
func (s *Schedule) lastBefore(lo, hi time.Time) time.Time {
	l := ceilSecond(lo)
	r := ceilSecond(hi) // firstAtOrAfter(r) >= r >= hi
	if !l.Before(r) {
		return time.Time{}
	}
	before := func(t time.Time) bool { n := s.firstAtOrAfter(t); return !n.IsZero() && n.Before(hi) }
	if !before(l) {
		return time.Time{}
	}
	for range 128 {
		gap := int64(r.Sub(l) / time.Second) // l and r are whole seconds
		if gap <= 1 {
			break
		}
		mid := l.Add(time.Duration(gap/2) * time.Second)
		if before(mid) {
			l = mid
		} else {
			r = mid
		}
	}
	return s.firstAtOrAfter(l)
}

func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); c.Before(t) {
		return c.Add(time.Second)
	}
	return t
}

// repeatedUntil reports whether t's wall-clock reading in its location
// happened before, at an earlier instant: t lies in the span after a
// fall-back transition whose wall times repeat those just before it. end
// is the end of that span.
func repeatedUntil(t time.Time) (end time.Time, repeated bool) {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return time.Time{}, false
	}
	_, off := t.Zone()
	_, prevOff := start.Add(-time.Second).Zone()
	if prevOff <= off {
		return time.Time{}, false
	}
	end = start.Add(time.Duration(prevOff-off) * time.Second)
	return end, t.Before(end)
}

// FieldError is an invalid field of an [Entry] (the queue package's type,
// with Index -1). It wraps
// [queue.ErrInvalid], so errors.Is(err, queue.ErrInvalid) holds, and Field
// is the entry's JSON field name: "name", "schedule", "timezone", "queue",
// "kind", "payload", "max_attempts", "missed" or "overlap".
type FieldError = queue.FieldError

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Index: -1, Field: field, Err: fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalid}, args...)...)}
}
