package registry_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
)

// TestSlotMigrationIsOnlyLatency moves the registry's slot to another
// master and back while workers register, refresh, add and drop jobs and
// the list is read: no call fails, nothing is lost.
func TestSlotMigrationIsOnlyLatency(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	pc := testutil.StartCluster(t)
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: pc.Client(), Namespace: ns, DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	reg, err := registry.New(c, registry.Config{TTL: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var errs sync.Map
	fail := func(op string, err error) {
		if err != nil && ctx.Err() == nil {
			errs.Store(op+": "+err.Error(), true)
		}
	}
	const workers = 4
	var done atomic.Bool
	var wg sync.WaitGroup
	rounds := make([]int, workers)
	for w := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("w%d", w)
			for i := 0; !done.Load(); i++ {
				_, err := reg.Register(ctx, registry.Registration{Info: registry.Info{ID: id, Host: "h"}})
				fail("register", err)
				j := registry.JobRef{Queue: "q", ID: fmt.Sprintf("j%d", i)}
				fail("add", reg.Touch(ctx, id, registry.Touch{Queue: "q", Add: []registry.JobRef{j}}))
				fail("drop", reg.Touch(ctx, id, registry.Touch{Drop: []registry.JobRef{j}}))
				_, err = reg.List(ctx, registry.ListOptions{})
				fail("list", err)
				rounds[w] = i
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	slot := testutil.KeySlot("{" + ns + ":workers}")
	home := pc.SlotOwner(slot)
	for _, to := range []string{pc.OtherMaster(slot), home} {
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, pc.MigrateSlot(ctx, testutil.MigrateOptions{Slot: slot, To: to, KeysPerStep: 1, Pause: 50 * time.Millisecond}))
	}
	done.Store(true)
	wg.Wait()
	var reached []string
	errs.Range(func(k, _ any) bool { reached = append(reached, k.(string)); return true })
	require.Empty(t, reached, "no error reaches a caller during a migration")
	p, err := reg.List(ctx, registry.ListOptions{})
	require.NoError(t, err)
	require.Len(t, p.Workers, workers)
	for i, w := range p.Workers {
		require.Equal(t, fmt.Sprintf("w%d", i), w.ID)
		require.Empty(t, w.Jobs)
		require.Equal(t, []string{"q"}, w.Queues)
		require.Positive(t, rounds[i])
	}
}
