package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is the redis-server this program started for itself: on a
// free loopback port, in a temporary directory, without persistence.
type redisServer struct {
	cmd    *exec.Cmd
	dir    string
	addr   string
	exited chan struct{} // closed when the process has exited
}

const (
	startAttempts = 5                      // free-port races: another process may take the port first
	pingEvery     = 50 * time.Millisecond  // while waiting for the server to answer
	pingFor       = 5 * time.Second        // how long a start may take
	stopGrace     = 5 * time.Second        // SIGTERM, then SIGKILL after this
	opTimeout     = 10 * time.Second       // one INFO / FLUSHALL / PING
	startPause    = 100 * time.Millisecond // between two start attempts
)

// startRedis starts a redis-server on a free loopback port and waits until
// it answers PING.
func startRedis() (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found: run `make deps`, or pass -redis host:port of an empty server")
	}
	dir, err := os.MkdirTemp("", "chronoq-bench-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := range startAttempts {
		if attempt > 0 {
			time.Sleep(startPause)
		}
		var s *redisServer
		s, err = startOnce(bin, dir)
		if err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("starting redis-server: %w", err)
}

func startOnce(bin, dir string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C at the terminal is ours to handle, not the server's
	setParentDeathSignal(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &redisServer{cmd: cmd, dir: dir, addr: addr, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for range int(pingFor / pingEvery) {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server on %s exited at start (see %s)", addr, filepath.Join(dir, "redis.log"))
		case <-time.After(pingEvery):
		}
		ctx, cancel := context.WithTimeout(context.Background(), pingEvery)
		err = rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
	}
	s.stopProcess()
	return nil, fmt.Errorf("redis-server on %s did not answer within %s: %w", addr, pingFor, err)
}

// stop ends the server (SIGTERM, then SIGKILL) and removes its directory.
func (s *redisServer) stop() {
	s.stopProcess()
	_ = os.RemoveAll(s.dir)
}

func (s *redisServer) stopProcess() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return
	case <-time.After(stopGrace):
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
