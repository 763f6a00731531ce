package testutil_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestRedisSharedServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	addr := testutil.RedisAddr(t)
	require.Equal(t, addr, testutil.RedisAddr(t), "RedisAddr must return the shared server")

	a, b := testutil.Redis(t), testutil.Redis(t)
	require.NotSame(t, a, b)
	require.Equal(t, addr, a.Options().Addr)
	require.Equal(t, "PONG", a.Ping(ctx).Val())

	// Both clients talk to the same server: a write through one is visible
	// through the other.
	key := testutil.Namespace(t) + ":k"
	require.NoError(t, a.Set(ctx, key, "v", time.Minute).Err())
	got, err := b.Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)

	// Persistence is off on the shared server.
	save, err := a.ConfigGet(ctx, "save").Result()
	require.NoError(t, err)
	require.Empty(t, save["save"])
}

func TestRedisSharedAcrossTests(t *testing.T) {
	// Parallel subtests all get one and the same server.
	addrs := make(chan string, 4)
	t.Run("group", func(t *testing.T) {
		for range cap(addrs) {
			t.Run("sub", func(t *testing.T) {
				t.Parallel()
				rdb := testutil.Redis(t)
				require.NoError(t, rdb.Ping(t.Context()).Err())
				addrs <- testutil.RedisAddr(t)
			})
		}
	})
	close(addrs)
	first := <-addrs
	for a := range addrs {
		require.Equal(t, first, a)
	}
}

var namespaceRE = regexp.MustCompile(`^[a-zA-Z0-9:_-]{1,64}$`)

func TestNamespace(t *testing.T) {
	t.Parallel()
	a, b := testutil.Namespace(t), testutil.Namespace(t)
	require.NotEqual(t, a, b)
	for _, ns := range []string{a, b} {
		require.Regexp(t, namespaceRE, ns)
		require.NotContains(t, ns, "{")
		require.NotContains(t, ns, "}")
		require.True(t, strings.HasPrefix(ns, "tNamespace-"), ns)
	}

	t.Run("odd/sub test {name} with spaces, unicode é and a very long tail that goes on and on and on", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for range 100 {
			ns := testutil.Namespace(t)
			require.Regexp(t, namespaceRE, ns)
			require.NotContains(t, ns, "{")
			require.NotContains(t, ns, "}")
			require.LessOrEqual(t, len(ns), 64)
			require.False(t, seen[ns], "duplicate namespace %q", ns)
			seen[ns] = true
		}
	})
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	addrs := testutil.ClusterAddrs(t)
	require.Len(t, addrs, 3)
	require.Equal(t, addrs, testutil.ClusterAddrs(t), "ClusterAddrs must return the shared cluster")

	rdb := testutil.Cluster(t)
	info, err := rdb.ClusterInfo(ctx).Result()
	require.NoError(t, err)
	require.Contains(t, info, "cluster_state:ok")
	require.Contains(t, info, "cluster_slots_assigned:16384")

	ns := testutil.Namespace(t)
	masters := map[string]bool{}
	for _, tag := range []string{"a", "b", "c"} {
		key := "{" + tag + "}:" + ns
		require.NoError(t, rdb.Set(ctx, key, tag, time.Minute).Err())
		got, err := rdb.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, tag, got)

		master, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		masters[master.Options().Addr] = true

		// The key really lives on that master (no redirection involved).
		direct, err := master.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, tag, direct)
	}
	require.GreaterOrEqual(t, len(masters), 2, "keys should spread over several masters: %v", masters)

	// Three masters, each of which sees a healthy cluster.
	var mu sync.Mutex
	var seen []string
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: %s", c.Options().Addr, info)
		}
		mu.Lock()
		seen = append(seen, c.Options().Addr)
		mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	require.ElementsMatch(t, addrs, seen)
}

func TestStartServerKillRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	s := testutil.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	require.NotEqual(t, testutil.RedisAddr(t), s.Addr(), "a dedicated server, not the shared one")
	addr := s.Addr()

	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Set(ctx, "survivor", "yes", 0).Err())
	aof, err := rdb.ConfigGet(ctx, "appendonly").Result()
	require.NoError(t, err)
	require.Equal(t, "yes", aof["appendonly"], "extraArgs must reach redis-server")

	s.Kill()
	requireDown(t, addr)
	s.Kill() // idempotent on a dead server
	s.Stop()

	s.Restart()
	require.Equal(t, addr, s.Addr())
	require.Eventually(t, func() bool { return rdb.Ping(ctx).Err() == nil }, 5*time.Second, 10*time.Millisecond)
	got, err := rdb.Get(ctx, "survivor").Result()
	require.NoError(t, err)
	require.Equal(t, "yes", got, "AOF data written before the kill must be reloaded")

	s.Stop()
	requireDown(t, addr)
	s.Stop() // idempotent

	s.Restart()
	require.Equal(t, addr, s.Addr())
	require.Eventually(t, func() bool { return rdb.Ping(ctx).Err() == nil }, 5*time.Second, 10*time.Millisecond)
}

// requireDown asserts that nothing listens on addr any more.
func requireDown(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "server on %s must be down", addr)
}

func TestFakeClock(t *testing.T) {
	t.Parallel()
	want := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := testutil.FakeClock()
	require.True(t, c.Now().Equal(want), c.Now())
	c.Advance(time.Hour)
	require.True(t, testutil.FakeClock().Now().Equal(want), "each clock is independent")
}

func TestStartClusterMigrateSlot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := testutil.StartCluster(t)
	require.Len(t, c.Addrs(), 3)
	require.NotContains(t, c.Addrs(), testutil.ClusterAddrs(t)[0], "a cluster of its own, not the shared one")
	rdb := c.Client()
	const key = "{moving}:k"
	slot := testutil.KeySlot(key)
	require.Equal(t, slot, testutil.KeySlot("moving"))
	require.NoError(t, rdb.Set(ctx, key, "v", 0).Err())
	home := c.SlotOwner(slot)
	away := c.OtherMaster(slot)
	require.NotEqual(t, home, away)

	require.NoError(t, c.MigrateSlot(ctx, testutil.MigrateOptions{Slot: slot, To: away, KeysPerStep: 1}))
	require.Equal(t, away, c.SlotOwner(slot))
	got, err := rdb.Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)
	direct := redis.NewClient(&redis.Options{Addr: away})
	t.Cleanup(func() { _ = direct.Close() })
	require.Equal(t, "v", direct.Get(ctx, key).Val(), "the key lives on its new master")

	require.NoError(t, c.MigrateSlot(ctx, testutil.MigrateOptions{Slot: slot, To: home}))
	require.Equal(t, home, c.SlotOwner(slot))
	got, err = rdb.Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)
}
