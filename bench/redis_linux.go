package main

import "syscall"

// setParentDeathSignal makes the kernel kill redis-server if this program
// dies without stopping it (SIGKILL, a crash).
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
