package batch

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// The limits of every batch.
const (
	// MaxItems is the most items in one batch, as Config.Items counts
	// them: 1000, the engine's MaxBatch (queue.MaxBatch), the most that one
	// script call takes. A first item that counts for more still goes,
	// alone, and the engine names its error.
	MaxItems = 1000
	// MaxBytes is the most bytes in one batch, as Config.Size counts them
	// (payloads, results): 1 MiB, which bounds what one script call
	// carries and so how long it holds Redis. A first item larger than
	// this still goes, alone.
	MaxBytes = 1 << 20
	// MaxWaiting is how many calls may wait for the next batch of one key:
	// 4 × MaxItems, four batches' worth. A call that finds that many
	// waiting is sent at once, alone, rather than join a queue without
	// bound.
	MaxWaiting = 4 * MaxItems
	// CallTimeout bounds one batch's call. It outlasts the engine's retries
	// while a Redis Cluster slot migrates (2 minutes), which a single call
	// under a caller's context without a deadline would also wait
	// through.
	CallTimeout = 2*time.Minute + 30*time.Second
)

// Send sends items, a batch of key, in one call under ctx, and answers
// them: res and errs are each nil (no result, no error) or hold one entry
// an item, items[i]'s result and error. A non-nil err is an error of the
// call as a whole, and every item's.
type Send[I, R any] func(ctx context.Context, key string, items []I) (res []R, errs []error, err error)

// Config says how much an item weighs against the limits of a batch.
type Config[I any] struct {
	// Items is how many items item counts for against MaxItems: a claim
	// counts the jobs it asks for. Defaults to 1 an item.
	Items func(item I) int
	// Size is item's size in bytes against MaxBytes: a payload, a result
	// with its artifacts, a note. Defaults to 0 (no limit in bytes).
	Size func(item I) int
}

// PanicError is the answer of every item of a batch whose Send panicked.
type PanicError struct {
	Value any    // what Send panicked with
	Stack []byte // the stack of the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("batch: send panicked: %v", e.Value) }

// Unwrap answers the value of the panic when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Batcher batches the items of each key (see the package doc). It is safe
// for concurrent use; its zero value is not: make one with [New].
type Batcher[I, R any] struct {
	send Send[I, R]
	cfg  Config[I]

	mu   sync.Mutex
	keys map[string]*waitList[I, R] // keys whose sender runs
}

// waitList is the calls waiting for the next batch of a key.
type waitList[I, R any] struct{ calls []*call[I, R] }

// call is one item on its way, and its answer once done is closed.
type call[I, R any] struct {
	item I
	res  R
	err  error
	done chan struct{}
}

// New answers a Batcher that sends its batches with send.
func New[I, R any](send Send[I, R], cfg Config[I]) *Batcher[I, R] {
	return &Batcher[I, R]{send: send, cfg: cfg, keys: map[string]*waitList[I, R]{}}
}

// Do sends item in the next batch of key and answers its result and
// error. When ctx ends first, Do answers ctx's error: at once, and the
// item is not sent if it still waited.
func (b *Batcher[I, R]) Do(ctx context.Context, key string, item I) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := &call[I, R]{item: item, done: make(chan struct{})}
	b.mu.Lock()
	w, running := b.keys[key]
	switch {
	case !running:
		w = &waitList[I, R]{calls: []*call[I, R]{c}}
		b.keys[key] = w
		b.mu.Unlock()
		go b.run(key, w)
	case len(w.calls) >= MaxWaiting:
		b.mu.Unlock()
		go b.sendBatch(key, []*call[I, R]{c})
	default:
		w.calls = append(w.calls, c)
		b.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if i := slices.Index(w.calls, c); i >= 0 {
		w.calls = slices.Delete(w.calls, i, i+1) // never sent
	}
	b.mu.Unlock()
	select {
	case <-c.done: // answered meanwhile
		return c.res, c.err
	default:
		return zero, ctx.Err()
	}
}

// Waiting is how many calls of key wait for its next batch.
func (b *Batcher[I, R]) Waiting(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.keys[key]; ok {
		return len(w.calls)
	}
	return 0
}

// run is the sender of key: it sends w's calls, batch after batch, until
// none is left, and then forgets key.
func (b *Batcher[I, R]) run(key string, w *waitList[I, R]) {
	for {
		runtime.Gosched() // let the callers just answered come back and join (see the package doc)
		b.mu.Lock()
		if len(w.calls) == 0 {
			delete(b.keys, key)
			b.mu.Unlock()
			return
		}
		n := b.take(w.calls)
		batch := slices.Clone(w.calls[:n])
		w.calls = slices.Delete(w.calls, 0, n)
		b.mu.Unlock()
		b.sendBatch(key, batch)
	}
}

// take is how many of the waiting calls the next batch takes: at least
// one, and as many more as MaxItems and MaxBytes allow.
func (b *Batcher[I, R]) take(waiting []*call[I, R]) int {
	n, items, size := 0, 0, 0
	for ; n < len(waiting); n++ {
		item := waiting[n].item
		if b.cfg.Items != nil {
			items += b.cfg.Items(item)
		} else {
			items++
		}
		if b.cfg.Size != nil {
			size += b.cfg.Size(item)
		}
		if n > 0 && (items > MaxItems || size > MaxBytes) {
			break
		}
	}
	return n
}

// sendBatch sends batch in one call and answers each of its calls.
func (b *Batcher[I, R]) sendBatch(key string, batch []*call[I, R]) {
	items := make([]I, len(batch))
	for i, c := range batch {
		items[i] = c.item
	}
	res, errs, err := b.call(key, items)
	if err == nil && (res != nil && len(res) != len(batch) || errs != nil && len(errs) != len(batch)) {
		err = fmt.Errorf("batch: send answered %d results and %d errors for %d items", len(res), len(errs), len(batch))
	}
	for i, c := range batch {
		switch {
		case err != nil:
			c.err = err
		default:
			if res != nil {
				c.res = res[i]
			}
			if errs != nil {
				c.err = errs[i]
			}
		}
		close(c.done)
	}
}

// call runs Send on items under a context of the batch's own, and answers
// a panic as a *PanicError.
func (b *Batcher[I, R]) call(key string, items []I) (res []R, errs []error, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			res, errs, err = nil, nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return b.send(ctx, key, items)
}
