package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// A Claim that waits is handed the earliest due time that falls within
// its wait, and claims at it: its claim promotes and takes the job, with
// no promoter running and no wake entry (the hub's reads here last longer
// than the wait, so nothing else could end it). On a server of its own,
// to count the scripts Redis ran.
func TestAWaitingClaimWakesAtTheDueTimeItWasHanded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, info := wakeRig(t, ctx)                                    // its hub reads last 4 s
	_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"}) // the queue exists
	require.NoError(t, err)
	js, err := c.Claim(ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, js, 1)

	e, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", RunAt: time.Now().Add(300 * time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, queue.StatusScheduled, e.Job.Status)
	scripts := func() int64 { return info("commandstats", "cmdstat_evalsha") + info("commandstats", "cmdstat_fcall") }
	scripts0, xadds := scripts(), info("commandstats", "cmdstat_xadd")
	js, err = c.Claim(ctx, "q", queue.ClaimOptions{Wait: 3 * time.Second})
	require.NoError(t, err)
	require.Len(t, js, 1, "claimed at its due time, within the wait")
	require.Equal(t, e.Job.ID, js[0].ID)
	require.False(t, js[0].ClaimedAt.Before(js[0].RunAt), "never early by Redis's clock")
	// The claim that found nothing, the one at the due time, and its mark
	// of the first lease.
	require.LessOrEqual(t, scripts()-scripts0, int64(3))
	require.GreaterOrEqual(t, scripts()-scripts0, int64(2), "the claim that found nothing and the one at the due time")
	require.Zero(t, info("commandstats", "cmdstat_xadd")-xadds, "no wake entry")
}

// A Claim that waits is handed no due time beyond its wait, which it
// would not be waiting for: the next claim that waits long enough is.
func TestAClaimIsHandedNoDueTimeBeyondItsWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := wakeRig(t, ctx)
	_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	_, err = c.Claim(ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	e, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", RunAt: time.Now().Add(time.Minute)})
	require.NoError(t, err)
	js, err := c.Claim(ctx, "q", queue.ClaimOptions{Wait: 5 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, js)
	claimed, next, err := plumbing.Of(c).ClaimNext(ctx, "q", queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, claimed.([]*queue.Job))
	require.False(t, next.IsZero(), "not handed out before: a worker's claim is handed it")
	require.WithinDuration(t, e.Job.RunAt, next, 100*time.Millisecond, "the job's due time (on this client's clock)")
}
