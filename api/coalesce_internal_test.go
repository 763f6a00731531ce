package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// storeGate holds the calls of a test's store: each call, once recorded,
// says so on entered and waits for the gate to open (release).
type storeGate struct {
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
}

// pass records a call (record runs with mu held), then holds it at the
// gate.
func (g *storeGate) pass(record func()) {
	g.mu.Lock()
	record()
	g.mu.Unlock()
	g.entered <- struct{}{}
	<-g.gate
}

// newStoreGate answers a gate that holds every call until release opens
// it; up to capacity calls say they entered without waiting to be read.
func newStoreGate(capacity int) storeGate {
	return storeGate{gate: make(chan struct{}), entered: make(chan struct{}, capacity)}
}

// release opens the gate once n calls wait for the next batch (waiting
// counts them), after set (run with mu held) has put the store's answer
// in force.
func (g *storeGate) release(t *testing.T, waiting func() int, n int, set func()) {
	t.Helper()
	require.Eventually(t, func() bool { return waiting() == n }, 5*time.Second, time.Millisecond)
	g.mu.Lock()
	set()
	g.mu.Unlock()
	close(g.gate)
}

// heldResult is one call's answer in heldBatch.
type heldResult[R any] struct {
	res R
	err error
}

// heldBatch sends first through do and, while it is held at g, items,
// each a call of its own; then it lets them all go, set (run with g.mu
// held) putting the store's answer in force, and answers each call's
// result by its id. waiting counts the calls waiting for the next batch.
func heldBatch[I, R any](t *testing.T, g *storeGate, do func(I) (R, error), waiting func() int, id func(I) string,
	first I, items []I, set func()) map[string]heldResult[R] {
	t.Helper()
	type answer struct {
		id string
		heldResult[R]
	}
	out := make(chan answer, len(items)+1)
	send := func(x I) {
		go func() {
			r, err := do(x)
			out <- answer{id(x), heldResult[R]{r, err}}
		}()
	}
	send(first)
	<-g.entered // the first goes alone, at once
	for _, x := range items {
		send(x)
	}
	g.release(t, waiting, len(items), set)
	got := map[string]heldResult[R]{}
	for range len(items) + 1 {
		a := <-out
		got[a.id] = a.heldResult
	}
	require.Equal(t, 0, waiting())
	return got
}

// gatedProducer records the batches it gets, at its gate.
type gatedProducer struct {
	storeGate
	batches [][]string // kinds
	fail    func(njs []queue.NewJob) error
}

func (p *gatedProducer) Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error) {
	res, err := p.EnqueueBatch(ctx, []queue.NewJob{nj})
	if err != nil {
		return queue.Enqueued{}, err
	}
	return res[0], nil
}

func (p *gatedProducer) EnqueueBatch(_ context.Context, njs []queue.NewJob) ([]queue.Enqueued, error) {
	kinds := make([]string, len(njs))
	for i, nj := range njs {
		kinds[i] = nj.Kind
	}
	var fail func([]queue.NewJob) error
	p.pass(func() { p.batches, fail = append(p.batches, kinds), p.fail })
	if fail != nil {
		if err := fail(njs); err != nil {
			return nil, err
		}
	}
	out := make([]queue.Enqueued, len(njs))
	for i, nj := range njs {
		out[i] = queue.Enqueued{Job: &queue.Job{ID: fmt.Sprint("id-", nj.Kind), Queue: nj.Queue, Kind: nj.Kind}}
	}
	return out, nil
}

func (c *coalescer) waiting(q string) int { return c.b.waiting(q) }

type result struct {
	kind string
	res  queue.Enqueued
	err  error
}

// enqueueAsync enqueues in the background; the result arrives on out.
func enqueueAsync(c *coalescer, q, kind string, out chan<- result) {
	go func() {
		res, err := c.Enqueue(context.Background(), queue.NewJob{Queue: q, Kind: kind})
		out <- result{kind, res, err}
	}()
}

