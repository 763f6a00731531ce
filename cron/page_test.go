package cron_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
)

func TestStoreListPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	store := cron.NewStore(b.client(t, clock))

	p, err := store.ListPage(b.ctx, cron.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, p.Entries)
	require.Empty(t, p.Next)

	const n = 7
	var want []string
	for i := range n {
		name := fmt.Sprintf("e%02d", n-1-i) // put out of order
		_, err := store.Put(b.ctx, cron.Entry{Name: name, Schedule: "@hourly", Kind: "k"})
		require.NoError(t, err)
		want = append([]string{name}, want...)
	}
	var got []string
	cursor := ""
	for range n { // at most n pages
		p, err := store.ListPage(b.ctx, cron.ListOptions{Cursor: cursor, Limit: 3})
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Entries), 3)
		for _, e := range p.Entries {
			got = append(got, e.Name)
			require.False(t, e.NextRunAt.IsZero(), "an entry as Get reads it")
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	require.Equal(t, want, got, "every entry once, by name")

	p, err = store.ListPage(b.ctx, cron.ListOptions{Limit: n})
	require.NoError(t, err)
	require.Len(t, p.Entries, n)
	require.Empty(t, p.Next, "a page that holds the rest is the last")
	p, err = store.ListPage(b.ctx, cron.ListOptions{Cursor: "e03"})
	require.NoError(t, err)
	require.Len(t, p.Entries, 3, "after a name that is gone too")
	require.Equal(t, "e04", p.Entries[0].Name)

	for _, o := range []cron.ListOptions{{Limit: -1}, {Limit: cron.MaxListLimit + 1}, {Cursor: "Not A Name"}} {
		_, err := store.ListPage(b.ctx, o)
		require.ErrorIs(t, err, queue.ErrInvalid, "%+v", o)
	}
}
