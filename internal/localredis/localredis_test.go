package localredis_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/chronoq/chronoq/internal/childproc"
	"github.com/chronoq/chronoq/internal/localredis"
	"github.com/chronoq/chronoq/testutil"
)

// The spawner of redis-server children lives as long as the process.
func TestMain(m *testing.M) { testutil.Main(m, goleak.IgnoreTopFunction(childproc.SpawnerFunc)) }

// seed writes one key of each type chronoq uses, and answers a check that
// they read back the same.
func seed(t *testing.T, rdb *redis.Client) func(t *testing.T, rdb *redis.Client) {
	ctx := t.Context()
	require.NoError(t, rdb.Set(ctx, "s", "a\x00b", 0).Err())
	require.NoError(t, rdb.Set(ctx, "ttl", "v", time.Hour).Err())
	require.NoError(t, rdb.RPush(ctx, "l", "1", "2", "3").Err())
	require.NoError(t, rdb.SAdd(ctx, "set", "x", "y").Err())
	require.NoError(t, rdb.HSet(ctx, "h", "f", "v", "g", "w").Err())
	require.NoError(t, rdb.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "a"}, redis.Z{Score: 1e300, Member: "b"}).Err())
	require.NoError(t, rdb.Do(ctx, "ZADD", "z", "inf", "sentinel").Err())
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: "x", ID: "5-1", Values: []string{"n", "1"}}).Err())
	return func(t *testing.T, rdb *redis.Client) {
		ctx := t.Context()
		require.Equal(t, "a\x00b", rdb.Get(ctx, "s").Val())
		ttl := rdb.TTL(ctx, "ttl").Val()
		require.Greater(t, ttl, 59*time.Minute)
		require.LessOrEqual(t, ttl, time.Hour)
		require.Equal(t, []string{"1", "2", "3"}, rdb.LRange(ctx, "l", 0, -1).Val())
		require.ElementsMatch(t, []string{"x", "y"}, rdb.SMembers(ctx, "set").Val())
		require.Equal(t, map[string]string{"f": "v", "g": "w"}, rdb.HGetAll(ctx, "h").Val())
		z := rdb.ZRangeWithScores(ctx, "z", 0, -1).Val()
		require.Len(t, z, 3)
		require.Equal(t, "a", z[0].Member)
		require.Equal(t, 1.5, z[0].Score)
		require.Equal(t, 1e300, z[1].Score)
		require.Equal(t, "sentinel", z[2].Member)
		xs := rdb.XRange(ctx, "x", "-", "+").Val()
		require.Len(t, xs, 1)
		require.Equal(t, "5-1", xs[0].ID)
	}
}

func start(t *testing.T, cfg localredis.Config) (*localredis.Redis, *redis.Client) {
	t.Helper()
	r, err := localredis.Start(context.Background(), cfg)
	require.NoError(t, err)
	rdb := redis.NewClient(r.Options())
	require.NoError(t, rdb.Ping(t.Context()).Err())
	return r, rdb
}

// TestKeepsDataAcrossARestart: each persistent form keeps every key (and
// its TTL) across a stop and a start on the same directory, and holds the
// directory's lock while it runs; memory keeps nothing.
func TestKeepsDataAcrossARestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, server, form string
	}{
		{"RedisServer", "redis-server", localredis.FormServer},
		{"Embedded", localredis.FormEmbedded, localredis.FormEmbedded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.form == localredis.FormServer {
				testutil.NeedRedisServer(t, "a redis-server binary")
			}
			dir := t.TempDir()
			cfg := localredis.Config{Dir: dir, Server: tc.server}
			r, rdb := start(t, cfg)
			require.Equal(t, tc.form, r.Form)
			check := seed(t, rdb)

			_, err := localredis.Start(context.Background(), cfg)
			require.ErrorContains(t, err, "is in use by another chronoq")
			require.ErrorContains(t, err, dir)

			require.NoError(t, rdb.Close())
			require.NoError(t, r.Close())
			r, rdb = start(t, cfg)
			defer func() { _ = rdb.Close(); require.NoError(t, r.Close()) }()
			check(t, rdb)
		})
	}
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		r, rdb := start(t, localredis.Config{Server: localredis.FormMemory})
		seed(t, rdb)
		require.NoError(t, rdb.Close())
		require.NoError(t, r.Close())
		r, rdb = start(t, localredis.Config{Server: localredis.FormMemory})
		defer func() { _ = rdb.Close(); require.NoError(t, r.Close()) }()
		require.Zero(t, rdb.DBSize(t.Context()).Val())
	})
}

