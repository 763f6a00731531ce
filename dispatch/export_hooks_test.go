package dispatch

import "context"

// HookPass runs one event webhook pass of d now, as its loop does each
// Config.HookInterval: tests on a fake clock drive the passes themselves.
func HookPass(ctx context.Context, d *Dispatcher) error { return d.hookPass(ctx) }
