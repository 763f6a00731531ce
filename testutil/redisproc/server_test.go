package redisproc

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func redisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(NotFound)
	}
	return bin
}

func readyCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// onPort starts a server on a port of the caller's choosing, as Restart
// does.
func onPort(t *testing.T, port int) error {
	s := &Server{Name: "redis", Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: t.TempDir(), bin: redisServer(t)}
	err := s.start(readyCtx(t))
	if err == nil {
		s.Kill()
	}
	return err
}

func TestStartPortTaken(t *testing.T) {
	t.Parallel()
	t.Run("by a plain listener", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		err = onPort(t, l.Addr().(*net.TCPAddr).Port)
		require.ErrorIs(t, err, errBind)
		require.ErrorContains(t, err, "Address already in use")
	})
	t.Run("by another redis-server", func(t *testing.T) {
		t.Parallel()
		other, err := Start(readyCtx(t), "other", redisServer(t), t.TempDir(), nil, false)
		require.NoError(t, err)
		t.Cleanup(other.Stop)
		require.ErrorIs(t, onPort(t, other.Port), errBind, "must not mistake the other server for ours")
	})
}

func TestStartBadArgs(t *testing.T) {
	t.Parallel()
	_, err := Start(readyCtx(t), "redis", redisServer(t), t.TempDir(), []string{"--no-such-option", "x"}, false)
	require.Error(t, err)
	require.NotErrorIs(t, err, errBind)
	require.ErrorContains(t, err, "log tail")
	require.ErrorContains(t, err, "no-such-option")
}

func TestRestartKeepsPortAndData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Start(readyCtx(t), "redis", redisServer(t), dir, []string{"--appendonly", "yes", "--appendfsync", "always"}, false)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	_, err = Do(s.Addr, "SET", "k", "v")
	require.NoError(t, err)
	require.Error(t, s.Restart(readyCtx(t)), "a running server is not restarted")
	pid := s.Pid()
	s.Kill()
	require.NoError(t, s.Restart(readyCtx(t)))
	require.NotEqual(t, pid, s.Pid())
	v, err := Do(s.Addr, "GET", "k")
	require.NoError(t, err)
	require.Equal(t, "v", v)
	require.FileExists(t, filepath.Join(dir, "redis.log"))
}

func TestFreePortBus(t *testing.T) {
	t.Parallel()
	for range 20 {
		port, err := freePort(true)
		require.NoError(t, err)
		require.Positive(t, port)
		require.Less(t, port+10000, 65536, "port %d: its cluster bus port must be a valid port", port)
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", tail([]byte("abc"), 10))
	require.Equal(t, "...\nline3\n", tail([]byte("line1\nline2\nline3\n"), 8))
}