func TestCoalescerBatchesWhatArrivesMeanwhile(t *testing.T) {
	t.Parallel()
	p := &gatedProducer{storeGate: newStoreGate(20)}
	c := newCoalescer(p, slog.New(slog.DiscardHandler))
	out := make(chan result, 20)

	enqueueAsync(c, "q", "first", out)
	<-p.entered // the first goes alone, at once
	enqueueAsync(c, "other", "elsewhere", out)
	<-p.entered // another queue is not held up behind it
	for i := range 10 {
		enqueueAsync(c, "q", fmt.Sprint("k", i), out)
	}
	p.release(t, func() int { return c.waiting("q") }, 10, func() {})
	for range 12 {
		r := <-out
		require.NoError(t, r.err)
		require.Equal(t, r.kind, r.res.Job.Kind) // each caller its own job
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Len(t, p.batches, 3)
	require.ElementsMatch(t, [][]string{{"first"}, {"elsewhere"}}, p.batches[:2])
	require.ElementsMatch(t, []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}, p.batches[2])
	require.Equal(t, 0, c.waiting("q"))
}

// held makes n calls of queue q wait behind a first one, then runs them
// with fail in force, and answers their results by kind.
func held(t *testing.T, kinds []string, fail func([]queue.NewJob) error) (*gatedProducer, map[string]result) {
	t.Helper()
	p := &gatedProducer{storeGate: newStoreGate(100)}
	c := newCoalescer(p, slog.New(slog.DiscardHandler))
	out := make(chan result, len(kinds)+1)
	enqueueAsync(c, "q", "first", out)
	<-p.entered
	for _, k := range kinds {
		enqueueAsync(c, "q", k, out)
	}
	p.release(t, func() int { return c.waiting("q") }, len(kinds), func() { p.fail = fail })
	got := map[string]result{}
	for range len(kinds) + 1 {
		r := <-out
		got[r.kind] = r
	}
	return p, got
}

func TestCoalescerAnswersABadJobAlone(t *testing.T) {
	t.Parallel()
	p, got := held(t, []string{"a", "bad", "b", "bad2"}, func(njs []queue.NewJob) error {
		for i, nj := range njs {
			if len(nj.Kind) >= 3 && nj.Kind[:3] == "bad" {
				return &queue.FieldError{Index: i, Field: "kind", Err: queue.ErrInvalidKind}
			}
		}
		return nil
	})
	for _, k := range []string{"first", "a", "b"} {
		require.NoError(t, got[k].err)
		require.Equal(t, k, got[k].res.Job.Kind)
	}
	for _, k := range []string{"bad", "bad2"} {
		var fe *queue.FieldError
		require.ErrorAs(t, got[k].err, &fe)
		require.Equal(t, -1, fe.Index) // as for a single enqueue
		require.Equal(t, "kind", fe.Field)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Sent again without each bad one in turn.
	require.Len(t, p.batches, 4)
	require.Equal(t, []string{"first"}, p.batches[0])
	require.ElementsMatch(t, []string{"a", "bad", "b", "bad2"}, p.batches[1])
	require.Len(t, p.batches[2], 3)
	require.ElementsMatch(t, []string{"a", "b"}, p.batches[3])
}

func TestCoalescerStoreErrorReachesEveryone(t *testing.T) {
	t.Parallel()
	_, got := held(t, []string{"a", "b"}, func([]queue.NewJob) error { return queue.ErrUnavailable })
	require.NoError(t, got["first"].err) // sent before the failure
	require.ErrorIs(t, got["a"].err, queue.ErrUnavailable)
	require.ErrorIs(t, got["b"].err, queue.ErrUnavailable)
}

func TestCoalescerRecoversAPanic(t *testing.T) {
	t.Parallel()
	_, got := held(t, []string{"a", "b"}, func([]queue.NewJob) error { panic("store bug") })
	for _, k := range []string{"a", "b"} {
		var e *Error
		require.True(t, errors.As(got[k].err, &e))
		require.Equal(t, CodeInternal, e.Code)
	}
}
