package queue_test

import (
	"context"
	"github.com/chronoq/chronoq/internal/plumbing"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// A master demoted to a replica (a cluster or Sentinel failover; REPLICAOF
// here, which demotes the same way on one server) answers the clients parked
// in BLMOVE with "UNBLOCKED force unblock ...". Nothing moved, so a wait must
// end like a timeout, not as a failure handed to the worker. Found by the
// chaos battery (testutil/chaos), scenario cluster.

func TestWaitPendingSurvivesDemotion(t *testing.T) {
	t.Parallel()
	err := demoteWhileBlocked(t, func(ctx context.Context, c *queue.Client) error {
		ok, err := plumbing.Of(c).WaitPending(ctx, "q", 10*time.Second)
		if ok {
			t.Error("WaitPending reported a pending job on an empty queue")
		}
		return err
	})
	require.NoError(t, err, "a failover's UNBLOCKED reached the caller of WaitPending")
}

func TestClaimWaitSurvivesDemotion(t *testing.T) {
	t.Parallel()
	err := demoteWhileBlocked(t, func(ctx context.Context, c *queue.Client) error {
		jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{Wait: 10 * time.Second})
		if len(jobs) != 0 {
			t.Errorf("Claim answered %d jobs from an empty queue", len(jobs))
		}
		return err
	})
	require.NoError(t, err, "a failover's UNBLOCKED reached the caller of Claim")
}

// demoteWhileBlocked runs call against server a, waits until it is parked in
// a blocking command there, makes a a replica of server b, and answers call's
// error. The call must return well before its own 10 s wait would end.
func demoteWhileBlocked(t *testing.T, call func(ctx context.Context, c *queue.Client) error) error {
	t.Helper()
	a, b := testutil.StartServer(t), testutil.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: a.Addr()})
	admin := redis.NewClient(&redis.Options{Addr: a.Addr()})
	t.Cleanup(func() { _ = rdb.Close(); _ = admin.Close() })
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx, c) }()
	require.Eventually(t, func() bool {
		info, err := admin.InfoMap(ctx, "clients").Result()
		return err == nil && info["Clients"]["blocked_clients"] != "" && info["Clients"]["blocked_clients"] != "0"
	}, 5*time.Second, 10*time.Millisecond, "the call never blocked")
	host, port, err := net.SplitHostPort(b.Addr())
	require.NoError(t, err)
	require.NoError(t, admin.Do(ctx, "REPLICAOF", host, port).Err())
	select {
	case err = <-errc:
		return err
	case <-time.After(8 * time.Second):
		t.Fatal("the call did not return when its server was demoted")
		return nil
	}
}
