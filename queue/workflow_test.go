package queue_test

import (
	"context"
	"github.com/chronoq/chronoq/internal/store"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// A record written before the workflow field existed (two fields shorter:
// workflow and watchers)
// reads with no workflow, and claims, completes and fails as any job,
// leaving nothing in the outbox.
func TestRecordWithoutWorkflowField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testutil.Redis(t)
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns})
	require.NoError(t, err)
	defer c.Close()
	keys := store.QueueKeys(ns, "old").All()
	jobsKey, outboxKey := keys[1], ""
	for _, k := range keys {
		if strings.HasSuffix(k, ":wfout") {
			outboxKey = k
		}
	}
	require.NotEmpty(t, outboxKey)

	var ids []string
	for range 2 {
		e, err := c.Enqueue(ctx, queue.NewJob{Queue: "old", Kind: "k", MaxAttempts: 1})
		require.NoError(t, err)
		ids = append(ids, e.Job.ID)
		rec, err := rdb.HGet(ctx, jobsKey, e.Job.ID).Result()
		require.NoError(t, err)
		// Stored without its trailing empty fields, its payload inline:
		// written again as the version before workflows wrote it, every
		// field but workflow and watchers, the status spelled out, the
		// payload in the data hash.
		require.Less(t, strings.Count(rec, "\x00"), queue.NRec-2, "a job of no workflow, watched by none, has neither field: %q", rec)
		f, payload := queue.SpelledRecord(rec)
		require.Equal(t, "{}", payload)
		require.NoError(t, rdb.HSet(ctx, jobsKey, e.Job.ID, strings.Join(f[:queue.NRec-2], "\x00")).Err())
		require.NoError(t, rdb.HSet(ctx, keys[2], e.Job.ID, payload).Err())
	}
	j, err := c.Get(ctx, "old", ids[0])
	require.NoError(t, err)
	require.Nil(t, j.Workflow)
	require.Equal(t, queue.StatusPending, j.Status)
	require.JSONEq(t, "{}", string(j.Payload))

	jobs, err := c.Claim(ctx, "old", queue.ClaimOptions{Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	for _, j := range jobs {
		require.Nil(t, j.Workflow)
		require.Empty(t, j.Upstream)
	}
	require.NoError(t, c.Complete(ctx, "old", jobs[0].ID, jobs[0].Token, queue.CompleteOptions{}))
	fr, err := c.Fail(ctx, "old", jobs[1].ID, jobs[1].Token, queue.FailOptions{Error: "x"})
	require.NoError(t, err)
	require.Equal(t, queue.StatusDead, fr.Status)
	n, err := rdb.HLen(ctx, outboxKey).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "only the outbox's sentinel")
}

// A queue made before workflows (no outbox key) gets its outbox at the
// next reclaim sweep.
func TestReclaimGivesAnOldQueueItsOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testutil.Redis(t)
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "older", Kind: "k"})
	require.NoError(t, err)
	outbox := store.QueueKeys(ns, "older").Hooks
	require.NoError(t, rdb.Del(ctx, outbox).Err()) // as an older version made it
	_, err = c.Reclaim(ctx, "older")
	require.NoError(t, err)
	n, err := rdb.Exists(ctx, outbox).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}
