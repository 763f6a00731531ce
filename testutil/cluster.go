package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterMasters = 3
	// clusterCreateTimeout bounds `redis-cli --cluster create`.
	clusterCreateTimeout = 30 * time.Second
	// clusterReadyTimeout bounds the wait for cluster_state:ok everywhere.
	clusterReadyTimeout = 20 * time.Second
	clusterPoll         = 50 * time.Millisecond
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

func startCluster() (addrs []string, err error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%s or set %s", notFoundMsg, EnvClusterAddrs)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH: install it (Debian: apt-get install redis-tools) or set %s", EnvClusterAddrs)
	}
	root, err := sharedDir("chronoq-redis-cluster-*")
	if err != nil {
		return nil, fmt.Errorf("testutil: %w", err)
	}

	var nodes []*proc
	defer func() {
		if err == nil {
			for _, p := range nodes {
				registerShared(p)
			}
			return
		}
		err = fmt.Errorf("testutil: start shared redis cluster: %w", err)
		// Include the nodes' logs, then get rid of the half-built cluster.
		var b strings.Builder
		for _, p := range nodes {
			fmt.Fprintf(&b, "\n--- log tail of node %s ---\n%s", p.addr, p.logTail())
		}
		err = fmt.Errorf("%w%s", err, b.String())
		var wg sync.WaitGroup
		for _, p := range nodes {
			wg.Go(p.kill)
		}
		wg.Wait()
	}()

	for i := range clusterMasters {
		dir := filepath.Join(root, fmt.Sprintf("node%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create node dir: %w", err)
		}
		args := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
		}
		p, err := startOnFreePort(server, dir, args, true)
		if err != nil {
			return nil, fmt.Errorf("start cluster node %d: %w", i, err)
		}
		nodes = append(nodes, p)
		addrs = append(addrs, p.addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	cliArgs := append([]string{"--cluster", "create"}, addrs...)
	cliArgs = append(cliArgs, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, cliArgs...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = time.Second // bound the wait for output copying after a kill
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create %s: %w\n--- redis-cli output ---\n%s",
			strings.Join(addrs, " "), err, tail(out.Bytes(), logTailBytes))
	}

	if err := waitClusterOK(addrs); err != nil {
		return nil, fmt.Errorf("%w\n--- redis-cli output ---\n%s", err, tail(out.Bytes(), logTailBytes))
	}
	return addrs, nil
}

// waitClusterOK polls CLUSTER INFO on every node until all of them report a
// healthy cluster with every slot assigned and every node known.
func waitClusterOK(addrs []string) error {
	deadline := time.Now().Add(clusterReadyTimeout)
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": "16384",
		"cluster_known_nodes":    fmt.Sprint(len(addrs)),
	}
	for {
		problem := ""
	nodes:
		for _, addr := range addrs {
			info, err := redisDo(addr, time.Second, "CLUSTER", "INFO")
			if err != nil {
				problem = fmt.Sprintf("CLUSTER INFO on %s: %v", addr, err)
				break
			}
			for field, v := range want {
				if got := infoField(info, field); got != v {
					problem = fmt.Sprintf("CLUSTER INFO on %s: %s is %q, want %q; full reply:\n%s",
						addr, field, got, v, info)
					break nodes
				}
			}
		}
		if problem == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready after %s: %s", clusterReadyTimeout, problem)
		}
		time.Sleep(clusterPoll)
	}
}
