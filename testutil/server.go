package testutil

import (
	"context"
	"os/exec"
	"sync"
	"testing"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// Server is a dedicated redis-server owned by one test, for tests that stop,
// kill or restart Redis. Its address stays the same across restarts. Create
// it with [StartServer]; it is stopped at t.Cleanup.
//
// The methods must be called from the test's goroutine (Restart may call
// t.Fatal), and the Server must not be used after the test ended.
type Server struct {
	t  testing.TB
	mu sync.Mutex
	s  *redisproc.Server
}

// StartServer starts a dedicated redis-server on a free loopback port, in a
// fresh temporary directory, and stops it at t.Cleanup. The server runs
// without persistence (--save "" --appendonly no) unless extraArgs, which
// are passed to redis-server after the defaults, say otherwise, e.g.
// StartServer(t, "--appendonly", "yes").
func StartServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	NeedRedisServer(t, "a redis-server process of its own to stop, kill or restart")
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(redisproc.NotFound)
	}
	dir := t.TempDir() // registered first, so removed after the Stop below
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	rs, err := redisproc.Start(ctx, "redis-server", bin, dir, extraArgs, false)
	if err != nil {
		t.Fatalf("testutil: StartServer: %v", err)
	}
	s := &Server{t: t, s: rs}
	t.Cleanup(s.Stop)
	return s
}

// Addr returns the server's host:port; it does not change on Restart.
func (s *Server) Addr() string { return s.s.Addr }

// Dir returns the server's working directory (where RDB/AOF files and
// redis.log live); it does not change on Restart.
func (s *Server) Dir() string { return s.s.Dir }

// Stop shuts the server down gracefully: SIGTERM, then waits, sending
// SIGKILL if it has not exited within 10s. Stopping a stopped server is a
// no-op.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s.Stop()
}

// Kill terminates the server abruptly with SIGKILL (simulating a crash:
// nothing is flushed) and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s.Kill()
}

// Restart starts the server again on the same port and in the same
// directory, with the same arguments, and waits until it answers PING
// (after loading its data, if persistence is enabled). A running server is
// stopped first.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.s.Restart(ctx); err != nil {
		s.t.Fatalf("testutil: restart redis-server on %s: %v", s.s.Addr, err)
	}
}
