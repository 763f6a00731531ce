package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The queue contract: every behaviour of the engine, run against one
// redis-server and against a 3-master Redis Cluster.

func TestContractSingle(t *testing.T) {
	t.Parallel()
	runContract(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestContractCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runContract(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

// runContract runs the contract on the Redis newRDB connects to. Each topic
// is a file of its own (contract_<topic>_test.go); every check is a subtest
// of TestContractSingle or TestContractCluster.
func runContract(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	t.Run("NewClientOnAConnectionInUse", func(t *testing.T) {
		t.Parallel()
		for range 10 {
			rdb := newRDB(t)
			var wg sync.WaitGroup
			for range 8 { // new connections handshake while the client is built
				wg.Go(func() { _ = rdb.Ping(context.Background()).Err() })
			}
			c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t)})
			require.NoError(t, err)
			wg.Wait()
			_, err = c.Claim(context.Background(), "q", queue.ClaimOptions{Wait: 10 * time.Millisecond})
			require.NoError(t, err)
			require.NoError(t, c.Close())
		}
	})

	setup := setupOn(newRDB)
	contractEnqueue(t, setup)
	contractPromote(t, setup)
	contractClaim(t, setup)
	contractFail(t, setup)
	contractComplete(t, setup)
	contractRetried(t, setup)
	contractObserve(t, setup)
	contractArtifacts(t, setup)
	contractLabels(t, setup)
	contractRecords(t, setup)
	contractWait(t, setup)
	contractFlow(t, setup)
}
