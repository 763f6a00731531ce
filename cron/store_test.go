package cron_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
)

func TestStoreCRUD(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	store := cron.NewStore(b.client(t, clock))

	e := cron.Entry{Name: "report", Schedule: "0 9 * * 1-5", Timezone: "Europe/Berlin", Kind: "report.daily",
		Payload: json.RawMessage(`{ "to": "ops" }`)}
	created, err := store.Put(b.ctx, e)
	require.NoError(t, err)
	require.True(t, created)
	created, err = store.Put(b.ctx, e)
	require.NoError(t, err)
	require.False(t, created, "same settings again")

	got, err := store.Get(b.ctx, "report")
	require.NoError(t, err)
	require.Equal(t, cron.Entry{Name: "report", Schedule: "0 9 * * 1-5", Timezone: "Europe/Berlin",
		Queue: queue.DefaultQueue, Kind: "report.daily", Payload: json.RawMessage(`{"to":"ops"}`),
		Missed: cron.MissedSkip, Overlap: cron.OverlapAllow,
		NextRunAt: time.Date(2030, 1, 2, 8, 0, 0, 0, time.UTC)}, got)

	e.Schedule, e.Paused = "@every 1m", true
	created, err = store.Put(b.ctx, e)
	require.NoError(t, err)
	require.False(t, created)
	_, err = store.Put(b.ctx, cron.Entry{Name: "another", Schedule: "@hourly", Kind: "k", Queue: "q2"})
	require.NoError(t, err)

	list, err := store.List(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "another", list[0].Name)
	require.Equal(t, time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC), list[0].NextRunAt)
	require.Equal(t, "report", list[1].Name)
	require.Equal(t, "@every 1m", list[1].Schedule)
	require.True(t, list[1].Paused)
	require.True(t, list[1].NextRunAt.IsZero(), "paused")

	out, err := json.Marshal(list[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"another","schedule":"@hourly","timezone":"UTC","queue":"q2","kind":"k",
		"missed":"skip","overlap":"allow","paused":false,"next_run_at":"2030-01-02T04:00:00Z"}`, string(out))

	require.NoError(t, store.Delete(b.ctx, "report"))
	_, err = store.Get(b.ctx, "report")
	require.ErrorIs(t, err, queue.ErrNotFound)
	require.ErrorIs(t, store.Delete(b.ctx, "report"), queue.ErrNotFound)
	_, err = store.Trigger(b.ctx, "report")
	require.ErrorIs(t, err, queue.ErrNotFound)
	list, err = store.List(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestStoreValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := cron.NewStore(b.client(t, clockwork.NewFakeClockAt(base)))
	good := cron.Entry{Name: "ok", Schedule: "@hourly", Kind: "k"}
	for _, tc := range []struct {
		field string
		edit  func(*cron.Entry)
	}{
		{"name", func(e *cron.Entry) { e.Name = "" }},
		{"name", func(e *cron.Entry) { e.Name = "Upper" }},
		{"name", func(e *cron.Entry) { e.Name = "{tag}" }},
		{"schedule", func(e *cron.Entry) { e.Schedule = "not a spec" }},
		{"schedule", func(e *cron.Entry) { e.Schedule = "" }},
		{"timezone", func(e *cron.Entry) { e.Timezone = "Europe/Atlantis" }},
		{"queue", func(e *cron.Entry) { e.Queue = "a{b}" }},
		{"kind", func(e *cron.Entry) { e.Kind = "" }},
		{"payload", func(e *cron.Entry) { e.Payload = json.RawMessage(`{nope`) }},
		{"max_attempts", func(e *cron.Entry) { e.MaxAttempts = -1 }},
		{"max_attempts", func(e *cron.Entry) { e.MaxAttempts = queue.MaxAttemptsLimit + 1 }},
		{"missed", func(e *cron.Entry) { e.Missed = "all" }},
		{"overlap", func(e *cron.Entry) { e.Overlap = "never" }},
		{"flow_key", func(e *cron.Entry) { e.FlowKey = "a b" }},
		{"flow_key", func(e *cron.Entry) { e.FlowKey = strings.Repeat("k", queue.MaxFlowKeyBytes+1) }},
	} {
		e := good
		tc.edit(&e)
		_, err := store.Put(b.ctx, e)
		var fe *cron.FieldError
		require.ErrorAs(t, err, &fe, tc.field)
		require.Equal(t, tc.field, fe.Field, "%v", err)
		require.True(t, errors.Is(err, queue.ErrInvalid), tc.field)

		err = store.Register(b.ctx, good, e)
		require.ErrorAs(t, err, &fe, tc.field)
		require.Equal(t, tc.field, fe.Field)
	}
	list, err := store.List(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list, "a failed Register stores nothing")

	err = store.Register(b.ctx, good, good)
	var fe *cron.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "name", fe.Field)

	for _, name := range []string{"", "Bad Name"} {
		_, err = store.Get(b.ctx, name)
		require.ErrorIs(t, err, queue.ErrInvalid)
		require.ErrorIs(t, store.Delete(b.ctx, name), queue.ErrInvalid)
	}
}

func TestStoreTrigger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	c := b.client(t, clock)
	store := cron.NewStore(c)
	_, err := store.Put(b.ctx, cron.Entry{Name: "nightly", Schedule: "@daily", Queue: "batch", Kind: "nightly",
		Payload: json.RawMessage(`{"n":1}`), MaxAttempts: 7, Paused: true})
	require.NoError(t, err)

	clock.Advance(90 * time.Second)
	j, err := store.Trigger(b.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, "batch", j.Queue)
	require.Equal(t, "nightly", j.Kind)
	require.Equal(t, 7, j.MaxAttempts)
	require.JSONEq(t, `{"n":1}`, string(j.Payload))
	require.Equal(t, queue.StatusPending, j.Status)

	e, err := store.Get(b.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, j.ID, e.LastJobID)
	require.False(t, e.LastRunAt.Before(base.Add(90*time.Second)), "a trigger runs at Redis's now")
	require.Less(t, e.LastRunAt.Sub(base.Add(90*time.Second)), time.Second)

	j2, err := store.Trigger(b.ctx, "nightly")
	require.NoError(t, err)
	require.NotEqual(t, j.ID, j2.ID, "every trigger is a run of its own")
	st, err := c.Stats(b.ctx, "batch")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Pending)
}

// TestStoreFlowKey: an entry's flow key is kept with it (its JSON's
// flow_key) and given to each of its jobs, a trigger's as a tick's (both
// are made by the same NewJob).
func TestStoreFlowKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := cron.NewStore(b.client(t, clockwork.NewFakeClockAt(base)))
	_, err := store.Put(b.ctx, cron.Entry{Name: "per-tenant", Schedule: "@hourly", Queue: "fl", Kind: "k", FlowKey: "tenant/7"})
	require.NoError(t, err)
	e, err := store.Get(b.ctx, "per-tenant")
	require.NoError(t, err)
	require.Equal(t, "tenant/7", e.FlowKey)
	out, err := json.Marshal(e)
	require.NoError(t, err)
	require.Contains(t, string(out), `"flow_key":"tenant/7"`)

	j, err := store.Trigger(b.ctx, "per-tenant")
	require.NoError(t, err)
	require.Equal(t, "tenant/7", j.FlowKey)

	_, err = store.Put(b.ctx, cron.Entry{Name: "per-tenant", Schedule: "@hourly", Queue: "fl", Kind: "k"})
	require.NoError(t, err)
	e, err = store.Get(b.ctx, "per-tenant")
	require.NoError(t, err)
	require.Empty(t, e.FlowKey, "replaced without one")
	out, err = json.Marshal(e)
	require.NoError(t, err)
	require.NotContains(t, string(out), "flow_key")
}

// An entry whose jobs the queue client would refuse is refused when it is
// written, not dropped at every tick: a payload over the client's
// MaxPayloadBytes is an error wrapping queue.ErrPayloadTooLarge, naming
// "payload", and nothing is stored.
func TestStorePayloadOverCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, err := queue.NewClient(queue.Config{Redis: b.rdb, Namespace: b.ns, Clock: clockwork.NewFakeClockAt(base), FollowClock: true,
		DisableEvents: true, MaxPayloadBytes: 64})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	store := cron.NewStore(c)

	atCap := json.RawMessage(`{"s":"` + strings.Repeat("x", 64-8) + `"}`)
	require.Len(t, atCap, 64)
	over := json.RawMessage(`{"s":"` + strings.Repeat("x", 64-7) + `"}`)
	e := cron.Entry{Name: "big", Schedule: "@every 1s", Kind: "k", Payload: over}

	_, err = store.Put(b.ctx, e)
	require.ErrorIs(t, err, queue.ErrPayloadTooLarge)
	var fe *cron.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "payload", fe.Field)
	require.Equal(t, -1, fe.Index)

	err = store.Register(b.ctx, cron.Entry{Name: "fine", Schedule: "@hourly", Kind: "k"}, e)
	require.ErrorIs(t, err, queue.ErrPayloadTooLarge)
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "payload", fe.Field)
	list, err := store.List(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list, "nothing stored")

	// The cap counts the payload as enqueued: compacted.
	e.Payload = json.RawMessage(`{ "s" : "` + strings.Repeat("x", 64-8) + `" }`)
	created, err := store.Put(b.ctx, e)
	require.NoError(t, err)
	require.True(t, created)
	got, err := store.Get(b.ctx, "big")
	require.NoError(t, err)
	require.Equal(t, atCap, got.Payload)
	st, err := c.Stats(b.ctx, queue.DefaultQueue)
	require.NoError(t, err)
	require.Zero(t, st.EnqueuedTotal, "checking an entry enqueues nothing")
}

// Each entry that fires has a cursor in the due index, set by Put to the
// first tick after the change: a pause takes it out, unpausing puts it
// back after the unpause, and Delete takes it out.
func TestStoreIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(base)
	store := cron.NewStore(b.client(t, clock))
	cursor := func(name string) (time.Time, bool) {
		t.Helper()
		ms, err := b.rdb.ZScore(b.ctx, cron.DueKey(b.ns), name).Result()
		if errors.Is(err, redis.Nil) {
			return time.Time{}, false
		}
		require.NoError(t, err)
		return time.UnixMilli(int64(ms)).UTC(), true
	}
	e := cron.Entry{Name: "report", Schedule: "0 9 * * *", Timezone: "Europe/Berlin", Kind: "k"}
	_, err := store.Put(b.ctx, e)
	require.NoError(t, err)
	at, ok := cursor("report")
	require.True(t, ok)
	require.Equal(t, time.Date(2030, 1, 2, 8, 0, 0, 0, time.UTC), at) // 09:00 CET

	clock.Advance(6 * time.Hour) // 09:00 UTC
	_, err = store.Put(b.ctx, e)
	require.NoError(t, err)
	at, _ = cursor("report")
	require.Equal(t, time.Date(2030, 1, 2, 8, 0, 0, 0, time.UTC), at, "unchanged: the cursor stays")

	e.Paused = true
	_, err = store.Put(b.ctx, e)
	require.NoError(t, err)
	_, ok = cursor("report")
	require.False(t, ok, "paused")
	e.Paused = false
	_, err = store.Put(b.ctx, e)
	require.NoError(t, err)
	at, _ = cursor("report")
	require.Equal(t, time.Date(2030, 1, 3, 8, 0, 0, 0, time.UTC), at, "after the unpause")

	require.NoError(t, store.Delete(b.ctx, "report"))
	_, ok = cursor("report")
	require.False(t, ok, "deleted")
}

// List reads a large set of entries a bounded number at a time: no reply
// of Redis carries more than about a thousand of them (HGETALL answered
// all at once, holding Redis the while).
func TestStoreListBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := cron.NewStore(b.client(t, clockwork.NewFakeClockAt(base)))
	const n = 2500
	pipe := b.rdb.Pipeline()
	for i := range n {
		// As a chronoq before the due index stored them: List needs no
		// index.
		pipe.HSet(b.ctx, b.ns+":cron", fmt.Sprintf("e%05d", i),
			`{"name":"`+fmt.Sprintf("e%05d", i)+`","schedule":"@hourly","timezone":"UTC","queue":"default","kind":"k","missed":"skip","overlap":"allow","paused":false,"updated_at_ms":0}`)
	}
	_, err := pipe.Exec(b.ctx)
	require.NoError(t, err)
	var largest atomic.Int64
	b.rdb.AddHook(replySizeHook{&largest})
	list, err := store.List(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, n)
	for i, e := range list {
		require.Equal(t, fmt.Sprintf("e%05d", i), e.Name)
	}
	require.LessOrEqual(t, largest.Load(), int64(1100), "entries in one reply")
}

// replySizeHook keeps the largest number of elements of a reply.
type replySizeHook struct{ max *atomic.Int64 }

func (h replySizeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h replySizeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.note(cmd)
		return err
	}
}

func (h replySizeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.note(c)
		}
		return err
	}
}

func (h replySizeHook) note(cmd redis.Cmder) {
	var n int
	switch c := cmd.(type) {
	case *redis.MapStringStringCmd:
		n = len(c.Val())
	case *redis.ScanCmd:
		keys, _ := c.Val()
		n = len(keys) / 2
	}
	for {
		cur := h.max.Load()
		if int64(n) <= cur || h.max.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}
