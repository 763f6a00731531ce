//go:build !linux

package childproc

import (
	"os/exec"
	"syscall"
)

// SpawnerFunc is empty off Linux: there is no spawner goroutine.
const SpawnerFunc = ""

// Spawn starts cmd in a process group of its own. Off Linux there is no
// Pdeathsig: a child outlives a parent that is killed without stopping it.
func Spawn(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}
