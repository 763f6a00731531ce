package redisproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
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
	go s.run()
	return s
})

// run is the spawner's goroutine. It never returns; leak checks name it
// ([SpawnerFunc]) to leave it out.
func (s *spawner) run() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the process
	for r := range s.reqs {
		r.done <- r.cmd.Start()
	}
}

// spawn starts cmd on the spawner's thread (see theSpawner), so that it
// dies with this process, in a process group of its own.
func spawn(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	done := make(chan error, 1)
	theSpawner().reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
