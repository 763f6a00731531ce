package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chronoq/chronoq/registry"
)

// heldRefreshGap is the least time between two refreshes of the registry
// made because the jobs the worker holds changed: a busy worker sends at
// most one a second, not one per job.
const heldRefreshGap = time.Second

// registryTimeout bounds one registration, refresh or deregistration.
const registryTimeout = 5 * time.Second

// registration keeps the worker's entry in the registry (package
// registry): it registers at Run, refreshes every third of the TTL and,
// within heldRefreshGap, after the jobs the worker holds changed, and
// deregisters at the stop. A failure is logged and tried again at the next
// refresh: the registry never stops the worker.
type registration struct {
	w       *Worker
	reg     *registry.Registry
	info    registry.Info
	ttl     time.Duration
	changed chan struct{} // the held jobs changed (capacity 1)
	quit    chan struct{} // closed by stop
	done    chan struct{} // closed when the loop has returned
	once    sync.Once
}

// newRegistration checks the registry's part of cfg and fills its
// defaults; nil when the registry is disabled.
func newRegistration(w *Worker, cfg *Config) (*registration, error) {
	if cfg.DisableRegistry {
		return nil, nil //nolint:nilnil // nil is "no registration"
	}
	host, _ := os.Hostname()
	if cfg.ID == "" {
		var b [3]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
		suffix := "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
		cfg.ID = cmp.Or(registry.SanitizeID(host, len(suffix)), "worker") + suffix
	}
	if cfg.Version == "" {
		cfg.Version = moduleVersion()
	}
	reg, err := registry.New(cfg.Client, registry.Config{TTL: cfg.RegistryTTL})
	if err != nil {
		return nil, fmt.Errorf("worker: Config.RegistryTTL: %w", err)
	}
	cfg.RegistryTTL = reg.TTL()
	info := registry.Info{ID: cfg.ID, Host: host, Labels: cfg.Labels, Version: cfg.Version}
	for _, q := range cfg.Queues {
		info.Queues = append(info.Queues, q.Name)
	}
	if len(info.Host) > registry.MaxHostBytes || !utf8.ValidString(info.Host) {
		info.Host = "" // not worth refusing to run for
	}
	if info, err = registry.CheckInfo(info); err != nil {
		return nil, fmt.Errorf("worker: Config: %w", err)
	}
	return &registration{w: w, reg: reg, info: info, ttl: cfg.RegistryTTL, changed: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}, nil
}

// moduleVersion is chronoq's module version as built into the binary, or
// the main module's.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/chronoq/chronoq" {
			return d.Version
		}
	}
	return bi.Main.Version
}

// start runs the loop.
func (r *registration) start() {
	if r != nil {
		go r.loop()
	}
}

// heldChanged tells the loop that the jobs the worker holds changed.
func (r *registration) heldChanged() {
	if r != nil {
		signal(r.changed)
	}
}

// stop ends the loop and deregisters the worker.
func (r *registration) stop() {
	if r == nil {
		return
	}
	r.once.Do(func() { close(r.quit) })
	<-r.done
	ctx, cancel := context.WithTimeout(r.w.bg, registryTimeout)
	defer cancel()
	if _, err := r.reg.Deregister(ctx, r.info.ID); err != nil {
		r.w.log.Warn("worker: deregistering failed; the entry expires by itself", "id", r.info.ID, "err", err)
	}
}

func (r *registration) loop() {
	defer close(r.done)
	every := r.ttl / 3
	// The timer is set before each refresh is sent: once a refresh is
	// seen in Redis, the next one is set (tests step a fake clock on it).
	last := r.w.clock.Now() // the last refresh sent
	t := r.w.clock.NewTimer(every)
	defer t.Stop()
	r.refresh()
	dirty := false // a refresh is owed
	for {
		select {
		case <-r.quit:
			return
		case <-t.Chan():
			dirty = true
		case <-r.changed:
			if dirty {
				continue // a refresh is due at the timer already
			}
			dirty = true
			if wait := heldRefreshGap - r.w.clock.Since(last); wait > 0 {
				t.Reset(wait)
				continue
			}
		}
		if !dirty {
			continue
		}
		last, dirty = r.w.clock.Now(), false
		t.Reset(every)
		r.refresh()
	}
}

// refresh sends the worker's registration with the jobs it holds now.
func (r *registration) refresh() {
	ctx, cancel := context.WithTimeout(r.w.bg, registryTimeout)
	defer cancel()
	if _, err := r.reg.Register(ctx, registry.Registration{Info: r.info, Jobs: r.w.held(), TTL: r.ttl}); err != nil {
		r.w.log.Warn("worker: registering failed; tried again at the next refresh", "id", r.info.ID, "err", err)
	}
}

// held lists the jobs the worker runs, by queue and id, at most
// registry.MaxHeldJobs of them; never nil.
func (w *Worker) held() []registry.JobRef {
	w.mu.Lock()
	out := make([]registry.JobRef, 0, len(w.running))
	for r := range w.running {
		out = append(out, registry.JobRef{Queue: r.job.Queue, ID: r.job.ID})
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b registry.JobRef) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(len(out), registry.MaxHeldJobs)]
}

// ID is the worker's id in the registry (Config.ID, or the default made
// for it); empty when Config.DisableRegistry.
func (w *Worker) ID() string {
	if w.reg == nil {
		return ""
	}
	return w.reg.info.ID
}
