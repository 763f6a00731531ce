package chaos

import (
	"sync"

	"github.com/chronoq/chronoq/testutil/redisproc"
)

// Group tracks the children of a run so that all of them are stopped at
// the end, whatever happened.
type Group struct {
	mu    sync.Mutex
	procs []*redisproc.Child
}

// Add tracks p.
func (g *Group) Add(p *redisproc.Child) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.procs = append(g.procs, p)
}

// Each calls fn for every child tracked.
func (g *Group) Each(fn func(*redisproc.Child)) {
	g.mu.Lock()
	procs := append([]*redisproc.Child(nil), g.procs...)
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
