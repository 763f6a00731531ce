package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// redisServer is the redis-server this program started for itself: on a
// free loopback port, in a temporary directory, without persistence.
type redisServer struct{ proc *redisproc.Server }

const (
	startTimeout = 10 * time.Second // a start, up to its answering PING
	stopGrace    = 5 * time.Second  // SIGTERM, then SIGKILL after this
	opTimeout    = 10 * time.Second // one INFO / FLUSHALL / PING
)

// startRedis starts a redis-server on a free loopback port and waits until
// it answers (as the process started, not as a foreign server that took
// the port), for at most startTimeout or until ctx ends. The process is
// testutil/redisproc's, as the tests' servers are: in a process group of
// its own (a Ctrl-C at the terminal is ours to handle, not the server's)
// and, on Linux, killed by the kernel if this program dies.
func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found: run `make deps`, or pass -redis host:port of an empty server")
	}
	dir, err := os.MkdirTemp("", "chronoq-bench-redis-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// No persistence: redisproc's defaults already, and what the memory
	// figures assume.
	s, err := redisproc.Start(ctx, "redis-server", bin, dir, []string{"--save", "", "--appendonly", "no"}, false)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting redis-server: %w", err) // quotes its log
	}
	return &redisServer{proc: s}, nil
}

// stop ends the server (SIGTERM, then SIGKILL) and removes its directory.
func (s *redisServer) stop() {
	s.proc.Child().Stop(stopGrace)
	_ = os.RemoveAll(s.proc.Dir)
}

// info reads one section of INFO as a map.
func info(rdb *redis.Client, section string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// redisCPU is the CPU time redis-server has used (user + system): the
// figure that noisy neighbours on a shared machine do not move much.
func redisCPU(rdb *redis.Client) (time.Duration, error) {
	m, err := info(rdb, "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		f, err := strconv.ParseFloat(m[k], 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

// usedMemory is INFO memory's used_memory in bytes.
func usedMemory(rdb *redis.Client) (int64, error) {
	m, err := info(rdb, "memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(m["used_memory"], 10, 64)
}

// flushAll empties the server between scenarios.
func flushAll(rdb *redis.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return rdb.FlushAll(ctx).Err()
}

// keyCount is the number of keys over all databases (INFO keyspace).
func keyCount(rdb *redis.Client) (int64, error) {
	m, err := info(rdb, "keyspace")
	if err != nil {
		return 0, err
	}
	var n int64
	for k, v := range m {
		if !strings.HasPrefix(k, "db") {
			continue
		}
		keys, _, _ := strings.Cut(v, ",") // keys=12,expires=0,...
		x, _ := strconv.ParseInt(strings.TrimPrefix(keys, "keys="), 10, 64)
		n += x
	}
	return n, nil
}
