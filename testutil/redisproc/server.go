package redisproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const (
	// startAttempts is how many ports Start tries when the one it chose was
	// taken before redis-server could bind it; Restart, which must keep its
	// port, tries this many times while the old socket lingers.
	startAttempts = 3
	restartTries  = 20
	restartPause  = 100 * time.Millisecond
	// readyPoll is the pause between readiness probes.
	readyPoll = 20 * time.Millisecond
	// logTailBytes is how much of a server's log an error quotes.
	logTailBytes = 4 << 10

	// NotFound says what to install when redis-server is missing.
	NotFound = "redis-server not found on PATH: install it (Debian: apt-get install redis-server)"
)

// errBind marks a start that failed because the port was already in use.
var errBind = errors.New("port already in use")

// Server is a redis-server on a loopback port that stays the same across
// restarts, in a directory of its own (where its log, RDB and AOF files
// are).
type Server struct {
	Name string
	Addr string
	Port int
	Dir  string
	bin  string
	args []string
	cur  *Child
}

// baseArgs are the arguments every server gets; args after them override
// them (redis-server keeps the last value).
func baseArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", ""} // stdout, which goes to dir/redis.log
}

// Start starts bin (redis-server) in dir on a free loopback port — whose
// cluster bus port, port+10000, is free too when bus is set — with args
// after the defaults (no persistence), and waits until it answers as the
// process started, for as long as ctx allows. A port taken between choosing
// and binding it is replaced by another. An error quotes the server's log.
func Start(ctx context.Context, name, bin, dir string, args []string, bus bool) (*Server, error) {
	var err error
	for range startAttempts {
		var port int
		if port, err = freePort(bus); err != nil {
			return nil, err
		}
		s := &Server{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port,
			Dir: dir, bin: bin, args: append([]string(nil), args...)}
		if err = s.start(ctx); err == nil {
			return s, nil
		}
		if !errors.Is(err, errBind) {
			return nil, err
		}
	}
	return nil, err
}

// Child is the server's current process (a new one after each Restart).
func (s *Server) Child() *Child { return s.cur }

// LogTail is the end of the server's log, as much as an error quotes.
func (s *Server) LogTail() string { return s.cur.LogTail(logTailBytes) }

// Pid is the current process id.
func (s *Server) Pid() int { return s.cur.Pid() }

// Kill SIGKILLs the server: nothing is flushed beyond what fsync made
// durable.
func (s *Server) Kill() { s.cur.Kill() }

// Stop shuts the server down with SIGTERM (SIGKILL after 10 s). Stopping a
// stopped server does nothing.
func (s *Server) Stop() { s.cur.Stop(0) }

// Restart starts the server again after a Kill or Stop: same port, same
// directory and arguments (it loads its AOF or RDB, if any), and waits
// until it answers.
func (s *Server) Restart(ctx context.Context) error {
	if s.cur.Running() {
		return fmt.Errorf("redisproc: restart %s on %s: still running", s.Name, s.Addr)
	}
	var err error
	for range restartTries { // the old socket may linger a moment
		if err = s.start(ctx); !errors.Is(err, errBind) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(restartPause):
		}
	}
	return err
}

func (s *Server) start(ctx context.Context) error {
	logPath := filepath.Join(s.Dir, "redis.log")
	var logStart int64 // this run's output starts here
	if fi, err := os.Stat(logPath); err == nil {
		logStart = fi.Size()
	}
	c, err := StartChild(s.Name, s.bin, append(baseArgs(s.Port, s.Dir), s.args...), s.Dir, logPath)
	if err != nil {
		return err
	}
	s.cur = c
	if err := s.waitReady(ctx); err != nil {
		c.Kill()
		out := readFrom(logPath, logStart)
		if bytes.Contains(out, []byte("Address already in use")) {
			err = fmt.Errorf("%w: %w", errBind, err)
		}
		return fmt.Errorf("redis-server %s (dir %s): %w\n--- log tail ---\n%s", s.Addr, s.Dir, err, tail(out, logTailBytes))
	}
	return nil
}

// waitReady polls until the server answers PING and INFO names our
// process (a foreign server that took the port has another pid), until the
// process exits, or until ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	pid := strconv.Itoa(s.cur.Pid())
	for {
		if !s.cur.Running() {
			if err := s.cur.Err(); err != nil {
				return fmt.Errorf("exited before becoming ready: %w", err)
			}
			return errors.New("exited before becoming ready")
		}
		err := probe(s.Addr, pid)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last: %w)", ctx.Err(), err)
		case <-s.cur.Done():
		case <-time.After(readyPoll):
		}
	}
}

// probe checks that addr answers PING as the server with process id pid.
func probe(addr, pid string) error {
	if _, err := Do(addr, "PING"); err != nil {
		return err
	}
	info, err := Do(addr, "INFO", "server")
	if err != nil {
		return err
	}
	if got := InfoField(AsString(info), "process_id"); got != pid {
		return fmt.Errorf("%s is served by pid %s, not by our redis-server (pid %s)", addr, got, pid)
	}
	return nil
}

// freePort is a loopback TCP port that was free a moment ago; with bus,
// port+10000 (the Redis Cluster bus port) was free as well.
func freePort(bus bool) (int, error) {
	var lastErr error
	for range 200 {
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
			lastErr = fmt.Errorf("port %d leaves no room for its cluster bus port", port)
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
	return 0, fmt.Errorf("redisproc: no free loopback port: %w", lastErr)
}
