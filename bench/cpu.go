package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
)

// profiler writes a CPU profile of each timed flow into a directory
// (-cpuprofile), one file a flow: "<side>-<flow>.pprof".
type profiler struct{ dir string }

// start begins the profile of name; the function answered ends it. With
// no directory, or when a profile cannot start, it does nothing.
func (p profiler) start(name string) func() {
	if p.dir == "" {
		return func() {}
	}
	path := filepath.Join(p.dir, strings.ReplaceAll(name, " ", "-")+".pprof")
	f, err := os.Create(path)
	if err != nil {
		logf("cpuprofile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		logf("cpuprofile: %v", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			logf("cpuprofile: %v", err)
			return
		}
		logf("cpuprofile: %s", path)
	}
}

func (p profiler) check() error {
	if p.dir == "" {
		return nil
	}
	if fi, err := os.Stat(p.dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("-cpuprofile %s: not a directory", p.dir)
	}
	return nil
}
