package redisproc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/chronoq/chronoq/internal/childproc"
)

// Bounds of the waits on child processes.
const (
	killWait = 5 * time.Second  // reaping after SIGKILL (immediate in practice)
	termWait = 10 * time.Second // graceful exit after SIGTERM, then SIGKILL
)

// SpawnerFunc names, as goroutine leak checks (go.uber.org/goleak) see it,
// the one goroutine that lives as long as the process: on Linux, the
// spawner that starts every child from a thread of its own
// (childproc.Spawn). Elsewhere there is no such goroutine.
const SpawnerFunc = childproc.SpawnerFunc

// Child is one child process. Every child runs in a process group of its
// own (Setpgid), so that a signal reaches its own children too
// (redis-server forks for AOF rewrites) and a Ctrl-C of the terminal
// reaches only the parent, which stops them in order; on Linux it also
// dies with this process (Pdeathsig SIGKILL, see childproc.Spawn).
type Child struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// StartChild starts bin with args in dir ("" for the current directory),
// its output appended to logPath.
func StartChild(name, bin string, args []string, dir, logPath string) (*Child, error) {
	return StartChildEnv(name, bin, args, nil, dir, logPath)
}

// StartChildEnv is StartChild with env ("KEY=value") added to this
// process's environment.
func StartChildEnv(name, bin string, args, env []string, dir, logPath string) (*Child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("redisproc: log of %s: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := childproc.Spawn(cmd); err != nil {
		return nil, fmt.Errorf("redisproc: start %s: %w", name, err)
	}
	p := &Child{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process id.
func (p *Child) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (p *Child) Done() <-chan struct{} { return p.done }

// Running reports whether the child has not exited.
func (p *Child) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err is the child's exit error, once Done is closed (nil before).
func (p *Child) Err() error {
	if p.Running() {
		return nil
	}
	return p.waitErr // Running saw done closed: Wait has returned
}

// Signal sends sig to the child's process group (spawn makes the child
// the leader of a group of its own, whose id is its pid).
func (p *Child) Signal(sig syscall.Signal) error {
	if !p.Running() {
		return errors.New("redisproc: " + p.Name + " is not running")
	}
	return syscall.Kill(-p.Pid(), sig)
}

// Kill sends SIGKILL to the group and waits (bounded) for the exit.
func (p *Child) Kill() {
	_ = p.Signal(syscall.SIGKILL) // an error only says it has exited already
	select {
	case <-p.done:
	case <-time.After(killWait):
	}
}

// Stop sends SIGTERM (and SIGCONT, in case it is stopped), waits up to
// wait (10 s when 0), then kills.
func (p *Child) Stop(wait time.Duration) {
	if !p.Running() {
		return
	}
	if wait <= 0 {
		wait = termWait
	}
	_ = p.Signal(syscall.SIGTERM)
	_ = p.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
		return
	case <-time.After(wait):
	}
	p.Kill()
}

// LogTail is at most the last n bytes of the child's log, from a line
// start.
func (p *Child) LogTail(n int) string { return tail(readFrom(p.LogPath, 0), n) }

// readFrom is the content of path from offset on (nil on error).
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

// tail is at most the last n bytes of b, starting at a line boundary when
// it has to cut.
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
