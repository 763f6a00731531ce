package api

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzAppendString holds the hand-written JSON string escaping to
// encoding/json's, byte for byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x1f\x7f", "<a&b>", "\u2028\u2029", "é日本", "\xff\xfe", "a\xc3", "\t\n\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1, 2, 0.2, 1.5, 100, 1e-7, 1e21, 123456789.125, math.SmallestNonzeroFloat64, -0.5} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Errorf("appendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

// appendTime and appendDuration write by hand what fmtTime and
// fmtDuration write through the time package: the same text.
func TestAppendTimeAsFmtTime(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		time.Date(2026, 11, 25, 10, 5, 0, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 6, 30, 23, 30, 0, 123_456_789, time.FixedZone("x", 5*3600+1800)),
		time.Unix(0, 0),
		{},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		times = append(times, time.Unix(r.Int64N(400_000_000_000)-200_000_000_000, r.Int64N(1e9)).In(time.FixedZone("y", int(r.Int64N(50_000))-25_000)))
	}
	for _, tm := range times {
		want := "null"
		if s := fmtTime(tm); s != nil {
			want = strconv.Quote(*s)
		}
		require.Equal(t, want, string(appendTime(nil, tm)), "%v", tm)
	}
}

func TestAppendDurationAsFmtDuration(t *testing.T) {
	t.Parallel()
	durs := []time.Duration{0, 1, time.Millisecond, 1500 * time.Millisecond, time.Second, 30 * time.Second, time.Minute,
		90 * time.Second, time.Hour, time.Hour + 5*time.Second, time.Hour + time.Minute, 25 * time.Hour, -time.Second,
		1<<63 - 1, -1 << 63, 2562047 * time.Hour}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		durs = append(durs, time.Duration(r.Int64N(400_000))*time.Second, time.Duration(r.Int64())*time.Second, time.Duration(r.Int64()))
	}
	for _, d := range durs {
		require.Equal(t, strconv.Quote(fmtDuration(d)), string(appendDuration(nil, d)), "%d", int64(d))
	}
}
