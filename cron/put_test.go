package cron_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
)

// Distinct new entries put at once by several clients never conflict:
// cron_put.lua compares the digest of the one entry it replaces, not the
// whole hash.
func TestStorePutDistinctConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	const clients, each = 8, 375 // 3,000 entries
	stores := make([]*cron.Store, clients)
	for i := range stores {
		stores[i] = cron.NewStore(b.client(t, clock))
	}
	var wg sync.WaitGroup
	var created atomic.Int64
	errs := make(chan error, clients*each)
	for i, store := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				ok, err := store.Put(b.ctx, cron.Entry{Name: fmt.Sprintf("e-%d-%d", i, j), Schedule: "@hourly", Kind: "k"})
				if err != nil {
					errs <- err
					continue
				}
				if ok {
					created.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, clients*each, created.Load())
	list, err := stores[0].List(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, clients*each)
}

func TestStoreMaxEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	client := b.client(t, clock)
	require.Equal(t, cron.DefaultMaxEntries, cron.NewStore(client).MaxEntries())
	require.Equal(t, cron.DefaultMaxEntries, cron.NewStore(client, cron.WithMaxEntries(0)).MaxEntries())
	store := cron.NewStore(client, cron.WithMaxEntries(3))
	require.Equal(t, 3, store.MaxEntries())
	entry := func(name, sched string) cron.Entry { return cron.Entry{Name: name, Schedule: sched, Kind: "k"} }
	for _, name := range []string{"a", "b", "c"} {
		created, err := store.Put(b.ctx, entry(name, "@hourly"))
		require.NoError(t, err)
		require.True(t, created)
	}
	_, err := store.Put(b.ctx, entry("d", "@hourly"))
	require.ErrorIs(t, err, cron.ErrTooManyEntries)
	require.ErrorIs(t, err, queue.ErrConflict)
	var tm *cron.TooManyEntriesError
	require.True(t, errors.As(err, &tm))
	require.Equal(t, 3, tm.Max)
	require.Contains(t, err.Error(), "cap of 3 entries")
	require.Contains(t, err.Error(), "--max-cron-entries")
	_, err = store.Get(b.ctx, "d")
	require.ErrorIs(t, err, queue.ErrNotFound, "the refused entry is not stored")

	created, err := store.Put(b.ctx, entry("a", "@daily"))
	require.NoError(t, err, "replacing an entry at the cap")
	require.False(t, created)
	require.NoError(t, store.Delete(b.ctx, "b"))
	created, err = store.Put(b.ctx, entry("d", "@hourly"))
	require.NoError(t, err, "room made by a delete")
	require.True(t, created)
}

// Concurrent new entries past the cap: exactly the cap is stored.
func TestStoreMaxEntriesConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	const limit, clients, each = 10, 4, 10
	var wg sync.WaitGroup
	var created, refused atomic.Int64
	errs := make(chan error, clients*each)
	for i := range clients {
		store := cron.NewStore(b.client(t, clock), cron.WithMaxEntries(limit))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				_, err := store.Put(b.ctx, cron.Entry{Name: fmt.Sprintf("e-%d-%d", i, j), Schedule: "@hourly", Kind: "k"})
				switch {
				case err == nil:
					created.Add(1)
				case errors.Is(err, cron.ErrTooManyEntries):
					refused.Add(1)
				default:
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, limit, created.Load())
	require.EqualValues(t, clients*each-limit, refused.Load())
	list, err := cron.NewStore(b.client(t, clock)).List(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, limit)
}
