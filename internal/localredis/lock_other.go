//go:build !linux

package localredis

import "syscall"

// setLock is F_SETLK off Linux: a lock held by the process, which refuses
// another process (a second serve), not a second open in this one.
const setLock = syscall.F_SETLK
