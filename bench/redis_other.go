//go:build !linux

package main

import "syscall"

// setParentDeathSignal does nothing outside Linux: redis-server is stopped
// by the program's own exit path only.
func setParentDeathSignal(*syscall.SysProcAttr) {}
