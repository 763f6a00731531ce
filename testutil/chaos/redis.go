package chaos

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// redisReadyTimeout bounds a redis-server's start: loading a large AOF
// takes a while on a busy machine.
const redisReadyTimeout = 60 * time.Second

// RedisServer is one redis-server of the battery (see [redisproc.Server]):
// every process it runs, restarts included, is tracked by its Group.
type RedisServer struct {
	*redisproc.Server
	grp *Group
}

// DurableArgs make every acknowledged write survive a SIGKILL: AOF, fsync
// before each reply, no eviction.
var DurableArgs = []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"}

// StartRedis starts redis-server in dir on a free port (whose cluster bus
// port, port+10000, is free too when bus is set), with args after the
// defaults, and waits until it answers.
func StartRedis(ctx context.Context, grp *Group, name, bin, dir string, args []string, bus bool) (*RedisServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, redisReadyTimeout)
	defer cancel()
	s, err := redisproc.Start(ctx, name, bin, dir, args, bus)
	if err != nil {
		return nil, fmt.Errorf("chaos: %s: %w", name, err)
	}
	grp.Add(s.Child())
	return &RedisServer{Server: s, grp: grp}, nil
}

// Restart starts the server again after a Kill: same port, same directory
// (it loads its AOF), and waits until it answers.
func (s *RedisServer) Restart(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisReadyTimeout)
	defer cancel()
	if err := s.Server.Restart(ctx); err != nil {
		return fmt.Errorf("chaos: restart %s: %w", s.Name, err)
	}
	s.grp.Add(s.Child())
	return nil
}
