package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
)

// profiler writes a CPU profile of each timed flow into a directory
// (-cpuprofile), one file a flow: "<side>-<flow>.pprof".
type profiler struct{ dir string }

// start begins the profile of side's timed pass f (not of a split pass,
// whose logging of every command is not what the file is for); the
// function answered ends it, once however often it is called. With no
// directory, or when a profile cannot start, it does nothing.
func (p profiler) start(side string, f flow) func() {
	if f.split {
		return func() {}
	}
	return p.named(side + "-" + f.name())
}

// named begins a profile written to <name>.pprof, spaces made dashes;
// the function answered ends it, once however often it is called.
func (p profiler) named(name string) func() {
	if p.dir == "" {
		return func() {}
	}
	path := filepath.Join(p.dir, strings.ReplaceAll(name, " ", "-")+".pprof")
	out, err := os.Create(path)
	if err != nil {
		logf("cpuprofile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		logf("cpuprofile: %v", err)
		out.Close()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			if err := out.Close(); err != nil {
				logf("cpuprofile: %v", err)
				return
			}
			logf("cpuprofile: %s", path)
		})
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
