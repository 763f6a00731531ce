package testutil

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds how long a freshly started redis-server may take to
	// answer PING.
	readyTimeout = 10 * time.Second
	// pollInterval is the pause between readiness probes.
	pollInterval = 20 * time.Millisecond
	// stopTimeout bounds how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 10 * time.Second
	// killTimeout bounds how long we wait for a process to be reaped after
	// SIGKILL (it should be immediate).
	killTimeout = 5 * time.Second
	// startAttempts is how many times a server is started, each time on a new
	// port, when the chosen port turned out to be taken.
	startAttempts = 3
	// logTailBytes is how much of a server log is quoted in errors.
	logTailBytes = 4 << 10

	logFileName = "redis.log"

	notFoundMsg = "redis-server not found on PATH: install it (Debian: apt-get install redis-server)"
)

// errBind marks a start failure caused by a port that was already in use;
// such failures are retried.
var errBind = errors.New("port already in use")

// proc is one running (or exited) redis-server process.
type proc struct {
	addr    string
	port    int
	dir     string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done is closed
}

// baseArgs are the redis-server arguments every server gets; callers append
// their own, which override these (redis-server keeps the last value).
func baseArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "", // log to stdout, which goes to dir/redis.log
	}
}

// sysProcAttr makes children die with the test binary and keeps them out of
// the terminal's process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// startProc starts bin (redis-server) on 127.0.0.1:port with dir as working
// directory and log location, and waits until it answers PING. args are
// appended to baseArgs. On failure the process is gone and the error quotes
// the server's log; it wraps errBind when the port was taken.
func startProc(bin string, port int, dir string, args []string) (*proc, error) {
	logPath := filepath.Join(dir, logFileName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open redis log: %w", err)
	}
	defer logFile.Close() // the child has its own copy of the descriptor
	st, err := logFile.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat redis log: %w", err)
	}
	logStart := st.Size() // this run's output starts here

	fullArgs := append(baseArgs(port, dir), args...)
	cmd := exec.Command(bin, fullArgs...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		port:    port,
		dir:     dir,
		logPath: logPath,
		cmd:     cmd,
		done:    make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	if err := p.waitReady(); err != nil {
		p.kill()
		out := readFrom(logPath, logStart)
		if bytes.Contains(out, []byte("Address already in use")) {
			err = fmt.Errorf("%w: %w", errBind, err)
		}
		return nil, fmt.Errorf("redis-server %s (dir %s): %w\n--- log tail ---\n%s",
			p.addr, dir, err, tail(out, logTailBytes))
	}
	return p, nil
}

// waitReady polls the server until it answers PING and INFO reports this
// process' pid (so that a foreign server which grabbed the port first is not
// mistaken for ours), or until the process exits or readyTimeout passes.
func (p *proc) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	pid := strconv.Itoa(p.cmd.Process.Pid)
	var lastErr error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("exited before becoming ready: %v", p.waitErr)
		default:
		}
		lastErr = probe(p.addr, pid)
		if lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", readyTimeout, lastErr)
		}
		select {
		case <-p.done:
		case <-time.After(pollInterval):
		}
	}
}

// probe checks that addr answers PING and, if pid is not empty, that the
// server there has that process id.
func probe(addr, pid string) error {
	reply, err := redisDo(addr, time.Second, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING replied %q", reply)
	}
	if pid == "" {
		return nil
	}
	info, err := redisDo(addr, time.Second, "INFO", "server")
	if err != nil {
		return err
	}
	if got := infoField(info, "process_id"); got != pid {
		return fmt.Errorf("%s is served by pid %s, not by our redis-server (pid %s)", addr, got, pid)
	}
	return nil
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits up to stopTimeout, then kills. Idempotent.
func (p *proc) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(stopTimeout):
	}
	p.kill()
}

// kill SIGKILLs the process group (redis-server plus any child it forked
// for persistence) and waits, boundedly, for the process to be reaped.
func (p *proc) kill() {
	if p.running() {
		// The group id is the pid (Setpgid); fall back to the process alone.
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			_ = p.cmd.Process.Kill()
		}
	}
	select {
	case <-p.done:
	case <-time.After(killTimeout):
	}
}

// logTail returns the end of the process' log file.
func (p *proc) logTail() string {
	return tail(readFrom(p.logPath, 0), logTailBytes)
}

// readFrom returns the content of path from offset on ("" on error).
func readFrom(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

// tail returns at most the last n bytes of b, starting at a line boundary
// when it has to cut.
func tail(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	b = b[len(b)-n:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return "...\n" + string(b)
}

// freePort returns a loopback TCP port that was free a moment ago. If
// withBus is set, the port is below 55536 and port+10000 (the Redis Cluster
// bus port) was free as well. The returned listeners hold the ports; the
// caller closes them right before starting the server.
func freePort(withBus bool) (int, []net.Listener, error) {
	var lastErr error
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lastErr = err
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !withBus {
			return port, []net.Listener{l}, nil
		}
		if port+10000 > 65535 {
			l.Close()
			lastErr = fmt.Errorf("port %d leaves no room for its cluster bus port", port)
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			l.Close()
			lastErr = err
			continue
		}
		return port, []net.Listener{l, bus}, nil
	}
	return 0, nil, fmt.Errorf("no free loopback port found: %w", lastErr)
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// startOnFreePort starts a server on a fresh free port (with a free cluster
// bus port too if withBus), retrying with a new port when the port was taken
// between choosing and binding it. Servers started one after another get
// distinct ports, since a running server holds its ports.
func startOnFreePort(bin, dir string, args []string, withBus bool) (*proc, error) {
	var err error
	for range startAttempts {
		var port int
		var ls []net.Listener
		port, ls, err = freePort(withBus)
		if err != nil {
			return nil, err
		}
		closeAll(ls)
		var p *proc
		p, err = startProc(bin, port, dir, args)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errBind) {
			return nil, err
		}
	}
	return nil, err
}

// redisDo sends one command over a fresh connection and returns the reply
// of a simple-string, bulk-string or integer type. It deliberately avoids
// go-redis (no pool, retries or handshake) so that probing is predictable.
func redisDo(addr string, timeout time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis error: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("unexpected bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unsupported reply %q", line)
	}
}

// infoField extracts "name:value" from an INFO / CLUSTER INFO reply.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
