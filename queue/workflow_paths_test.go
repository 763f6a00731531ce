package queue_test

import (
	"context"
	"github.com/chronoq/chronoq/internal/plumbing"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Every path that ends a workflow node's job leaves one outbox entry with
// its outcome, in the same script, and no other path leaves any: complete,
// a failure to the dead set, a cancel while waiting or pending, a cancel
// requested while processing and ended by the worker (cancel, fail or
// release), a lapsed lease on the last attempt, or with a cancel
// requested. A failure that retries leaves none.
func TestEveryEndOfANodeLeavesAnOutboxEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testutil.FakeClock()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true})
	require.NoError(t, err)
	defer c.Close()
	const q = "ends"
	// node jobs, released at once (no workflow hash is needed for this)
	newNode := func(name string, attempts int) string {
		p, err := plumbing.Of(c).PrepareNode(queue.NewJob{Queue: q, Kind: "k", MaxAttempts: attempts, Visibility: time.Second}, "wf1", name)
		require.NoError(t, err)
		require.NoError(t, plumbing.Of(c).AddNodeJobs(ctx, []plumbing.PreparedNode{p}))
		res, err := plumbing.Of(c).ApplyNodeActions(ctx, []plumbing.NodeAction{{Mode: "release", Queue: q, JobID: p.ID, Node: name, Upstream: `{"x":1}`}}, 0)
		require.NoError(t, err)
		require.Equal(t, 1, res[0].Code)
		return p.ID
	}
	claim := func(id string) *queue.Job {
		jobs, err := c.Claim(ctx, q, queue.ClaimOptions{})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, id, jobs[0].ID)
		require.JSONEq(t, `{"x":1}`, string(jobs[0].Upstream))
		return jobs[0]
	}
	want := map[string]queue.Status{}

	id := newNode("complete", 1)
	j := claim(id)
	require.NoError(t, c.Complete(ctx, q, id, j.Token, queue.CompleteOptions{Result: []byte(`{"ok":true}`)}))
	want[id] = queue.StatusCompleted

	id = newNode("dies", 2)
	j = claim(id)
	fr, err := c.Fail(ctx, q, id, j.Token, queue.FailOptions{Error: "once", RetryAt: clock.Now()}) // a retry: no entry
	require.NoError(t, err)
	require.NotEqual(t, queue.StatusDead, fr.Status)
	j = claim(id)
	_, err = c.Fail(ctx, q, id, j.Token, queue.FailOptions{Error: "twice"})
	require.NoError(t, err)
	want[id] = queue.StatusDead

	id = newNode("pending-canceled", 1)
	_, err = c.Cancel(ctx, q, id)
	require.NoError(t, err)
	want[id] = queue.StatusCanceled

	for _, end := range []string{"cancel", "fail", "release"} {
		id = newNode("processing-canceled-by-"+end, 3)
		j = claim(id)
		_, err = c.Cancel(ctx, q, id) // requested
		require.NoError(t, err)
		switch end {
		case "cancel":
			require.NoError(t, c.CancelClaimed(ctx, q, id, j.Token))
		case "fail":
			_, err = c.Fail(ctx, q, id, j.Token, queue.FailOptions{Error: "stopped"})
			require.NoError(t, err)
		case "release":
			require.NoError(t, c.Release(ctx, q, id, j.Token))
		}
		want[id] = queue.StatusCanceled
	}

	lapsed := newNode("lease-lapsed", 1)
	claim(lapsed)
	asked := newNode("lease-lapsed-cancel-asked", 3)
	claim(asked)
	_, err = c.Cancel(ctx, q, asked)
	require.NoError(t, err)
	clock.Advance(2 * time.Second)
	_, err = c.Reclaim(ctx, q)
	require.NoError(t, err)
	want[lapsed], want[asked] = queue.StatusDead, queue.StatusCanceled

	es, next, _, err := plumbing.Of(c).ReadOutbox(ctx, q, "0", 100)
	require.NoError(t, err)
	require.Equal(t, "0", next)
	got := map[string]queue.Status{}
	for _, e := range es {
		got[e.JobID] = queue.Status(e.Outcome)
		require.Len(t, e.Refs, 1)
		require.Equal(t, "wf1", e.Refs[0].ID)
		require.Equal(t, int64(0), e.Refs[0].Gen)
		if queue.Status(e.Outcome) == queue.StatusCompleted {
			require.JSONEq(t, `{"ok":true}`, string(e.Result))
		}
		if e.Refs[0].Node == "dies" {
			require.Equal(t, "twice", e.Error)
		}
	}
	require.Equal(t, want, got)
	due, err := plumbing.Of(c).OutboxDue(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []string{q}, due, "the outbox index names the queue")
	n, err := plumbing.Of(c).AckOutbox(ctx, q, es)
	require.NoError(t, err)
	require.Equal(t, len(es), n)
	es, _, _, err = plumbing.Of(c).ReadOutbox(ctx, q, "0", 100)
	require.NoError(t, err)
	require.Empty(t, es)
}
