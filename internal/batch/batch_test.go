package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/batch"
)

// wait bounds how long a test waits for something that happens at once
// when the machine is not loaded.
const wait = 10 * time.Second

// store is a test's Send: it records each batch, says so on entered, and
// holds it until the test lets it go (one token of gate a batch, or
// close(gate) for all). Then it answers with answer, by default each item
// times ten.
type store struct {
	mu       sync.Mutex
	batches  [][]int
	ctxErrs  []error     // each batch's ctx.Err() when it was answered
	deadline []time.Time // each batch's ctx deadline
	inFlight map[string]int
	answer   func(ctx context.Context, items []int) ([]int, []error, error)
	overlap  bool // two batches of one key were in flight at once

	gate    chan struct{}
	entered chan []int
}

func newStore() *store {
	return &store{gate: make(chan struct{}), entered: make(chan []int, 100), inFlight: map[string]int{}}
}

func (s *store) send(ctx context.Context, key string, items []int) ([]int, []error, error) {
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.batches = append(s.batches, slices.Clone(items))
	s.deadline = append(s.deadline, d)
	s.inFlight[key]++
	if s.inFlight[key] > 1 {
		s.overlap = true
	}
	answer := s.answer
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight[key]--
		s.mu.Unlock()
	}()
	select {
	case s.entered <- slices.Clone(items):
	default: // the test does not read them
	}
	<-s.gate
	s.mu.Lock()
	s.ctxErrs = append(s.ctxErrs, ctx.Err())
	s.mu.Unlock()
	if answer != nil {
		return answer(ctx, items)
	}
	res := make([]int, len(items))
	for i, v := range items {
		res[i] = 10 * v
	}
	return res, nil, nil
}

