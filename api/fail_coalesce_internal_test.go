package api

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// gatedFailer records the batches of failures it gets (their ids), at its
// gate. A failure whose token is "lost" is answered ErrLeaseLost; the
// others are retried, each answered its job, which carries its error.
type gatedFailer struct {
	storeGate
	batches [][]string
	fail    func() error
}

func (g *gatedFailer) FailMany(_ context.Context, q string, fails []queue.Failed) ([]queue.FailResult, []error, error) {
	ids := make([]string, len(fails))
	for i, f := range fails {
		ids[i] = f.ID
	}
	var fail func() error
	g.pass(func() { g.batches, fail = append(g.batches, ids), g.fail })
	if fail != nil {
		if err := fail(); err != nil {
			return nil, nil, err
		}
	}
	res, errs := make([]queue.FailResult, len(fails)), make([]error, len(fails))
	for i, f := range fails {
		switch {
		case f.Token == "lost":
			errs[i] = queue.ErrLeaseLost
		case !f.ReturnJob:
			errs[i] = errors.New("the failer did not ask for the job")
		default:
			res[i] = queue.FailResult{Status: queue.StatusScheduled,
				Job: &queue.Job{ID: f.ID, Queue: q, Status: queue.StatusScheduled, LastError: f.Error}}
		}
	}
	return res, errs, nil
}

// heldFails fails "first" of queue q, and, while it is in flight, fails;
// then it lets them all go with fail in force, and answers the results
// by id.
func heldFails(t *testing.T, fails []queue.Failed, fail func() error) (*gatedFailer, map[string]heldResult[queue.FailResult]) {
	t.Helper()
	g := &gatedFailer{storeGate: newStoreGate(100)}
	f := newFailer(g, slog.New(slog.DiscardHandler))
	got := heldBatch(t, &g.storeGate,
		func(x queue.Failed) (queue.FailResult, error) { return f.Fail(context.Background(), "q", x) },
		func() int { return f.b.waiting("q") }, func(x queue.Failed) string { return x.ID },
		queue.Failed{ID: "first", Token: "t"}, fails, func() { g.fail = fail })
	return g, got
}

func TestFailerBatchesWhatArrivesMeanwhile(t *testing.T) {
	t.Parallel()
	g, got := heldFails(t, []queue.Failed{
		{ID: "a", Token: "t", FailOptions: queue.FailOptions{Error: "ea"}},
		{ID: "b", Token: "lost"},
		{ID: "c", Token: "t", FailOptions: queue.FailOptions{Error: "ec"}},
	}, nil)
	for _, id := range []string{"first", "a", "c"} {
		require.NoError(t, got[id].err)
		require.Equal(t, id, got[id].res.Job.ID) // each caller its own job
	}
	require.Equal(t, "ea", got["a"].res.Job.LastError)
	require.Equal(t, "ec", got["c"].res.Job.LastError)
	require.ErrorIs(t, got["b"].err, queue.ErrLeaseLost) // and its own error
	require.Nil(t, got["b"].res.Job)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.batches, 2)
	require.Equal(t, []string{"first"}, g.batches[0])
	require.ElementsMatch(t, []string{"a", "b", "c"}, g.batches[1])
}

func TestFailerStoreErrorReachesEveryone(t *testing.T) {
	t.Parallel()
	_, got := heldFails(t, []queue.Failed{{ID: "a", Token: "t"}, {ID: "b", Token: "t"}},
		func() error { return queue.ErrUnavailable })
	require.NoError(t, got["first"].err) // sent before the failure
	require.ErrorIs(t, got["a"].err, queue.ErrUnavailable)
	require.ErrorIs(t, got["b"].err, queue.ErrUnavailable)
}

func TestFailerRecoversAPanic(t *testing.T) {
	t.Parallel()
	_, got := heldFails(t, []queue.Failed{{ID: "a", Token: "t"}, {ID: "b", Token: "t"}},
		func() error { panic("store bug") })
	for _, id := range []string{"a", "b"} {
		var e *Error
		require.True(t, errors.As(got[id].err, &e))
		require.Equal(t, CodeInternal, e.Code)
	}
}
