package testutil

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func redisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(notFoundMsg)
	}
	return bin
}

func TestStartProcPortTaken(t *testing.T) {
	t.Parallel()
	bin := redisServer(t)

	t.Run("by a plain listener", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		_, err = startProc(bin, l.Addr().(*net.TCPAddr).Port, t.TempDir(), nil)
		require.ErrorIs(t, err, errBind)
		require.ErrorContains(t, err, "Address already in use")
	})

	t.Run("by another redis-server", func(t *testing.T) {
		t.Parallel()
		other := StartServer(t)
		_, portStr, err := net.SplitHostPort(other.Addr())
		require.NoError(t, err)
		port, err := strconv.Atoi(portStr)
		require.NoError(t, err)
		_, err = startProc(bin, port, t.TempDir(), nil)
		require.ErrorIs(t, err, errBind, "must not mistake the other server for ours")
	})
}

func TestStartProcBadArgs(t *testing.T) {
	t.Parallel()
	_, err := startOnFreePort(redisServer(t), t.TempDir(), []string{"--no-such-option", "x"}, false)
	require.Error(t, err)
	t.Log(err)
	require.NotErrorIs(t, err, errBind)
	require.ErrorContains(t, err, "log tail")
	require.ErrorContains(t, err, "no-such-option")
}

func TestFreePortWithBus(t *testing.T) {
	t.Parallel()
	for range 20 {
		port, ls, err := freePort(true)
		require.NoError(t, err)
		require.Len(t, ls, 2)
		require.Less(t, port+10000, 65536)
		closeAll(ls)
	}
}

func TestEnvOverrides(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv(EnvRedisAddr, "127.0.0.1:1")
	t.Setenv(EnvClusterAddrs, " 127.0.0.1:2, 127.0.0.1:3 ,,")
	require.Equal(t, "127.0.0.1:1", RedisAddr(t))
	require.Equal(t, []string{"127.0.0.1:2", "127.0.0.1:3"}, ClusterAddrs(t))
}

func TestNamespaceLongName(t *testing.T) {
	t.Parallel()
	t.Run(strings.Repeat("x", 200), func(t *testing.T) {
		ns := Namespace(t)
		require.Len(t, ns, namespaceMax)
	})
}
