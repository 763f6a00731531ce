package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// A busy queue's slot moves to another master and back, slowly and by
// hand (IMPORTING/MIGRATING, MIGRATE two keys a step, SETSLOT NODE),
// twice, while producers, a promoter, workers (claiming, failing once,
// completing, heartbeating, and waiting in blocking claims) and a
// reclaimer run on the real clock. Every job completes, none is lost or
// run twice after a complete, and no error reaches a caller: a migration
// is only latency. Some jobs require labels (one label set first used
// half-way, while the slot may be moving): each runs on a worker that has
// them. Some have flow keys, two jobs of a key in flight at most: never
// more are.
func TestSlotMigrationLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	pc := testutil.StartCluster(t)
	const q, jobs = "busy", 600
	ns := testutil.Namespace(t)
	newClient := func() *queue.Client {
		c, err := queue.NewClient(queue.Config{Redis: pc.Client(), Namespace: ns, DisableEvents: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	producer, worker := newClient(), newClient()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := producer.SetFlowLimits(ctx, q, queue.FlowLimits{MaxInFlight: 2})
	require.NoError(t, err)

	var errs sync.Map // what reached a caller: op -> error
	fail := func(op string, err error) {
		if err != nil && ctx.Err() == nil {
			errs.Store(op+": "+err.Error(), true)
		}
	}
	p, err := delayed.NewPromoter(delayed.Config{Source: producer.Source(), Queues: []string{q}, MaxSleep: 50 * time.Millisecond})
	require.NoError(t, err)
	promoting := lifecycle.Start(ctx, p)
	defer func() { require.NoError(t, promoting.Stop(context.Background())) }()
	r, err := queue.NewReclaimer(queue.ReclaimerConfig{Client: worker, Queues: []string{q}, Interval: 100 * time.Millisecond})
	require.NoError(t, err)
	reclaiming := lifecycle.Start(ctx, r)
	defer func() { require.NoError(t, reclaiming.Stop(context.Background())) }()

	// Producers: one job a call, a third of them delayed, with a batch now
	// and then.
	var enqueued sync.Map
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := w; i < jobs; i += 3 {
				nj := queue.NewJob{Queue: q, Kind: "k", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Labels: labelsOf(i), FlowKey: flowOf(i)}
				if i%3 == 0 {
					nj.Delay = time.Duration(i%7) * 50 * time.Millisecond
				}
				if i%50 == 0 {
					out, err := producer.EnqueueBatch(ctx, []queue.NewJob{nj, nj})
					fail("enqueue batch", err)
					for _, e := range out {
						enqueued.Store(e.Job.ID, true)
					}
					continue
				}
				e, err := producer.Enqueue(ctx, nj)
				fail("enqueue", err)
				if err == nil {
					enqueued.Store(e.Job.ID, true)
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}

	// Workers: the first attempt of every seventh job fails and retries.
	// Two of them have labels.
	workerLabels := [][]string{{"gpu", "linux", "late"}, {"gpu", "linux"}, nil, nil}
	var misrouted atomic.Int64
	// the flow keys' jobs claimed and not yet ended, and the most at once
	var flowMu sync.Mutex
	inFlight, mostInFlight := map[string]int{}, 0
	flowStep := func(key string, d int) {
		if key == "" {
			return
		}
		flowMu.Lock()
		defer flowMu.Unlock()
		inFlight[key] += d
		mostInFlight = max(mostInFlight, inFlight[key])
	}
	var completed sync.Map
	var doubles atomic.Int64
	var done atomic.Bool
	var workers sync.WaitGroup
	for w := range 4 {
		workers.Go(func() {
			for !done.Load() && ctx.Err() == nil {
				got, err := worker.Claim(ctx, q, queue.ClaimOptions{Max: 5, Wait: time.Duration(w%2) * 200 * time.Millisecond,
					Labels: workerLabels[w]})
				fail("claim", err)
				for _, j := range got {
					flowStep(j.FlowKey, 1)
				}
				for _, j := range got {
					for _, l := range j.Labels {
						if !slices.Contains(workerLabels[w], l) {
							misrouted.Add(1)
						}
					}
					if j.Attempts == 1 && j.Fence%7 == 0 {
						flowStep(j.FlowKey, -1) // before: its slot is free once the fail lands
						_, err := worker.Fail(ctx, q, j.ID, j.Token, queue.FailOptions{Error: "once", RetryAt: time.Now().Add(20 * time.Millisecond)})
						fail("fail", err)
						continue
					}
					_, err := worker.Heartbeat(ctx, q, j.ID, j.Token, queue.HeartbeatOptions{})
					fail("heartbeat", err)
					flowStep(j.FlowKey, -1)
					fail("complete", worker.Complete(ctx, q, j.ID, j.Token, queue.CompleteOptions{}))
					if _, dup := completed.LoadOrStore(j.ID, true); dup {
						doubles.Add(1)
					}
				}
			}
		})
	}

	// The migrations, there and back, twice.
	slot := testutil.KeySlot("{" + q + "}")
	home := pc.SlotOwner(slot)
	for range 2 {
		other := pc.OtherMaster(slot)
		for _, to := range []string{other, home} {
			time.Sleep(100 * time.Millisecond)
			require.NoError(t, pc.MigrateSlot(ctx, testutil.MigrateOptions{Slot: slot, To: to, KeysPerStep: 2, Pause: 30 * time.Millisecond}))
		}
	}
	wg.Wait()

	count := func(m *sync.Map) int {
		n := 0
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	require.Eventually(t, func() bool { return count(&completed) >= count(&enqueued) }, time.Minute, 20*time.Millisecond,
		"every job completes")
	done.Store(true)
	workers.Wait()
	var reached []string
	errs.Range(func(k, _ any) bool { reached = append(reached, k.(string)); return true })
	require.Empty(t, reached, "no error reaches a caller during a migration")
	enqueued.Range(func(id, _ any) bool {
		_, ok := completed.Load(id)
		require.True(t, ok, "job %s lost", id)
		return true
	})
	require.Zero(t, doubles.Load(), "a completed job never runs again")
	require.Zero(t, misrouted.Load(), "a job runs only on a worker with its labels")
	require.LessOrEqual(t, mostInFlight, 2, "a flow key's jobs in flight at once")
	require.Positive(t, mostInFlight, "jobs with flow keys ran")
	s, err := producer.Stats(ctx, q)
	require.NoError(t, err)
	require.Zero(t, s.Pending+s.Scheduled+s.Processing)
	require.Equal(t, int64(count(&enqueued)), s.CompletedTotal)
}

// flowOf is the flow key of the reshard test's job i: one of four for a
// job without labels, every fifth.
func flowOf(i int) string {
	if i%5 == 4 {
		return fmt.Sprintf("t%d", i%4)
	}
	return ""
}

// labelsOf are the labels the reshard test's job i requires: none for
// most, two sets from the start, and one first used half-way.
func labelsOf(i int) []string {
	switch {
	case i%5 == 1:
		return []string{"gpu"}
	case i%5 == 2:
		return []string{"gpu", "linux"}
	case i%5 == 3 && i > 300:
		return []string{"late"}
	}
	return nil
}
