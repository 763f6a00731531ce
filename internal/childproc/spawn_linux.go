package childproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// SpawnerFunc names, as goroutine leak checks (go.uber.org/goleak) see it,
// the one goroutine of this package that lives as long as the process:
// the spawner (see Spawn).
const SpawnerFunc = "github.com/chronoq/chronoq/internal/childproc.(*spawner).run"

// spawner starts every child from one OS thread that never exits, which
// makes Pdeathsig mean "when this process dies" (see the package doc).
type spawner struct{ reqs chan spawnReq }

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var theSpawner = sync.OnceValue(func() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	go s.run()
	return s
})

// run is the spawner's goroutine; it never returns.
func (s *spawner) run() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the process
	for r := range s.reqs {
		r.done <- r.cmd.Start()
	}
}

// Spawn starts cmd on the spawner's thread, so that it dies with this
// process, in a process group of its own.
func Spawn(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	done := make(chan error, 1)
	theSpawner().reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
