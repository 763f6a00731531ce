package cron_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// A pass reads only the entries that are due: with one entry due every
// second, what Redis sends back and the number of commands it runs over
// ten passes are the same with 2,000 entries that are not due as with
// 20. (Reading every entry every pass sent back each idle entry ten
// times.)
func TestSchedulerPassCostIndependentOfEntries(t *testing.T) {
	t.Parallel()
	few, fewCalls := passCost(t, 20)
	many, manyCalls := passCost(t, 2000)
	t.Logf("10 passes: 20 idle entries: %d bytes out, %d commands; 2000: %d bytes, %d commands", few, fewCalls, many, manyCalls)
	require.Equal(t, fewCalls, manyCalls, "commands")
	require.InDelta(t, few, many, 512, "bytes Redis sent")
}

// passCost runs a scheduler over one entry due every second and idle
// entries due at 04:00, on a redis-server of its own, and answers the
// bytes Redis sent and the commands it ran over ten passes.
func passCost(t *testing.T, idle int) (outBytes, calls int64) {
	t.Helper()
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: testutil.StartServer(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	clock := clockwork.NewFakeClockAt(base)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: "cost", Clock: clock, FollowClock: true, DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	entries := []cron.Entry{{Name: "due", Schedule: "@every 1s", Queue: "q", Kind: "tick"}}
	for i := range idle {
		entries = append(entries, cron.Entry{Name: fmt.Sprintf("idle-%05d", i), Schedule: "0 4 * * *",
			Timezone: "Europe/Berlin", Queue: "q", Kind: "report", Payload: json.RawMessage(`{"report":"nightly","to":"ops"}`)})
	}
	require.NoError(t, cron.NewStore(c).Register(ctx, entries...))
	newRunner(t, ctx, cron.Config{Client: c, Logger: slog.New(slog.DiscardHandler)})
	for range 3 { // warm up: the queue made, the scripts loaded
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	out0, calls0 := serverStats(t, rdb)
	for range 10 {
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	out1, calls1 := serverStats(t, rdb)
	st, err := c.Stats(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 13, st.EnqueuedTotal, "one job a pass")
	return out1 - out0, calls1 - calls0
}

// serverStats reads total_net_output_bytes and the sum of the commands'
// calls from INFO.
func serverStats(t *testing.T, rdb *redis.Client) (outBytes, calls int64) {
	t.Helper()
	info, err := rdb.Info(t.Context(), "stats", "commandstats").Result()
	require.NoError(t, err)
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
			outBytes, err = strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
		}
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, fields, _ := strings.Cut(line, ":")
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				calls += n
			}
		}
	}
	return outBytes, calls
}
