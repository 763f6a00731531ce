package dispatch

import (
	"context"
	"sync"
)

// HookPass runs one event webhook pass of d now, as its loop does each
// Config.HookInterval, and waits for its deliveries: tests on a fake
// clock drive the passes themselves.
func HookPass(ctx context.Context, d *Dispatcher) error {
	var sending sync.WaitGroup
	err := d.hookPass(ctx, &sending)
	sending.Wait()
	return err
}
