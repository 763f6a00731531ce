package cron_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// While tracing is on, each tick's job is enqueued under a span of its
// own, "cron <entry>", the root of the trace the job stores.
func TestTracingEachTickIsATrace(t *testing.T) {
	rec := testutil.RecordSpans(t)
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	require.NoError(t, cron.NewStore(c).Register(b.ctx, cron.Entry{Name: "every", Schedule: "@every 1s", Queue: "ticks", Kind: "tick"}))
	b.scheduler(t, cron.Config{Client: c})
	for range 3 {
		step(t, clock, 1, time.Second)
	}
	parked(t, clock, 1)
	jobs, _, err := c.List(b.ctx, "ticks", queue.ListOptions{Status: queue.StatusPending})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	traces := map[string]bool{}
	for _, j := range jobs {
		sc, ok := tracing.Parse(j.TraceParent)
		require.True(t, ok, "job %s stores %q", j.ID, j.TraceParent)
		traces[sc.TraceID().String()] = true
		var fire, send bool
		for _, s := range testutil.SpansOf(rec, sc.TraceID()) {
			switch s.Name() {
			case "cron every":
				fire = !s.Parent().IsValid()
			case "send ticks":
				send = s.SpanContext().SpanID() == sc.SpanID()
			}
		}
		require.True(t, fire && send, "job %s: its tick's span and its enqueue's", j.ID)
	}
	require.Len(t, traces, 3, "a trace a tick")
}
