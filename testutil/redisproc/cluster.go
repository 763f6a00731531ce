package redisproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/childproc"
)

// ClusterArgs are the redis-server arguments of a cluster node; nodeTimeout
// is cluster-node-timeout (a master down longer than that is failed over
// when it has a replica).
func ClusterArgs(nodeTimeout time.Duration) []string {
	return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)}
}

// StartCluster starts masters*(1+replicas) redis-server nodes (bin) named
// cluster-node-<i>, each in root/node<i> (created if missing) on a free
// port whose bus port is free too, with ClusterArgs(nodeTimeout) followed
// by args, then joins them with CreateCluster (cli, each master with
// replicas replicas). It answers the nodes in the order started; ctx bounds
// the whole of it. On failure it kills the nodes it started and the error,
// which has no package prefix for the caller to add its own, ends with
// their log tails.
func StartCluster(ctx context.Context, bin, cli, root string, masters, replicas int, nodeTimeout time.Duration, args []string) (nodes []*Server, err error) {
	defer func() {
		if err == nil {
			return
		}
		var b strings.Builder
		for _, s := range nodes {
			fmt.Fprintf(&b, "\n--- log tail of node %s ---\n%s", s.Addr, s.LogTail())
		}
		err = fmt.Errorf("%w%s", err, b.String())
		var wg sync.WaitGroup
		for _, s := range nodes {
			wg.Go(s.Kill)
		}
		wg.Wait()
		nodes = nil
	}()
	args = append(ClusterArgs(nodeTimeout), args...)
	addrs := make([]string, 0, masters*(1+replicas))
	for i := range masters * (1 + replicas) {
		dir := filepath.Join(root, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nodes, fmt.Errorf("create node dir: %w", err)
		}
		s, err := Start(ctx, fmt.Sprintf("cluster-node-%d", i), bin, dir, args, true)
		if err != nil {
			return nodes, fmt.Errorf("start cluster node %d: %w", i, err)
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
	}
	if err := CreateCluster(ctx, cli, addrs, replicas); err != nil {
		return nodes, err
	}
	return nodes, nil
}

// CreateCluster joins the nodes at addrs (started with ClusterArgs and a
// free bus port) into one cluster with redis-cli --cluster create, each
// master with replicas replicas, and waits until it is healthy (see
// ClusterHealth), for as long as ctx allows.
func CreateCluster(ctx context.Context, cli string, addrs []string, replicas int) error {
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second // bound the wait for output copying after a kill
	err := childproc.Spawn(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create %s: %w\n--- redis-cli output ---\n%s",
			strings.Join(addrs, " "), err, tail(out.Bytes(), logTailBytes))
	}
	if err := WaitClusterOK(ctx, addrs); err != nil {
		return fmt.Errorf("%w\n--- redis-cli output ---\n%s", err, tail(out.Bytes(), logTailBytes))
	}
	return nil
}

// WaitClusterOK polls ClusterHealth until it finds nothing wrong or ctx
// ends.
func WaitClusterOK(ctx context.Context, addrs []string) error {
	for {
		problem := ClusterHealth(addrs)
		if problem == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: cluster not healthy: %s", problem)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ClusterHealth is "" when every node at addrs reports cluster_state:ok,
// all 16384 slots assigned and none failing, knows every node, and (for a
// replica) has its link to its master up; otherwise the first problem
// found.
func ClusterHealth(addrs []string) string {
	want := map[string]string{"cluster_state": "ok", "cluster_slots_assigned": "16384",
		"cluster_known_nodes": strconv.Itoa(len(addrs)), "cluster_slots_fail": "0", "cluster_slots_pfail": "0"}
	for _, a := range addrs {
		v, err := Do(a, "CLUSTER", "INFO")
		if err != nil {
			return "CLUSTER INFO on " + a + ": " + err.Error()
		}
		info := AsString(v)
		for f, w := range want {
			if got := InfoField(info, f); got != w {
				return fmt.Sprintf("CLUSTER INFO on %s: %s is %q, want %q", a, f, got, w)
			}
		}
		v, err = Do(a, "INFO", "replication")
		if err != nil {
			return "INFO replication on " + a + ": " + err.Error()
		}
		repl := AsString(v)
		if InfoField(repl, "role") == "slave" && InfoField(repl, "master_link_status") != "up" {
			return a + ": replica link to its master down"
		}
	}
	return ""
}
