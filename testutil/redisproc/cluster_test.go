package redisproc

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func redisCLI(t *testing.T) string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not found on PATH: install it (Debian: apt-get install redis-tools)")
	}
	return cli
}

func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	nodes, err := StartCluster(clusterCtx(t), redisServer(t), redisCLI(t), root, 3, 0, 5*time.Second, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range nodes {
			s.Stop()
		}
	})
	require.Len(t, nodes, 3)
	addrs := make([]string, len(nodes))
	for i, s := range nodes {
		addrs[i] = s.Addr
		require.Equal(t, filepath.Join(root, fmt.Sprintf("node%d", i)), s.Dir)
	}
	require.Empty(t, ClusterHealth(addrs))
}

func TestStartClusterFailure(t *testing.T) {
	t.Parallel()
	cli, err := exec.LookPath("false") // a redis-cli that fails
	require.NoError(t, err)
	nodes, err := StartCluster(clusterCtx(t), redisServer(t), cli, t.TempDir(), 3, 0, 5*time.Second, nil)
	require.Error(t, err)
	require.Nil(t, nodes)
	require.ErrorContains(t, err, "redis-cli --cluster create")
	m := regexp.MustCompile(`--- log tail of node (\S+) ---`).FindAllStringSubmatch(err.Error(), -1)
	require.Len(t, m, 3, "every node's log is quoted: %v", err)
	for _, a := range m {
		c, err := net.DialTimeout("tcp", a[1], time.Second)
		if err == nil {
			c.Close()
		}
		require.Error(t, err, "node %s must have been killed", a[1])
	}
}