func (s *store) sent() [][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

type answer struct {
	item, res int
	err       error
}

// do calls b.Do in the background; its answer arrives on out.
func do(ctx context.Context, b *batch.Batcher[int, int], key string, item int, out chan<- answer) {
	go func() {
		res, err := b.Do(ctx, key, item)
		out <- answer{item, res, err}
	}()
}

// entered waits for the next batch to reach s and answers its items.
func entered(t *testing.T, s *store) []int {
	t.Helper()
	select {
	case items := <-s.entered:
		return items
	case <-time.After(wait):
		t.Fatal("no batch reached the store")
		return nil
	}
}

// recv waits for the next answer.
func recv(t *testing.T, out <-chan answer) answer {
	t.Helper()
	select {
	case a := <-out:
		return a
	case <-time.After(wait):
		t.Fatal("no answer")
		return answer{}
	}
}

// held sends first on key "q" and holds its batch at the gate, then adds
// items one after the other, each waiting for the next batch once the
// one before it does (so in this order), with ctxs[i] when given.
func held(t *testing.T, b *batch.Batcher[int, int], s *store, items []int, ctxs map[int]context.Context) chan answer {
	t.Helper()
	out := make(chan answer, len(items)+1)
	do(t.Context(), b, "q", 0, out)
	require.Equal(t, []int{0}, entered(t, s))
	for i, item := range items {
		ctx := t.Context()
		if c, ok := ctxs[item]; ok {
			ctx = c
		}
		do(ctx, b, "q", item, out)
		require.Eventually(t, func() bool { return b.Waiting("q") == i+1 }, wait, time.Millisecond)
	}
	return out
}

// answers reads n answers, by item.
func answers(t *testing.T, out <-chan answer, n int) map[int]answer {
	t.Helper()
	got := map[int]answer{}
	for range n {
		a := recv(t, out)
		got[a.item] = a
	}
	return got
}

func TestBatchesWhatArrivesMeanwhileInOrder(t *testing.T) {
	t.Parallel()
	s := newStore()
	b := batch.New(s.send, batch.Config[int]{})
	items := []int{5, 3, 9, 1, 7, 2, 8, 4, 6, 10}
	out := held(t, b, s, items, nil)

	other := make(chan answer, 1)
	do(t.Context(), b, "other", 42, other) // another key is not held up behind q
	require.Equal(t, []int{42}, entered(t, s))

	close(s.gate)
	got := answers(t, out, len(items)+1)
	for _, item := range append([]int{0}, items...) {
		require.NoError(t, got[item].err)
		require.Equal(t, 10*item, got[item].res, "each caller its own answer")
	}
	require.Equal(t, answer{42, 420, nil}, recv(t, other))
	require.Equal(t, [][]int{{0}, {42}, items}, s.sent(), "the first alone, then the others together, in the order they came")
	require.Equal(t, 0, b.Waiting("q"))
}

func TestEachItemItsOwnError(t *testing.T) {
	t.Parallel()
	s := newStore()
	errOdd := errors.New("odd")
	s.answer = func(_ context.Context, items []int) ([]int, []error, error) {
		res, errs := make([]int, len(items)), make([]error, len(items))
		for i, v := range items {
			if v%2 == 1 {
				errs[i] = fmt.Errorf("item %d: %w", v, errOdd)
			} else {
				res[i] = 10 * v
			}
		}
		return res, errs, nil
	}
	b := batch.New(s.send, batch.Config[int]{})
	out := held(t, b, s, []int{1, 2, 3, 4}, nil)
	close(s.gate)
	got := answers(t, out, 5)
	for _, v := range []int{0, 2, 4} {
		require.NoError(t, got[v].err)
		require.Equal(t, 10*v, got[v].res)
	}
	for _, v := range []int{1, 3} {
		require.ErrorIs(t, got[v].err, errOdd)
		require.ErrorContains(t, got[v].err, fmt.Sprintf("item %d:", v))
	}
	require.Len(t, s.sent(), 2)
}

func TestCallErrorIsEveryItems(t *testing.T) {
	t.Parallel()
	s := newStore()
	b := batch.New(s.send, batch.Config[int]{})
	out := held(t, b, s, []int{1, 2, 3}, nil)
	boom := errors.New("redis away")
	s.mu.Lock()
	s.answer = func(context.Context, []int) ([]int, []error, error) { return nil, nil, boom }
	s.mu.Unlock()
	s.gate <- struct{}{} // the first, sent before the failure
	require.NoError(t, recv(t, out).err)
	close(s.gate)
	for _, a := range answers(t, out, 3) {
		require.ErrorIs(t, a.err, boom)
	}
}

func TestWrongNumberOfAnswersIsEveryItemsError(t *testing.T) {
	t.Parallel()
	s := newStore()
	s.answer = func(_ context.Context, items []int) ([]int, []error, error) {
		return make([]int, len(items)-1), nil, nil
	}
	b := batch.New(s.send, batch.Config[int]{})
	out := held(t, b, s, []int{1, 2, 3}, nil)
	close(s.gate)
	got := answers(t, out, 4)
	require.ErrorContains(t, got[0].err, "0 results and 0 errors for 1 items")
	for _, v := range []int{1, 2, 3} {
		require.ErrorContains(t, got[v].err, "2 results and 0 errors for 3 items")
	}
}

func TestWaitingCallerLeavesTheBatch(t *testing.T) {
	t.Parallel()
	s := newStore()
	b := batch.New(s.send, batch.Config[int]{})
	ctx, cancel := context.WithCancel(t.Context())
	out := held(t, b, s, []int{1, 2, 3}, map[int]context.Context{2: ctx})
	cancel()
	a := recv(t, out) // at once: the gate is still shut
	require.Equal(t, 2, a.item)
	require.ErrorIs(t, a.err, context.Canceled)
	require.Zero(t, a.res)
	require.Equal(t, 2, b.Waiting("q"))

	close(s.gate)
	got := answers(t, out, 3)
	for _, v := range []int{0, 1, 3} {
		require.NoError(t, got[v].err)
	}
	require.Equal(t, [][]int{{0}, {1, 3}}, s.sent(), "the item that left is never sent")
}

func TestSentCallerReturnsAtOnceWhileTheBatchGoesOn(t *testing.T) {
	t.Parallel()
	s := newStore()
	b := batch.New(s.send, batch.Config[int]{})
	ctx, cancel := context.WithCancel(t.Context())
	out := held(t, b, s, []int{1, 2}, map[int]context.Context{1: ctx})
	s.gate <- struct{}{} // the first goes; 1 and 2 are sent together and held
	require.NoError(t, recv(t, out).err)
	require.Equal(t, []int{1, 2}, entered(t, s))

	cancel()
	a := recv(t, out) // at once: its batch is still held
	require.Equal(t, answer{1, 0, context.Canceled}, a)

	close(s.gate)
	require.Equal(t, answer{2, 20, nil}, recv(t, out), "the batch went on for the others")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []error{nil, nil}, s.ctxErrs, "a batch's call runs under a context of its own")
	for _, d := range s.deadline {
		left := time.Until(d)
		require.Greater(t, left, batch.CallTimeout-wait, "bounded by CallTimeout")
		require.LessOrEqual(t, left, batch.CallTimeout)
	}
}

