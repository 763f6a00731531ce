package queue_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// 10,000 calls (heldWaiters; fewer under the race detector) wait for the
// ends of as many jobs on one client: they hold no connection each (the
// channel has one subscriber, the client's pool no more connections than
// its size), and each answers its job completed once the jobs are
// completed.
func TestWaitEndedHoldsTenThousandWaiters(t *testing.T) {
	t.Parallel()
	const n = heldWaiters
	b := newBundle(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()

	njs := make([]queue.NewJob, queue.MaxBatch)
	for i := range njs {
		njs[i] = queue.NewJob{Queue: b.queue, Kind: "k"}
	}
	for i := 0; i < n; i += queue.MaxBatch {
		_, err := b.client.EnqueueBatch(ctx, njs[:min(queue.MaxBatch, n-i)])
		require.NoError(t, err)
	}
	var jobs []*queue.Job
	for len(jobs) < n {
		js, err := b.client.Claim(ctx, b.queue, queue.ClaimOptions{Max: queue.MaxBatch})
		require.NoError(t, err)
		require.NotEmpty(t, js)
		jobs = append(jobs, js...)
	}

	got := make(chan waitResult, n)
	for _, j := range jobs {
		go func() {
			w, err := b.client.WaitEnded(ctx, b.queue, j.ID, time.Hour) // the fake clock: no end by time
			got <- waitResult{w, err}
		}()
	}
	require.Eventually(t, func() bool { return plumbing.Of(b.client).JobWaiters() == n }, 30*time.Second, 5*time.Millisecond,
		"every call waits")
	subs, err := b.rdb.PubSubNumSub(ctx, b.events()).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), subs[b.events()], "one subscription for all the waits")
	pool := b.rdb.(*redis.Client)
	require.LessOrEqual(t, int(pool.PoolStats().TotalConns), pool.Options().PoolSize,
		"the waits hold no connection of the pool")

	for i := 0; i < n; i += queue.MaxBatch {
		acks := make([]queue.Ack, 0, queue.MaxBatch)
		for _, j := range jobs[i:min(i+queue.MaxBatch, n)] {
			acks = append(acks, queue.Ack{ID: j.ID, Token: j.Token})
		}
		_, errs, err := b.client.CompleteMany(ctx, b.queue, acks)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
	}
	for range n {
		select {
		case r := <-got:
			require.NoError(t, r.err)
			require.Equal(t, queue.StatusCompleted, r.job.Status)
		case <-ctx.Done():
			t.Fatalf("%d waits still waiting", plumbing.Of(b.client).JobWaiters())
		}
	}
	require.Zero(t, plumbing.Of(b.client).JobWaiters())
}

