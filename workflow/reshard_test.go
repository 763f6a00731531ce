package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The slots of a running workflow's hash and of one of its queues move to
// another master and back, twice, by hand and slowly, while its nodes run
// and a releaser moves it on: every node completes, each released once,
// and no error reaches a caller (a migration is only latency).
func TestWorkflowSlotMigration(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	pc := testutil.StartCluster(t)
	e := newEnv(t, pc.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	queues := []string{"mq-a", "mq-b"}
	nodes := []Node{node("c0", "mq-a")}
	for i := 1; i < 40; i++ { // a chain: one step after another, across the moves
		nodes = append(nodes, node(fmt.Sprintf("c%d", i), queues[i%2], fmt.Sprintf("c%d", i-1)))
	}
	var fan []string
	for i := range 20 {
		fan = append(fan, fmt.Sprintf("f%d", i))
		nodes = append(nodes, node(fan[i], queues[i%2], "c20"))
	}
	nodes = append(nodes, node("join", "mq-a", fan...))
	w, err := e.wf.Enqueue(ctx, Spec{Nodes: nodes})
	require.NoError(t, err)

	var errs sync.Map
	note := func(op string, err error) {
		if err != nil && ctx.Err() == nil {
			errs.Store(op+": "+err.Error(), true)
		}
	}
	var done atomic.Bool
	driving := make(chan struct{})
	go func() {
		defer close(driving)
		for !done.Load() && ctx.Err() == nil {
			e.r.Pass(ctx)
			for _, qn := range queues {
				jobs, err := e.q.Claim(ctx, qn, queue.ClaimOptions{Max: 10, Wait: 20 * time.Millisecond})
				note("claim", err)
				for _, j := range jobs {
					note("complete", e.q.Complete(ctx, qn, j.ID, j.Token, queue.CompleteOptions{Result: json.RawMessage(`1`)}))
				}
			}
		}
	}()

	for _, slot := range []int{testutil.KeySlot("{wf:" + w.ID + "}"), testutil.KeySlot("{mq-a}")} {
		home := pc.SlotOwner(slot)
		for range 2 {
			for _, to := range []string{pc.OtherMaster(slot), home} {
				require.NoError(t, pc.MigrateSlot(ctx, testutil.MigrateOptions{Slot: slot, To: to, KeysPerStep: 1, Pause: 20 * time.Millisecond}))
			}
		}
	}
	require.Eventually(t, func() bool {
		got, err := e.wf.Get(ctx, w.ID)
		note("get", err)
		return err == nil && got.Status == StatusCompleted
	}, time.Minute, 20*time.Millisecond, "the workflow completes")
	done.Store(true)
	<-driving
	var reached []string
	errs.Range(func(k, _ any) bool { reached = append(reached, k.(string)); return true })
	require.Empty(t, reached, "no error reaches a caller during a migration")
	got, err := e.wf.Get(ctx, w.ID)
	require.NoError(t, err)
	for _, n := range got.Nodes {
		require.Equal(t, queue.StatusCompleted, n.Status, n.Name)
		require.Equal(t, 1, e.count(n.JobID, "release"), "node %s released once", n.Name)
	}
}
