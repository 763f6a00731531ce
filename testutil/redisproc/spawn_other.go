//go:build !linux

package redisproc

import (
	"os/exec"
	"syscall"
)

// spawn starts cmd in a process group of its own. Outside Linux there is
// no Pdeathsig: a child outlives this process if it dies without stopping
// the child (SIGKILL, a crash), and, with no parent-death signal tied to
// the forking thread, any thread may start it.
func spawn(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}
