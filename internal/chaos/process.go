package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Bounds of the waits on child processes.
const (
	killWait = 5 * time.Second  // reaping after SIGKILL (immediate in practice)
	termWait = 10 * time.Second // graceful exit after SIGTERM, then SIGKILL
)

// spawner starts every child from one OS thread that never exits. Pdeathsig
// fires when the thread that forked the child exits, not the process: a
// child started from a goroutine's thread that the runtime later retires
// would be killed early. One locked, never-ending goroutine makes
// Pdeathsig mean "when this process dies".
type spawner struct{ reqs chan spawnReq }

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var theSpawner = sync.OnceValue(func() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return s
})

// Proc is one child process. Every child dies with this process (Pdeathsig
// SIGKILL) and runs in a process group of its own (Setpgid), so that a
// signal reaches its own children too (redis-server forks for AOF
// rewrites) and a Ctrl-C of the terminal reaches only the parent, which
// stops them in order.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// StartProc starts bin with args, its output appended to logPath.
func StartProc(name, bin string, args []string, logPath string, env []string) (*Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: log of %s: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	done := make(chan error, 1)
	theSpawner().reqs <- spawnReq{cmd: cmd, done: done}
	if err := <-done; err != nil {
		return nil, fmt.Errorf("chaos: start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Running reports whether the child has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err is the child's exit error, once Done is closed.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
}

// Signal sends sig to the child's process group.
func (p *Proc) Signal(sig syscall.Signal) error {
	if !p.Running() {
		return errors.New("chaos: " + p.Name + " is not running")
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil {
		return p.cmd.Process.Signal(sig)
	}
	return nil
}

// Kill sends SIGKILL to the group and waits (bounded) for the exit.
func (p *Proc) Kill() {
	if p.Running() {
		_ = p.Signal(syscall.SIGKILL)
	}
	select {
	case <-p.done:
	case <-time.After(killWait):
	}
}

// Stop sends SIGTERM (and SIGCONT, in case it is stopped), waits up to
// wait (termWait when 0), then kills.
func (p *Proc) Stop(wait time.Duration) {
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

// Group tracks the children of a run so that all of them are stopped at
// the end, whatever happened.
type Group struct {
	mu    sync.Mutex
	procs []*Proc
}

// Add tracks p.
func (g *Group) Add(p *Proc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.procs = append(g.procs, p)
}

// Each calls fn for every child tracked.
func (g *Group) Each(fn func(*Proc)) {
	g.mu.Lock()
	procs := append([]*Proc(nil), g.procs...)
	g.mu.Unlock()
	for _, p := range procs {
		fn(p)
	}
}

// KillAll SIGKILLs every child still running, in parallel, and waits.
func (g *Group) KillAll() {
	g.mu.Lock()
	procs := g.procs
	g.procs = nil
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.Kill)
	}
	wg.Wait()
}
