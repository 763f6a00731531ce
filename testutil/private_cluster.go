package testutil

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// MigrateOptions say which slot [PrivateCluster.MigrateSlot] moves, where
// and how slowly (see redisproc.MigrateOptions).
type MigrateOptions = redisproc.MigrateOptions

// KeySlot is the Redis Cluster hash slot of key (what CLUSTER KEYSLOT
// answers): that of its hash tag, when it has one.
func KeySlot(key string) int { return redisproc.KeySlot(key) }

// PrivateCluster is a Redis Cluster owned by one test: 3 masters, no
// replicas, on free loopback ports. A test that moves slots needs one:
// resharding the shared cluster of [ClusterAddrs] would disturb the
// parallel tests using it (their keys would answer ASK, TRYAGAIN or MOVED
// while it moves). Create it with [StartCluster]; it is stopped at
// t.Cleanup.
//
// SlotOwner and OtherMaster call t.Fatal and so must be called from the
// test's goroutine; MigrateSlot and Client may be called from any.
type PrivateCluster struct {
	t     testing.TB
	addrs []string
}

// StartCluster starts a Redis Cluster of the test's own (see
// [PrivateCluster]), without persistence unless extraArgs, passed to every
// redis-server after the defaults, say otherwise. It takes about a second.
// It needs redis-server and redis-cli on PATH, even when
// CHRONOQ_TEST_CLUSTER_ADDRS names a shared cluster.
func StartCluster(t testing.TB, extraArgs ...string) *PrivateCluster {
	t.Helper()
	NeedRedisServer(t, "a Redis Cluster")
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(redisproc.NotFound)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not found on PATH: install it (Debian: apt-get install redis-tools)")
	}
	root := t.TempDir() // registered first, so removed after the nodes stop
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	nodes, err := redisproc.StartCluster(ctx, server, cli, root, clusterMasters, 0, 5*time.Second, extraArgs)
	if err != nil { // the nodes are killed, their logs quoted
		t.Fatalf("testutil: StartCluster: %v", err)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range nodes {
			wg.Go(s.Stop)
		}
		wg.Wait()
	})
	c := &PrivateCluster{t: t}
	for _, s := range nodes {
		c.addrs = append(c.addrs, s.Addr)
	}
	return c
}

// Addrs returns the addresses of the cluster's nodes, all masters.
func (c *PrivateCluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Client returns a new cluster client (go-redis defaults) to the cluster,
// closed at t.Cleanup.
func (c *PrivateCluster) Client() *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// SlotOwner returns the address of the master serving slot.
func (c *PrivateCluster) SlotOwner(slot int) string {
	c.t.Helper()
	n, err := redisproc.SlotOwner(c.addrs[0], slot)
	if err != nil {
		c.t.Fatalf("testutil: %v", err)
	}
	return n.Addr
}

// OtherMaster returns the address of a master that does not serve slot.
func (c *PrivateCluster) OtherMaster(slot int) string {
	c.t.Helper()
	owner := c.SlotOwner(slot)
	for _, a := range c.addrs {
		if a != owner {
			return a
		}
	}
	c.t.Fatal("testutil: the cluster has one master")
	return ""
}

// MigrateSlot moves o.Slot from its master to another while clients keep
// using it, a few keys a step (see redisproc.MigrateSlot, which also says
// what is left on an error): from o.From, or the slot's master when empty,
// to o.To, or another master when empty. It returns once every node agrees
// on the new master, or with an error.
func (c *PrivateCluster) MigrateSlot(ctx context.Context, o MigrateOptions) error {
	if o.From == "" {
		n, err := redisproc.SlotOwner(c.addrs[0], o.Slot)
		if err != nil {
			return err
		}
		o.From = n.Addr
	}
	if o.To == "" {
		for _, a := range c.addrs {
			if a != o.From {
				o.To = a
				break
			}
		}
	}
	return redisproc.MigrateSlot(ctx, o)
}
