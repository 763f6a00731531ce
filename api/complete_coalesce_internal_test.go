package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// gatedAcker records the batches of completes it gets (their ids), at its
// gate. An ack whose token is "lost" is answered ErrLeaseLost; one whose
// result is "bad" is refused in its place, as the engine refuses a result
// that is not valid.
type gatedAcker struct {
	storeGate
	batches [][]string
	fail    func() error
}

func (g *gatedAcker) CompleteMany(_ context.Context, q string, acks []queue.Ack) ([]*queue.Job, []error, error) {
	ids := make([]string, len(acks))
	for i, a := range acks {
		ids[i] = a.ID
	}
	var fail func() error
	g.pass(func() { g.batches, fail = append(g.batches, ids), g.fail })
	if fail != nil {
		if err := fail(); err != nil {
			return nil, nil, err
		}
	}
	jobs, errs := make([]*queue.Job, len(acks)), make([]error, len(acks))
	for i, a := range acks {
		switch {
		case string(a.Result) == "bad":
			errs[i] = &queue.FieldError{Index: -1, Field: "result", Err: fmt.Errorf("%w: not valid JSON", queue.ErrInvalid)}
		case a.Token == "lost":
			errs[i] = queue.ErrLeaseLost
		default:
			jobs[i] = &queue.Job{ID: a.ID, Queue: q, Status: queue.StatusCompleted}
		}
	}
	return jobs, errs, nil
}

// heldCompletes completes "first" of queue q, and, while it is in
// flight, acks; then it lets them all go with fail in force, and answers
// the results by id.
func heldCompletes(t *testing.T, acks []queue.Ack, fail func() error) (*gatedAcker, map[string]heldResult[*queue.Job]) {
	t.Helper()
	g := &gatedAcker{storeGate: newStoreGate(100)}
	c := newCompleter(g, slog.New(slog.DiscardHandler))
	got := heldBatch(t, &g.storeGate,
		func(a queue.Ack) (*queue.Job, error) { return c.Complete(context.Background(), "q", a) },
		func() int { return c.b.waiting("q") }, func(a queue.Ack) string { return a.ID },
		queue.Ack{ID: "first", Token: "t"}, acks, func() { g.fail = fail })
	return g, got
}

func TestCompleterBatchesWhatArrivesMeanwhile(t *testing.T) {
	t.Parallel()
	g, got := heldCompletes(t, []queue.Ack{{ID: "a", Token: "t"}, {ID: "b", Token: "lost"}, {ID: "c", Token: "t"}}, nil)
	for _, id := range []string{"first", "a", "c"} {
		require.NoError(t, got[id].err)
		require.Equal(t, id, got[id].res.ID) // each caller its own job
	}
	require.ErrorIs(t, got["b"].err, queue.ErrLeaseLost) // and its own error
	require.Nil(t, got["b"].res)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.batches, 2)
	require.Equal(t, []string{"first"}, g.batches[0])
	require.ElementsMatch(t, []string{"a", "b", "c"}, g.batches[1])
}

func TestCompleterAnswersARefusedAckAlone(t *testing.T) {
	t.Parallel()
	g, got := heldCompletes(t, []queue.Ack{{ID: "a", Token: "t"}, {ID: "bad", Token: "t", Result: []byte("bad")}, {ID: "b", Token: "t"}}, nil)
	for _, id := range []string{"a", "b"} {
		require.NoError(t, got[id].err)
		require.Equal(t, id, got[id].res.ID)
	}
	var fe *queue.FieldError
	require.ErrorAs(t, got["bad"].err, &fe)
	require.ErrorIs(t, got["bad"].err, queue.ErrInvalid)
	require.Equal(t, "result", fe.Field)
	require.Nil(t, got["bad"].res)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.batches, 2) // the first, then one batch for the three: nothing sent again
	require.ElementsMatch(t, []string{"a", "bad", "b"}, g.batches[1])
}

func TestCompleterStoreErrorReachesEveryone(t *testing.T) {
	t.Parallel()
	_, got := heldCompletes(t, []queue.Ack{{ID: "a", Token: "t"}, {ID: "b", Token: "t"}},
		func() error { return queue.ErrUnavailable })
	require.NoError(t, got["first"].err) // sent before the failure
	require.ErrorIs(t, got["a"].err, queue.ErrUnavailable)
	require.ErrorIs(t, got["b"].err, queue.ErrUnavailable)
}

func TestCompleterRecoversAPanic(t *testing.T) {
	t.Parallel()
	_, got := heldCompletes(t, []queue.Ack{{ID: "a", Token: "t"}, {ID: "b", Token: "t"}},
		func() error { panic("store bug") })
	for _, id := range []string{"a", "b"} {
		var e *Error
		require.True(t, errors.As(got[id].err, &e))
		require.Equal(t, CodeInternal, e.Code)
	}
}
