package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// Bounds of the cluster waits.
const (
	clusterStartTimeout = 90 * time.Second // every node started, the cluster created and healthy
	clusterOKTimeout    = 60 * time.Second
)

// Cluster is a local Redis Cluster: masters, each with replicas, every
// node durable (AOF, fsync always).
type Cluster struct {
	Nodes []*RedisServer
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode = redisproc.ClusterNode

// StartCluster starts masters*(1+replicas) nodes under root and joins them
// with redis-cli --cluster create (redisproc.StartCluster, which kills the
// nodes again when it fails). nodeTimeout is cluster-node-timeout: a
// master restarted faster than that is not failed over.
func StartCluster(ctx context.Context, grp *Group, bin, cli, root string, masters, replicas int, nodeTimeout time.Duration, extra []string) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, clusterStartTimeout)
	defer cancel()
	args := append(append(slices.Clone(DurableArgs), "--cluster-require-full-coverage", "no"), extra...)
	nodes, err := redisproc.StartCluster(ctx, bin, cli, root, masters, replicas, nodeTimeout, args)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	c := &Cluster{}
	for _, s := range nodes {
		grp.Add(s.Child())
		c.Nodes = append(c.Nodes, &RedisServer{Server: s, grp: grp})
	}
	return c, nil
}

// Seeds are the nodes' addresses.
func (c *Cluster) Seeds() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Node finds the server at addr.
func (c *Cluster) Node(addr string) *RedisServer {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Topology reads CLUSTER NODES from the first node that answers.
func (c *Cluster) Topology() ([]ClusterNode, error) {
	var lastErr error
	for _, n := range c.Nodes {
		nodes, err := redisproc.ClusterNodes(n.Addr)
		if err != nil {
			lastErr = err
			continue
		}
		return nodes, nil
	}
	return nil, fmt.Errorf("chaos: %w", lastErr)
}

// MasterOf answers the master that serves slot.
func MasterOf(nodes []ClusterNode, slot int) (ClusterNode, bool) {
	return redisproc.OwnerOf(nodes, slot)
}

// ReplicaOf answers a healthy replica of the master with id.
func ReplicaOf(nodes []ClusterNode, id string) (ClusterNode, bool) {
	for _, n := range nodes {
		if !n.Master && !n.Failed && n.MasterID == id {
			return n, true
		}
	}
	return ClusterNode{}, false
}

// KeySlot asks the cluster for the slot of key.
func (c *Cluster) KeySlot(key string) (int, error) {
	v, err := redisproc.Do(c.Nodes[0].Addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}

// WaitOK waits (bounded) until the cluster is healthy: see
// [redisproc.ClusterHealth].
func (c *Cluster) WaitOK(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterOKTimeout)
	defer cancel()
	if err := redisproc.WaitClusterOK(ctx, c.Seeds()); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// Failover makes the replica at addr take over its master with CLUSTER
// FAILOVER (coordinated: the replica first catches up with the master, so
// no acknowledged write is lost), and waits until it serves as master and
// the cluster is healthy again.
func (c *Cluster) Failover(ctx context.Context, addr string) error {
	if _, err := redisproc.Do(addr, "CLUSTER", "FAILOVER"); err != nil {
		return fmt.Errorf("chaos: CLUSTER FAILOVER on %s: %w", addr, err)
	}
	wctx, cancel := context.WithTimeout(ctx, clusterOKTimeout)
	defer cancel()
	for {
		v, err := redisproc.Do(addr, "INFO", "replication")
		if err == nil && redisproc.InfoField(redisproc.AsString(v), "role") == "master" {
			break
		}
		if !sleep(wctx, 50*time.Millisecond) {
			return fmt.Errorf("chaos: %s did not become master", addr)
		}
	}
	return c.WaitOK(ctx)
}

// RestartNode SIGKILLs the node at addr and starts it again at once (same
// port, directory, nodes.conf and AOF), then waits for a healthy cluster.
func (c *Cluster) RestartNode(ctx context.Context, addr string, down time.Duration) error {
	n := c.Node(addr)
	if n == nil {
		return errors.New("chaos: no node " + addr)
	}
	n.Kill()
	sleep(ctx, down)
	if err := n.Restart(ctx); err != nil {
		return err
	}
	return c.WaitOK(ctx)
}