func TestEndedContextIsNeverSent(t *testing.T) {
	t.Parallel()
	s := newStore()
	close(s.gate)
	b := batch.New(s.send, batch.Config[int]{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.Do(ctx, "q", 1)
	require.ErrorIs(t, err, context.Canceled)
	res, err := b.Do(t.Context(), "q", 2)
	require.NoError(t, err)
	require.Equal(t, 20, res)
	require.Equal(t, [][]int{{2}}, s.sent())
}

func TestPanicIsEveryItemsError(t *testing.T) {
	t.Parallel()
	s := newStore()
	b := batch.New(s.send, batch.Config[int]{})
	out := held(t, b, s, []int{1, 2}, nil)
	s.mu.Lock()
	s.answer = func(_ context.Context, items []int) ([]int, []error, error) {
		if items[0] == 1 {
			panic("store bug")
		}
		return make([]int, len(items)), nil, nil
	}
	s.mu.Unlock()
	close(s.gate)
	got := answers(t, out, 3)
	require.NoError(t, got[0].err)
	for _, v := range []int{1, 2} {
		var pe *batch.PanicError
		require.ErrorAs(t, got[v].err, &pe)
		require.Equal(t, "store bug", pe.Value)
		require.Contains(t, string(pe.Stack), "batch_test.TestPanicIsEveryItemsError")
	}
	_, err := b.Do(t.Context(), "q", 3)
	require.NoError(t, err, "the key batches on after a panic")

	wrapped := &batch.PanicError{Value: context.DeadlineExceeded}
	require.ErrorIs(t, wrapped, context.DeadlineExceeded, "a panic with an error unwraps to it")
}

func TestLimitsOfABatch(t *testing.T) {
	t.Parallel()
	const kib = 1 << 10
	for _, tc := range []struct {
		name  string
		cfg   batch.Config[int]
		items []int
		want  [][]int
	}{
		{
			name:  "items",
			cfg:   batch.Config[int]{Items: func(v int) int { return v }},
			items: []int{400, 400, 400, 1500, 1},
			want:  [][]int{{400, 400}, {400}, {1500}, {1}}, // an item over the limit goes alone
		},
		{
			name:  "bytes",
			cfg:   batch.Config[int]{Size: func(v int) int { return v }},
			items: []int{600 * kib, 424 * kib, 1, 2048 * kib, 1},
			want:  [][]int{{600 * kib, 424 * kib}, {1}, {2048 * kib}, {1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore()
			b := batch.New(s.send, tc.cfg)
			out := held(t, b, s, tc.items, nil)
			close(s.gate)
			for range len(tc.items) + 1 {
				require.NoError(t, recv(t, out).err)
			}
			require.Equal(t, append([][]int{{0}}, tc.want...), s.sent())
		})
	}

	t.Run("count", func(t *testing.T) {
		t.Parallel()
		s := newStore()
		b := batch.New(s.send, batch.Config[int]{})
		out := make(chan answer, batch.MaxItems+2)
		do(t.Context(), b, "q", 0, out)
		entered(t, s)
		for i := range batch.MaxItems + 1 {
			do(t.Context(), b, "q", i+1, out)
		}
		require.Eventually(t, func() bool { return b.Waiting("q") == batch.MaxItems+1 }, wait, time.Millisecond)
		close(s.gate)
		for range batch.MaxItems + 2 {
			require.NoError(t, recv(t, out).err)
		}
		var sizes []int
		for _, bt := range s.sent() {
			sizes = append(sizes, len(bt))
		}
		require.Equal(t, []int{1, batch.MaxItems, 1}, sizes)
	})
}

// MaxWaiting calls wait: one more goes alone, at once. Not parallel: it
// holds MaxWaiting goroutines, and the race detector allows 8128 at once.
func TestCallsPastMaxWaitingGoAlone(t *testing.T) {
	s := newStore()
	b := batch.New(s.send, batch.Config[int]{})
	out := make(chan answer, batch.MaxWaiting+2)
	do(t.Context(), b, "q", 0, out)
	entered(t, s)
	for i := range batch.MaxWaiting {
		do(t.Context(), b, "q", i+1, out)
	}
	require.Eventually(t, func() bool { return b.Waiting("q") == batch.MaxWaiting }, wait, time.Millisecond)
	do(t.Context(), b, "q", -1, out)
	require.Equal(t, []int{-1}, entered(t, s), "sent while the first is still in flight")
	require.Equal(t, batch.MaxWaiting, b.Waiting("q"))
	close(s.gate)
	for range batch.MaxWaiting + 2 {
		require.NoError(t, recv(t, out).err)
	}
	require.Equal(t, 0, b.Waiting("q"))
}

// Many callers on a few keys, as fast as they can: each gets its own
// answer, each item is sent once, a key has one batch in flight at a time.
func TestConcurrentCallers(t *testing.T) {
	t.Parallel()
	const keys, callers, calls = 4, 16, 200
	s := newStore()
	close(s.gate)
	b := batch.New(s.send, batch.Config[int]{})
	var wg sync.WaitGroup
	errs := make(chan error, keys*callers)
	for k := range keys {
		for c := range callers {
			wg.Go(func() {
				key := fmt.Sprint("k", k)
				for i := range calls {
					v := (k*callers+c)*calls + i
					res, err := b.Do(t.Context(), key, v)
					if err == nil && res != 10*v {
						err = fmt.Errorf("item %d answered %d", v, res)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var all []int
	batches := s.sent()
	for _, bt := range batches {
		require.LessOrEqual(t, len(bt), batch.MaxItems)
		all = append(all, bt...)
	}
	slices.Sort(all)
	require.Len(t, all, keys*callers*calls)
	for i, v := range all {
		require.Equal(t, i, v, "each item sent exactly once")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	require.False(t, s.overlap, "one batch of a key in flight at a time")
	require.Less(t, len(batches), keys*callers*calls, "some calls went together")
	for k := range keys {
		require.Equal(t, 0, b.Waiting(fmt.Sprint("k", k)))
	}
}
