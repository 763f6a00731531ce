package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

const (
	clusterMasters = 3
	// clusterCreateTimeout bounds starting the nodes, `redis-cli --cluster
	// create` and the wait for a healthy cluster.
	clusterCreateTimeout = 60 * time.Second
)

var cluster struct {
	once  sync.Once
	addrs []string
	err   error
}

// ClusterAddrs returns the seed addresses of a shared local Redis Cluster
// with 3 masters and no replicas, started at most once per test binary.
//
// If CHRONOQ_TEST_CLUSTER_ADDRS (comma-separated host:port list) is set,
// that cluster is used instead. Otherwise the first call starts 3
// redis-server processes with cluster mode enabled on free loopback ports
// (whose bus ports, port+10000, are free too), joins them with
// `redis-cli --cluster create ... --cluster-yes`, and waits until every node
// reports cluster_state:ok, knows all 3 nodes and sees all 16384 slots
// assigned.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	NeedRedisServer(t, "a Redis Cluster")
	if env := os.Getenv(EnvClusterAddrs); strings.TrimSpace(env) != "" {
		var addrs []string
		for a := range strings.SplitSeq(env, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		return addrs
	}
	cluster.once.Do(func() { cluster.addrs, cluster.err = startCluster() })
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	return append([]string(nil), cluster.addrs...) // callers may modify it
}

// Cluster returns a new cluster client to the shared cluster (see
// [ClusterAddrs]), closed at t.Cleanup.
func Cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: ClusterAddrs(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func startCluster() ([]string, error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%s or set %s", redisproc.NotFound, EnvClusterAddrs)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH: install it (Debian: apt-get install redis-tools) or set %s", EnvClusterAddrs)
	}
	root, err := sharedDir("chronoq-redis-cluster-*")
	if err != nil {
		return nil, fmt.Errorf("testutil: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	nodes, err := redisproc.StartCluster(ctx, server, cli, root, clusterMasters, 0, 5*time.Second, nil)
	if err != nil { // the nodes are killed, their logs quoted
		return nil, fmt.Errorf("testutil: start shared redis cluster: %w", err)
	}
	addrs := make([]string, len(nodes))
	for i, p := range nodes {
		registerShared(p)
		addrs[i] = p.Addr
	}
	return addrs, nil
}
