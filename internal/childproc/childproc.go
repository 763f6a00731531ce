// Package childproc starts child processes that never outlive this one.
//
// It exists for `chronoq serve`'s own redis-server (package
// internal/localredis): a child left running after serve was killed
// (kill -9, an OOM kill, a crash) would hold the data directory and its
// port, keep memory, and could be written by no one. On Linux every child
// is started with Pdeathsig SIGKILL from one OS thread that lives as long
// as the process (Pdeathsig fires when the thread that forked the child
// exits, not the process), so the kernel kills it when this process dies
// however it dies; and in a process group of its own, so that a Ctrl-C of
// the terminal reaches only the parent, which stops its children in order.
// The test machinery's testutil/redisproc starts the tests' servers
// through Spawn too.
package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Child is one running child process.
type Child struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// Start starts bin with args in dir, its output appended to the file
// logPath (created when missing).
func Start(bin string, args []string, dir, logPath string) (*Child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // G304: the caller names its child's log
	if err != nil {
		return nil, fmt.Errorf("childproc: log of %s: %w", bin, err)
	}
	defer logf.Close() // the child holds its own descriptor
	// The binary is the caller's to name, and a child lives until Stop,
	// not until a context ends.
	cmd := exec.Command(bin, args...) //nolint:gosec,noctx // G204: running the caller's binary is the point
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := Spawn(cmd); err != nil {
		return nil, fmt.Errorf("childproc: start %s: %w", bin, err)
	}
	c := &Child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is how the child exited; valid once Done is closed.
func (c *Child) Err() error { return c.waitErr }

// Stop asks the child to end (SIGTERM to its process group) and waits up
// to grace for it; then kills it (SIGKILL) and waits for that. It answers
// an error when the child had to be killed or exited with a failure.
// Stopping a child that ended already answers how it ended.
func (c *Child) Stop(grace time.Duration) error {
	select {
	case <-c.done:
		return c.waitErr
	default:
	}
	_ = syscall.Kill(-c.Pid(), syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return c.waitErr
	case <-t.C:
	}
	_ = syscall.Kill(-c.Pid(), syscall.SIGKILL)
	<-c.done
	return errors.Join(fmt.Errorf("childproc: %s did not stop within %s: killed", c.cmd.Path, grace), c.waitErr)
}
