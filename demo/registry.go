package demo

import (
	"cmp"
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

// registryTimeout bounds one registration, refresh or deregistration of a
// simulated worker.
const registryTimeout = 2 * time.Second

// Labels are the registry labels of every simulated worker.
var Labels = []string{"simulated"}

// WorkerID is the registry id of simulated worker n (from 1) in its
// incarnation inc (from 1; one more each time it hangs): "demo-3", then
// "demo-3.2", "demo-3.3"...
func WorkerID(n, inc int) string {
	id := "demo-" + strconv.Itoa(n)
	if inc > 1 {
		id += "." + strconv.Itoa(inc)
	}
	return id
}

// registrations keeps the simulated workers in the worker registry
// (package registry), as a Go worker (package worker) keeps itself: each
// registers when it starts, with the jobs it holds at each claim and end
// of a job, is refreshed every third of the registry's TTL, and
// deregisters when it stops (the pool shrinks or stops). A hung worker
// has crashed: its entry is left as it was, holding its job, never
// refreshed, until its TTL lapses; its replacement registers under the
// next incarnation's id. Registry failures are logged: they never stop a
// worker.
type registrations struct {
	p    *Pool
	reg  *registry.Registry
	info registry.Info // without the id
	ttl  time.Duration

	mu    sync.Mutex // guards slots (not what each holds)
	slots map[int]*slot
}

// slot is worker number n's entry. mu is held across each registry call
// of the slot, so that they land in order.
type slot struct {
	mu   sync.Mutex
	n    int
	gen  int  // the goroutine that owns the slot (the last to start for it)
	inc  int  // the incarnation, from 1
	live bool // registered under its id, refreshed
	held []registry.JobRef
}

func newRegistrations(p *Pool, reg *registry.Registry, host, version string) *registrations {
	if reg == nil {
		return nil
	}
	if host == "" {
		host, _ = os.Hostname()
	}
	if len(host) > registry.MaxHostBytes || !utf8.ValidString(host) {
		host = ""
	}
	if version == "" {
		version = binaryVersion()
	}
	if len(version) > registry.MaxVersionBytes || !utf8.ValidString(version) {
		version = ""
	}
	return &registrations{p: p, reg: reg, ttl: reg.TTL(), slots: map[int]*slot{},
		info: registry.Info{Host: host, Labels: Labels, Queues: []string{p.cfg.Queue}, Version: version}}
}

// binaryVersion is the running binary's main module version.
func binaryVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return cmp.Or(bi.Main.Version, "(devel)")
	}
	return "(devel)"
}

func (r *registrations) slot(n int) *slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slots[n]
	if s == nil {
		s = &slot{n: n, inc: 1}
		r.slots[n] = s
	}
	return s
}

// register writes s as it is now; s.mu is held.
func (r *registrations) register(s *slot) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.p.base), registryTimeout)
	defer cancel()
	info := r.info
	info.ID = WorkerID(s.n, s.inc)
	jobs := append([]registry.JobRef{}, s.held...)
	if _, err := r.reg.Register(ctx, registry.Registration{Info: info, Jobs: jobs, TTL: r.ttl}); err != nil {
		r.p.log.Warn("demo: registering a worker failed", "id", info.ID, "err", err)
	}
}

// self is a worker goroutine's view of its slot: its number (from 1),
// its generation and its id now.
type self struct {
	n, gen int
	id     string
}

// start makes the goroutine starting for worker n (from 1) the slot's
// owner and registers it, holding nothing. It answers what the calls
// below take.
func (r *registrations) start(n int) *self {
	if r == nil {
		return &self{n: n, id: WorkerID(n, 1)}
	}
	s := r.slot(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.live, s.held = true, nil
	r.register(s)
	return &self{n: n, gen: s.gen, id: WorkerID(n, s.inc)}
}

// update changes what worker me holds (when it still owns its slot) and
// registers it again.
func (r *registrations) update(me *self, f func(s *slot)) {
	if r == nil {
		return
	}
	s := r.slot(me.n)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != me.gen || !s.live {
		return
	}
	f(s)
	me.id = WorkerID(s.n, s.inc)
	r.register(s)
}

// claimed records job j as held by worker me.
func (r *registrations) claimed(me *self, j *queue.Job) {
	r.update(me, func(s *slot) { s.held = append(s.held, registry.JobRef{Queue: j.Queue, ID: j.ID}) })
}

// done records that worker me no longer holds job j.
func (r *registrations) done(me *self, j *queue.Job) {
	r.update(me, func(s *slot) {
		for i, h := range s.held {
			if h.ID == j.ID && h.Queue == j.Queue {
				s.held = append(s.held[:i:i], s.held[i+1:]...)
				break
			}
		}
	})
}

// hung abandons worker me's entry as a crash would (it keeps its jobs
// until it expires) and registers its replacement, the next incarnation
// (me's id becomes its).
func (r *registrations) hung(me *self) {
	r.update(me, func(s *slot) { s.inc++; s.held = nil })
}

// stop deregisters worker me, unless a newer goroutine owns its slot.
func (r *registrations) stop(me *self) {
	if r == nil {
		return
	}
	s := r.slot(me.n)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != me.gen || !s.live {
		return
	}
	s.live, s.held = false, nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.p.base), registryTimeout)
	defer cancel()
	if _, err := r.reg.Deregister(ctx, WorkerID(s.n, s.inc)); err != nil {
		r.p.log.Warn("demo: deregistering a worker failed; its entry expires by itself", "id", WorkerID(s.n, s.inc), "err", err)
	}
}

// refresh registers every live worker again, every third of the TTL on
// the pool's clock, until ctx ends or quit closes.
func (r *registrations) refresh(ctx context.Context, quit <-chan struct{}) {
	t := r.p.clock.NewTimer(r.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-quit:
			return
		case <-t.Chan():
		}
		t.Reset(r.ttl / 3)
		r.mu.Lock()
		slots := make([]*slot, 0, len(r.slots))
		for _, s := range r.slots {
			slots = append(slots, s)
		}
		r.mu.Unlock()
		for _, s := range slots {
			s.mu.Lock()
			if s.live {
				r.register(s)
			}
			s.mu.Unlock()
		}
	}
}
