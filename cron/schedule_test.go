package cron_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
)

func TestParse(t *testing.T) {
	t.Parallel()
	from := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		spec, zone string
		want       time.Time // the first tick after from
	}{
		{"*/5 * * * *", "", time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)},
		{"30 */10 * * * *", "", time.Date(2030, 1, 2, 3, 10, 30, 0, time.UTC)}, // leading seconds
		{"0 9 * * 1-5", "Europe/Berlin", time.Date(2030, 1, 2, 8, 0, 0, 0, time.UTC)},
		{"@hourly", "", time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC)},
		{"@daily", "America/New_York", time.Date(2030, 1, 2, 5, 0, 0, 0, time.UTC)},
		{"@weekly", "UTC", time.Date(2030, 1, 6, 0, 0, 0, 0, time.UTC)},
		{"@every 1m", "Asia/Tokyo", time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)},
		{"@every 1h30m", "", time.Date(2030, 1, 2, 4, 30, 0, 0, time.UTC)}, // multiples of 90 min since the epoch
		{"  @every 10s ", "", time.Date(2030, 1, 2, 3, 4, 10, 0, time.UTC)},
	} {
		s, err := cron.Parse(tc.spec, tc.zone)
		require.NoError(t, err, tc.spec)
		require.Equal(t, tc.want, s.Next(from), tc.spec)
		require.Equal(t, tc.want, s.Next(from.Add(999*time.Millisecond)), tc.spec)
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, zone, field string }{
		{"", "", "schedule"},
		{"* * *", "", "schedule"},
		{"61 * * * *", "", "schedule"},
		{"* * * * * * *", "", "schedule"},
		{"0 0 30 2 *", "", "schedule"}, // never fires
		{"@every", "", "schedule"},
		{"@every 500ms", "", "schedule"},
		{"@every 1.5s", "", "schedule"},
		{"@every -1s", "", "schedule"},
		{"@sometimes", "", "schedule"},
		{"CRON_TZ=Europe/Berlin 0 9 * * *", "", "schedule"},
		{"TZ=UTC 0 9 * * *", "", "schedule"},
		{"0 9 * * *", "Mars/Olympus", "timezone"},
		{"0 9 * * *", "Local", "timezone"},
		{"0 9 * * *", "utc ", "timezone"},
	} {
		_, err := cron.Parse(tc.spec, tc.zone)
		var fe *cron.FieldError
		require.ErrorAs(t, err, &fe, "%q %q", tc.spec, tc.zone)
		require.Equal(t, tc.field, fe.Field, "%q %q: %v", tc.spec, tc.zone, err)
		require.True(t, errors.Is(err, queue.ErrInvalid), "%q %q", tc.spec, tc.zone)
	}
}

// @every ticks are the multiples of the duration since the Unix epoch, so
// every instance finds the same ones wherever it starts.
func TestScheduleEveryIsAnchored(t *testing.T) {
	t.Parallel()
	s, err := cron.Parse("@every 7s", "")
	require.NoError(t, err)
	a := s.Next(time.Date(2030, 1, 2, 3, 4, 5, 123, time.UTC))
	b := s.Next(time.Date(2030, 1, 2, 3, 4, 6, 0, time.UTC))
	require.Equal(t, a, b)
	require.Zero(t, a.Unix()%7)
	require.Equal(t, a.Add(7*time.Second), s.Next(a))
}

// The daylight-saving behaviour documented on Schedule.Next.
func TestScheduleDST(t *testing.T) {
	t.Parallel()
	utc := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2030, mo, d, h, mi, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name, spec, zone string
		from             time.Time
		want             []time.Time // the next ticks, in order
	}{
		{
			// 2030-03-31 02:00 CET -> 03:00 CEST: 02:30 does not exist.
			name: "Berlin spring forward skips the missing time",
			spec: "30 2 * * *", zone: "Europe/Berlin", from: utc(3, 29, 12, 0),
			want: []time.Time{utc(3, 30, 1, 30), utc(4, 1, 0, 30), utc(4, 2, 0, 30)},
		},
		{
			name: "Berlin spring forward, 02:00 too",
			spec: "0 2 * * *", zone: "Europe/Berlin", from: utc(3, 30, 12, 0),
			want: []time.Time{utc(4, 1, 0, 0)},
		},
		{
			name: "Berlin spring forward, every 30 min keeps real time",
			spec: "*/30 * * * *", zone: "Europe/Berlin", from: utc(3, 31, 0, 0),
			want: []time.Time{utc(3, 31, 0, 30), utc(3, 31, 1, 0), utc(3, 31, 1, 30)}, // 01:30 CET, 03:00 CEST, 03:30 CEST
		},
		{
			// 2030-10-27 03:00 CEST -> 02:00 CET: 02:30 happens twice.
			name: "Berlin fall back fires once",
			spec: "30 2 * * *", zone: "Europe/Berlin", from: utc(10, 26, 12, 0),
			want: []time.Time{utc(10, 27, 0, 30), utc(10, 28, 1, 30)},
		},
		{
			// 2030-03-10 02:00 EST -> 03:00 EDT.
			name: "New York spring forward skips the missing time",
			spec: "30 2 * * *", zone: "America/New_York", from: utc(3, 9, 12, 0),
			want: []time.Time{utc(3, 11, 6, 30)},
		},
		{
			// 2030-11-03 02:00 EDT -> 01:00 EST: 01:30 happens twice.
			name: "New York fall back fires once, at the first 01:30",
			spec: "30 1 * * *", zone: "America/New_York", from: utc(11, 2, 12, 0),
			want: []time.Time{utc(11, 3, 5, 30), utc(11, 4, 6, 30)},
		},
		{
			name: "New York fall back, fixed minutes in a fixed hour",
			spec: "*/20 1 * * *", zone: "America/New_York", from: utc(11, 3, 4, 0),
			want: []time.Time{utc(11, 3, 5, 0), utc(11, 3, 5, 20), utc(11, 3, 5, 40), utc(11, 4, 6, 0)},
		},
		{
			name: "New York fall back, hourly keeps real time",
			spec: "0 * * * *", zone: "America/New_York", from: utc(11, 3, 4, 30),
			want: []time.Time{utc(11, 3, 5, 0), utc(11, 3, 6, 0), utc(11, 3, 7, 0)}, // 01:00 EDT, 01:00 EST, 02:00 EST
		},
		{
			name: "New York fall back, from inside the repeated hour",
			spec: "30 1 * * *", zone: "America/New_York", from: utc(11, 3, 6, 0), // 01:00 EST
			want: []time.Time{utc(11, 4, 6, 30)},
		},
	} {
		s, err := cron.Parse(tc.spec, tc.zone)
		require.NoError(t, err, tc.name)
		var got []time.Time
		at := tc.from
		for range tc.want {
			at = s.Next(at)
			got = append(got, at)
		}
		require.Equal(t, tc.want, got, tc.name)
	}
}