// TestAutoFallsBackToEmbedded: with no redis-server on the PATH the
// default is the embedded form.
func TestAutoFallsBackToEmbedded(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // not parallel: the environment
	r, rdb := start(t, localredis.Config{Dir: t.TempDir()})
	defer func() { _ = rdb.Close(); require.NoError(t, r.Close()) }()
	require.Equal(t, localredis.FormEmbedded, r.Form)
}

// TestLongDirectoryUsesLoopbackWithAPassword: a data directory whose
// socket path would not fit is served on loopback, with a password.
func TestLongDirectoryUsesLoopbackWithAPassword(t *testing.T) {
	t.Parallel()
	testutil.NeedRedisServer(t, "a redis-server binary")
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 110))
	r, rdb := start(t, localredis.Config{Dir: dir, Server: "redis-server"})
	defer func() { _ = rdb.Close(); require.NoError(t, r.Close()) }()
	require.True(t, strings.HasPrefix(r.Addr(), "127.0.0.1:"), r.Addr())
	require.NotEmpty(t, r.Options().Password)
	noPw := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer noPw.Close()
	require.ErrorContains(t, noPw.Ping(t.Context()).Err(), "NOAUTH")
	conf, err := os.ReadFile(filepath.Join(dir, "redis", "redis.conf"))
	require.NoError(t, err)
	require.Contains(t, string(conf), "appendfsync always")
	fi, err := os.Stat(filepath.Join(dir, "redis", "redis.conf"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the password is for this user alone")
}

// TestDefaultDir: $XDG_STATE_HOME/chronoq, else ~/.local/state/chronoq.
func TestDefaultDir(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	d, err := localredis.DefaultDir(env(map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/h"}))
	require.NoError(t, err)
	require.Equal(t, "/x/state/chronoq", d)
	d, err = localredis.DefaultDir(env(map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/h"}))
	require.NoError(t, err)
	require.Equal(t, "/h/.local/state/chronoq", d)
	_, err = localredis.DefaultDir(env(nil))
	require.ErrorContains(t, err, "--data-dir")
}

// TestEmbeddedKeysExpire: the embedded forms' TTLs run in real time (a
// workflow's keys expire after its retention).
func TestEmbeddedKeysExpire(t *testing.T) {
	t.Parallel()
	for _, cfg := range []localredis.Config{{Server: localredis.FormMemory}, {Dir: t.TempDir(), Server: localredis.FormEmbedded}} {
		r, rdb := start(t, cfg)
		require.NoError(t, rdb.Set(t.Context(), "brief", "v", 1500*time.Millisecond).Err())
		require.NoError(t, rdb.Set(t.Context(), "kept", "v", 0).Err())
		require.Eventually(t, func() bool { return rdb.Exists(t.Context(), "brief").Val() == 0 }, 10*time.Second, 50*time.Millisecond, cfg.Server)
		require.Equal(t, int64(1), rdb.Exists(t.Context(), "kept").Val())
		require.NoError(t, rdb.Close())
		require.NoError(t, r.Close())
	}
}

// TestServerThatFailsToStart: a named binary missing, or one that exits
// at once, is an error saying so, and the directory is free after it.
func TestServerThatFailsToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := localredis.Start(context.Background(), localredis.Config{Dir: dir, Server: "no-such-redis-server"})
	require.ErrorContains(t, err, `redis-server binary "no-such-redis-server"`)
	_, err = localredis.Start(context.Background(), localredis.Config{Dir: dir, Server: "false"})
	require.ErrorContains(t, err, "exited at start")
	r, err := localredis.Start(context.Background(), localredis.Config{Dir: dir, Server: localredis.FormEmbedded})
	require.NoError(t, err, "the lock was released")
	require.NoError(t, r.Close())
}