// A wait follows its queue's slot to another master: Redis ends the
// sharded subscription there (SUNSUBSCRIBE), the hub subscribes again on
// the new master, and the job's end, published there, answers the wait.
func TestWaitEndedFollowsAMovedSlot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	testutil.NeedRedisServer(t, "a Redis Cluster")
	pc := testutil.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := queue.NewClient(queue.Config{Redis: pc.Client(), Namespace: testutil.Namespace(t), Clock: testutil.FakeClock(), FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	const q = "moving"
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k"})
	require.NoError(t, err)
	js, err := c.Claim(ctx, q, queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, js, 1)
	j := js[0]

	got := make(chan waitResult, 1)
	go func() {
		w, err := c.WaitEnded(ctx, q, j.ID, time.Hour) // the fake clock: no end by time
		got <- waitResult{w, err}
	}()
	require.Eventually(t, func() bool { return plumbing.Of(c).JobWaiters() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, pc.MigrateSlot(ctx, testutil.MigrateOptions{Slot: testutil.KeySlot("{" + q + "}"), KeysPerStep: 100}))
	require.NoError(t, c.Complete(ctx, q, j.ID, j.Token, queue.CompleteOptions{Result: json.RawMessage(`"moved"`)}))
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Equal(t, queue.StatusCompleted, r.job.Status)
		require.JSONEq(t, `"moved"`, string(r.job.Result))
	case <-ctx.Done():
		t.Fatal("the wait missed the end on the slot's new master")
	}
}

// A subscription whose connection is killed is made again by go-redis,
// and its confirmation makes the waiters read their jobs again: an end
// published while it was down is not missed. On a server of its own, to
// kill its pub/sub clients.
func TestWaitEndedSurvivesALostSubscription(t *testing.T) {
	t.Parallel()
	testutil.NeedRedisServer(t, "CLIENT KILL")
	rs := testutil.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: testutil.FakeClock(), FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	const q = "lost"
	for range 2 {
		_, err = c.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k"})
		require.NoError(t, err)
	}
	js, err := c.Claim(ctx, q, queue.ClaimOptions{Max: 2})
	require.NoError(t, err)
	require.Len(t, js, 2)

	got := make(chan waitResult, 2)
	for _, j := range js {
		go func() {
			w, err := c.WaitEnded(ctx, q, j.ID, time.Hour) // the fake clock: no end by time
			got <- waitResult{w, err}
		}()
	}
	require.Eventually(t, func() bool { return plumbing.Of(c).JobWaiters() == 2 }, 10*time.Second, time.Millisecond)
	// The first job ends while no one is subscribed: its event is lost.
	require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.NoError(t, c.Complete(ctx, q, js[0].ID, js[0].Token, queue.CompleteOptions{Result: json.RawMessage(`0`)}))
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, js[0].ID, r.job.ID)
	require.Equal(t, queue.StatusCompleted, r.job.Status)
	// The subscription is back: the second job's end reaches its waiter.
	require.NoError(t, c.Complete(ctx, q, js[1].ID, js[1].Token, queue.CompleteOptions{Result: json.RawMessage(`1`)}))
	r = <-got
	require.NoError(t, r.err)
	require.Equal(t, js[1].ID, r.job.ID)
	require.Equal(t, queue.StatusCompleted, r.job.Status)
}

// A queue's channel stays subscribed for EndLinger after its last waiter
// left, then is unsubscribed (the last one's closes the connection); a
// later wait subscribes again.
func TestWaitEndedUnsubscribesAfterTheLinger(t *testing.T) {
	t.Parallel()
	b := newBundle(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
	channel := func(q string) string { return b.ns + ":{" + q + "}:events" }
	subscribers := func(q string) int64 {
		n, err := b.rdb.PubSubNumSub(b.ctx, channel(q)).Result()
		require.NoError(t, err)
		return n[channel(q)]
	}
	// waitOne waits for a job of q while it is completed.
	waitOne := func(q string) {
		_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: q, Kind: "k"})
		require.NoError(t, err)
		js, err := b.client.Claim(b.ctx, q, queue.ClaimOptions{})
		require.NoError(t, err)
		require.Len(t, js, 1)
		got := make(chan waitResult, 1)
		go func() {
			j, err := b.client.WaitEnded(b.ctx, q, js[0].ID, time.Hour)
			got <- waitResult{j, err}
		}()
		require.Eventually(t, func() bool { return plumbing.Of(b.client).JobWaiters() == 1 && subscribers(q) == 1 },
			10*time.Second, time.Millisecond)
		require.NoError(t, b.client.Complete(b.ctx, q, js[0].ID, js[0].Token, queue.CompleteOptions{}))
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, queue.StatusCompleted, r.job.Status)
	}
	waitOne("a")
	waitOne("b")
	require.Equal(t, int64(1), subscribers("a"), "lingering")
	b.clock.Advance(queue.EndLinger - time.Millisecond)
	require.Equal(t, int64(1), subscribers("a"), "lingering still")
	require.Equal(t, int64(1), subscribers("b"))
	b.clock.Advance(time.Millisecond)
	require.Eventually(t, func() bool { return subscribers("a") == 0 && subscribers("b") == 0 }, 10*time.Second, time.Millisecond,
		"unsubscribed after the linger")
	waitOne("a") // subscribed again
}
