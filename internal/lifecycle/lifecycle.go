// Package lifecycle starts and stops the long-running parts of chronoq
// for the callers that want Start and Stop rather than a goroutine of
// their own.
//
// Every long-running part (the promoter, the reclaimer, the worker, the
// cron scheduler) follows one convention, [Runner]: Run(ctx) works until
// ctx ends, waits for what it started, and answers nil on a clean stop.
// A program that runs one calls Run in a goroutine; one that runs
// several, or a test that stops one halfway, uses [Start] or a [Group]:
//
//	h := lifecycle.Start(ctx, promoter)
//	...
//	err := h.Stop(shutdownCtx) // Run's answer, or shutdownCtx's error
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Runner is the convention of chronoq's long-running parts. Run works
// until ctx ends, then stops what it started and returns: nil on a clean
// stop, an error when the stop was not clean (a worker that had to hand
// running jobs back) or when it could not run at all (already running).
type Runner interface {
	Run(ctx context.Context) error
}

// Handle is one Run under way in a goroutine of its own.
type Handle struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start calls r.Run in a goroutine of its own, with a context that ends
// when ctx ends or at [Handle.Stop], and returns at once.
func Start(ctx context.Context, r Runner) *Handle {
	ctx, cancel := context.WithCancel(ctx)
	h := &Handle{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer cancel()
		h.err = r.Run(ctx)
	}()
	return h
}

// Stop ends Run's context and waits for Run to return, or for ctx to
// end. It answers Run's error, or ctx's error when it stopped waiting
// (Run then goes on stopping in its goroutine). Any number of calls may
// be made; each answers the same once Run has returned.
func (h *Handle) Stop(ctx context.Context) error {
	h.cancel()
	select {
	case <-h.done:
		return h.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when Run has returned.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Err is Run's answer, once Done is closed; nil before.
func (h *Handle) Err() error {
	select {
	case <-h.done:
		return h.err
	default:
		return nil
	}
}

// Group is Runners started together and stopped together. The zero
// value is ready to use.
type Group struct {
	mu   sync.Mutex
	runs []named
}

type named struct {
	name string
	h    *Handle
}

// Start starts r (see [Start]), under name for the errors of
// [Group.Stop].
func (g *Group) Start(ctx context.Context, name string, r Runner) {
	h := Start(ctx, r)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs = append(g.runs, named{name, h})
}

// Stop ends every Run of the group at once and waits for them all, or
// for ctx to end. It answers their errors, each prefixed by its name.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	runs := g.runs
	g.mu.Unlock()
	for _, r := range runs {
		r.h.cancel()
	}
	var errs []error
	for _, r := range runs {
		if err := r.h.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
		}
	}
	return errors.Join(errs...)
}
