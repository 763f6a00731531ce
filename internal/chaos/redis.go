package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounds of the redis-server waits.
const (
	redisReadyTimeout = 60 * time.Second // loading a large AOF takes a while on a busy machine
	redisPoll         = 25 * time.Millisecond
	respTimeout       = 2 * time.Second
)

// RedisServer is one redis-server process on a loopback port that stays
// the same across restarts, in a directory of its own (where its AOF is).
type RedisServer struct {
	Name string
	Addr string
	Port int
	Dir  string
	bin  string
	args []string
	grp  *Group
	proc *Proc
}

// DurableArgs make every acknowledged write survive a SIGKILL: AOF, fsync
// before each reply, no eviction.
var DurableArgs = []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"}

// StartRedis starts redis-server on a free port (whose cluster bus port,
// port+10000, is free too when bus is set) in dir, with args after the
// defaults, and waits until it answers.
func StartRedis(ctx context.Context, grp *Group, name, bin, dir string, args []string, bus bool) (*RedisServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort(bus)
		if err != nil {
			return nil, err
		}
		s := &RedisServer{Name: name, Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Dir: dir, bin: bin, args: args, grp: grp}
		if lastErr = s.start(ctx); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

func (s *RedisServer) start(ctx context.Context) error {
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
		"--protected-mode", "no"}, s.args...)
	p, err := StartProc(s.Name, s.bin, args, filepath.Join(s.Dir, "redis.log"), nil)
	if err != nil {
		return err
	}
	s.grp.Add(p)
	s.proc = p
	if err := s.waitReady(ctx); err != nil {
		p.Kill()
		return fmt.Errorf("chaos: %s on %s: %w", s.Name, s.Addr, err)
	}
	return nil
}

// waitReady polls until the server answers PING as the process we started
// (a foreign server that took the port would answer with another pid).
func (s *RedisServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisReadyTimeout)
	defer cancel()
	pid := strconv.Itoa(s.proc.Pid())
	for {
		if !s.proc.Running() {
			return fmt.Errorf("exited: %v", s.proc.Err())
		}
		info, err := Do(s.Addr, "INFO", "server")
		if err == nil {
			if got := infoField(asString(info), "process_id"); got == pid {
				if _, err = Do(s.Addr, "PING"); err == nil {
					return nil
				}
			} else {
				err = fmt.Errorf("port served by pid %s, not %s", got, pid)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last: %v)", ctx.Err(), err)
		case <-time.After(redisPoll):
		}
	}
}

// Pid is the current process id.
func (s *RedisServer) Pid() int { return s.proc.Pid() }

// Kill SIGKILLs the server: nothing is flushed beyond what fsync made durable.
func (s *RedisServer) Kill() { s.proc.Kill() }

// Stop shuts the server down with SIGTERM.
func (s *RedisServer) Stop() { s.proc.Stop(0) }

// Restart starts the server again, same port, same directory (it loads its
// AOF), and waits until it answers.
func (s *RedisServer) Restart(ctx context.Context) error {
	s.proc.Kill()
	var err error
	for range 20 { // the port may linger a moment after the kill
		if err = s.start(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
	return err
}

// freePort is a loopback port free a moment ago (and port+10000 too for a
// cluster node's bus).
func freePort(bus bool) (int, error) {
	var lastErr error
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lastErr = err
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			l.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		l.Close()
		if err != nil {
			lastErr = err
			continue
		}
		b.Close()
		return port, nil
	}
	return 0, fmt.Errorf("chaos: no free port: %v", lastErr)
}

// Do sends one command to addr on a connection of its own and answers the
// reply in RESP2 form (string, int64, []any; an error reply is an error, a
// nil reply is nil). It keeps pools, retries and cluster redirects out of
// probes and fault injection: a fault must reach exactly the node named.
func Do(addr string, args ...string) (any, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
		DialTimeout: respTimeout, ReadTimeout: respTimeout, WriteTimeout: respTimeout,
	})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), respTimeout)
	defer cancel()
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	v, err := rdb.Do(ctx, cmd...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// infoField reads "name:value" from an INFO or CLUSTER INFO reply.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
