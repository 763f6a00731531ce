package api

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// answered waits, a bounded time, for a call's error on errc.
func answered(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the caller whose context ended is still waiting")
		return nil
	}
}

// A request whose context ends while its enqueue waits for the next batch
// leaves it: it answers its context's error at once, and its job is never
// sent.
func TestCoalescerWaiterLeavesWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	p := &gatedProducer{storeGate: newStoreGate(10)}
	c := newCoalescer(p, slog.New(slog.DiscardHandler))
	out := make(chan result, 2)
	enqueueAsync(c, "q", "first", out)
	<-p.entered
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() {
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "gone"})
		gone <- err
	}()
	require.Eventually(t, func() bool { return c.waiting("q") == 1 }, 5*time.Second, time.Millisecond)
	enqueueAsync(c, "q", "stays", out)
	require.Eventually(t, func() bool { return c.waiting("q") == 2 }, 5*time.Second, time.Millisecond)

	cancel()
	require.ErrorIs(t, answered(t, gone), context.Canceled)
	require.Equal(t, 1, c.waiting("q"))
	p.release(t, func() int { return c.waiting("q") }, 1, func() {})
	for range 2 {
		require.NoError(t, (<-out).err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, [][]string{{"first"}, {"stays"}}, p.batches)
}

// A claim whose context ends while it waits for the next batch leaves it:
// no job is claimed for it.
func TestClaimerWaiterLeavesWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	g := &gatedClaims{storeGate: newStoreGate(10), left: 10}
	c := newClaimer(g, slog.New(slog.DiscardHandler))
	key := claimKey("q", queue.ClaimOptions{Max: 1})
	claim := func(ctx context.Context, n int, out chan<- claimResult) {
		go func() {
			jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: n})
			out <- claimResult{jobs: jobs, err: err}
		}()
	}
	first, stays, gone := make(chan claimResult, 1), make(chan claimResult, 1), make(chan claimResult, 1)
	claim(t.Context(), 1, first)
	<-g.entered
	ctx, cancel := context.WithCancel(t.Context())
	claim(ctx, 5, gone)
	require.Eventually(t, func() bool { return c.b.waiting(key) == 1 }, 5*time.Second, time.Millisecond)
	claim(t.Context(), 1, stays)
	require.Eventually(t, func() bool { return c.b.waiting(key) == 2 }, 5*time.Second, time.Millisecond)

	cancel()
	select {
	case r := <-gone:
		require.ErrorIs(t, r.err, context.Canceled)
		require.Empty(t, r.jobs)
	case <-time.After(10 * time.Second):
		t.Fatal("the caller whose context ended is still waiting")
	}
	g.release(t, func() int { return c.b.waiting(key) }, 1, func() {})
	for _, out := range []chan claimResult{first, stays} {
		r := <-out
		require.NoError(t, r.err)
		require.Len(t, r.jobs, 1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.claims, 2)
	require.Equal(t, 1, g.claims[1].Max, "nothing claimed for the claim that left")
}

// A complete whose context ends while it waits for the next batch leaves
// it, and is never sent.
func TestCompleterWaiterLeavesWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	g := &gatedAcker{storeGate: newStoreGate(10)}
	c := newCompleter(g, slog.New(slog.DiscardHandler))
	complete := func(ctx context.Context, id string, out chan<- error) {
		go func() {
			_, err := c.Complete(ctx, "q", queue.Ack{ID: id, Token: "t"})
			out <- err
		}()
	}
	first, stays, gone := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	complete(t.Context(), "first", first)
	<-g.entered
	ctx, cancel := context.WithCancel(t.Context())
	complete(ctx, "gone", gone)
	require.Eventually(t, func() bool { return c.b.waiting("q") == 1 }, 5*time.Second, time.Millisecond)
	complete(t.Context(), "stays", stays)
	require.Eventually(t, func() bool { return c.b.waiting("q") == 2 }, 5*time.Second, time.Millisecond)

	cancel()
	require.ErrorIs(t, answered(t, gone), context.Canceled)
	g.release(t, func() int { return c.b.waiting("q") }, 1, func() {})
	require.NoError(t, <-first)
	require.NoError(t, <-stays)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, [][]string{{"first"}, {"stays"}}, g.batches)
}

// waiting is how many calls of key wait for its next batch.
func (b batcher[I, R]) waiting(key string) int { return b.Waiting(key) }
