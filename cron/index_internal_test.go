package cron

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Put and Delete write an entry and its index in one MULTI, and
// cron_advance.lua reads a version and moves a cursor: on a Redis Cluster
// their keys must sit in one slot, as cron_record.lua's must.
func TestIndexKeysShareASlot(t *testing.T) {
	t.Parallel()
	ns := "chronoq"
	slot := testutil.KeySlot(entriesKey(ns))
	for _, k := range []string{dueKey(ns), versionsKey(ns), seqKey(ns)} {
		require.Equal(t, slot, testutil.KeySlot(k), k)
	}
	require.Equal(t, testutil.KeySlot(runKey(ns, "e")), testutil.KeySlot(ticksKey(ns, "e")))
}

// A cursor moves only forward, only while the entry's version is the one
// the move was planned from, only past ticks Redis's clock has reached,
// and never comes back once the entry left the index.
func TestAdvanceFencedByVersion(t *testing.T) {
	t.Parallel()
	ctx, rdb, ns := t.Context(), testutil.Redis(t), testutil.Namespace(t)
	base := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, Clock: clockwork.NewFakeClockAt(base), FollowClock: true, DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := NewStore(c)
	e := Entry{Name: "e", Schedule: "@every 1s", Kind: "k"}
	_, err = s.Put(ctx, e)
	require.NoError(t, err)
	version := func() string {
		v, err := rdb.HGet(ctx, versionsKey(ns), "e").Result()
		require.NoError(t, err)
		return v
	}
	cursor := func() time.Time {
		ms, err := rdb.ZScore(ctx, dueKey(ns), "e").Result()
		require.NoError(t, err)
		return time.UnixMilli(int64(ms)).UTC()
	}
	sec := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	v1 := version()
	require.Equal(t, sec(1), cursor())

	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v1, cursor: sec(5)}}))
	require.Equal(t, sec(5), cursor())
	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v1, cursor: sec(3)}}))
	require.Equal(t, sec(5), cursor(), "never back")
	// Redis's clock reads base (the fake clock): ticks it has not reached
	// are not handed out, whatever the caller planned.
	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v1, through: sec(5), cursor: sec(6)}}))
	require.Equal(t, sec(5), cursor(), "a tick not due by Redis's clock")
	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v1, through: base, cursor: sec(6)}}))
	require.Equal(t, sec(6), cursor())

	e.Schedule = "@every 2s" // a change: a new version, the cursor after it
	_, err = s.Put(ctx, e)
	require.NoError(t, err)
	v2 := version()
	require.NotEqual(t, v1, v2)
	require.Equal(t, sec(2), cursor())
	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v1, cursor: sec(60)}}))
	require.Equal(t, sec(2), cursor(), "planned from the old settings")

	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v2}}))
	_, err = rdb.ZScore(ctx, dueKey(ns), "e").Result()
	require.Error(t, err, "never fires again: out of the index")
	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v2, cursor: sec(10)}}))
	n, err := rdb.ZCard(ctx, dueKey(ns)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a move never brings an entry back")

	// Unchanged settings keep their version and cursor; Delete drops both.
	e.Schedule = "@every 1s"
	_, err = s.Put(ctx, e)
	require.NoError(t, err)
	v3 := version()
	require.Equal(t, sec(1), cursor())
	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v3, cursor: sec(4)}}))
	created, err := s.Put(ctx, e)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, v3, version())
	require.Equal(t, sec(4), cursor())
	require.NoError(t, s.Delete(ctx, "e"))
	for _, k := range []string{versionsKey(ns), dueKey(ns)} {
		n, err := rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		require.Zero(t, n, k)
	}
	require.NoError(t, s.advance(ctx, []advanced{{name: "e", version: v3, cursor: sec(9)}}))
	n, err = rdb.ZCard(ctx, dueKey(ns)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a deleted entry stays out")
}
