package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// gatedClaims hands out jobs j1, j2, ... from a pool of size left, and
// records each claim's options, at its gate. A claim takes its jobs as it
// is recorded, before the gate: in the order the claims reached the
// store, whatever order the gate lets them go in.
type gatedClaims struct {
	storeGate
	claims []queue.ClaimOptions
	left   int
	next   int
	fail   func() error
}

func (g *gatedClaims) Claim(_ context.Context, q string, o queue.ClaimOptions) ([]*queue.Job, error) {
	var jobs []*queue.Job
	g.pass(func() {
		g.claims = append(g.claims, o)
		for len(jobs) < max(o.Max, 1) && g.left > 0 {
			g.next++
			g.left--
			jobs = append(jobs, &queue.Job{ID: fmt.Sprint("j", g.next), Queue: q})
		}
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		if err := g.fail(); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

type claimResult struct {
	name string
	jobs []*queue.Job
	err  error
}

// heldClaims claims "first" (max 1) of queue q, and, while it is in
// flight, the claims of calls (by name), of which waiting claim alike
// and so wait behind it; the others, each asking for something else, go
// at once and are held too. Then it lets them all go with fail in force,
// and answers the results by name. The store has 1 + left jobs to hand
// out: first's, and left for the others.
func heldClaims(t *testing.T, calls map[string]queue.ClaimOptions, waiting, left int, fail func() error) (*gatedClaims, map[string]claimResult) {
	t.Helper()
	g := &gatedClaims{storeGate: newStoreGate(100), left: 1 + left}
	c := newClaimer(g, slog.New(slog.DiscardHandler))
	out := make(chan claimResult, len(calls)+1)
	claim := func(name string, o queue.ClaimOptions) {
		go func() {
			jobs, err := c.Claim(context.Background(), "q", o)
			out <- claimResult{name, jobs, err}
		}()
	}
	claim("first", queue.ClaimOptions{Max: 1})
	<-g.entered // the first goes alone, at once
	for name, o := range calls {
		claim(name, o)
	}
	for range len(calls) - waiting {
		<-g.entered // their jobs taken before the batch's (see gatedClaims)
	}
	firstKey := claimKey("q", queue.ClaimOptions{Max: 1})
	g.release(t, func() int { return c.b.waiting(firstKey) }, waiting, func() { g.fail = fail })
	got := map[string]claimResult{}
	for range len(calls) + 1 {
		r := <-out
		got[r.name] = r
	}
	return g, got
}

func ids(jobs []*queue.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestClaimerSharesABatchOut(t *testing.T) {
	t.Parallel()
	// Five jobs for claims asking for 2 + 2 + 3 alike, and one claim with
	// other labels, which goes in a batch of its own.
	g, got := heldClaims(t, map[string]queue.ClaimOptions{
		"a":     {Max: 2},
		"b":     {Max: 2},
		"c":     {Max: 3},
		"other": {Max: 1, Labels: []string{"gpu"}},
	}, 3, 5, nil)
	var all []string
	counts := []int{}
	for _, n := range []string{"first", "a", "b", "c", "other"} {
		require.NoError(t, got[n].err)
		all = append(all, ids(got[n].jobs)...)
		counts = append(counts, len(got[n].jobs))
	}
	slices.Sort(all)
	require.Equal(t, []string{"j1", "j2", "j3", "j4", "j5", "j6"}, all) // each job to one claim
	require.Equal(t, 1, counts[0])
	require.LessOrEqual(t, counts[1], 2)
	require.LessOrEqual(t, counts[2], 2)
	require.LessOrEqual(t, counts[3], 3)
	require.Equal(t, 1, counts[4])
	g.mu.Lock()
	defer g.mu.Unlock()
	var maxes []int
	for _, o := range g.claims[1:] {
		require.Zero(t, o.Wait)
		maxes = append(maxes, o.Max)
	}
	require.ElementsMatch(t, []int{7, 1}, maxes) // one claim for the three alike
}

func TestClaimerLongPollsAloneWhenNoneCame(t *testing.T) {
	t.Parallel()
	g, got := heldClaims(t, map[string]queue.ClaimOptions{
		"now":  {Max: 1},
		"wait": {Max: 1, Wait: time.Second},
	}, 2, 0, nil)
	require.Empty(t, got["now"].jobs)
	require.NoError(t, got["now"].err)
	require.Empty(t, got["wait"].jobs)
	require.NoError(t, got["wait"].err)
	g.mu.Lock()
	defer g.mu.Unlock()
	// first, the batch of two, then the one that may wait, alone
	require.Len(t, g.claims, 3)
	require.Equal(t, queue.ClaimOptions{Max: 2}, g.claims[1])
	require.Equal(t, queue.ClaimOptions{Max: 1, Wait: time.Second}, g.claims[2])
}

func TestClaimerStoreErrorReachesEveryone(t *testing.T) {
	t.Parallel()
	_, got := heldClaims(t, map[string]queue.ClaimOptions{"a": {Max: 1}, "b": {Max: 1, Wait: time.Second}}, 2, 2,
		func() error { return queue.ErrUnavailable })
	require.ErrorIs(t, got["a"].err, queue.ErrUnavailable)
	require.ErrorIs(t, got["b"].err, queue.ErrUnavailable)
}

func TestClaimerRecoversAPanic(t *testing.T) {
	t.Parallel()
	_, got := heldClaims(t, map[string]queue.ClaimOptions{"a": {Max: 1}, "b": {Max: 1}}, 2, 2,
		func() error { panic("store bug") })
	for _, n := range []string{"a", "b"} {
		var e *Error
		require.True(t, errors.As(got[n].err, &e))
		require.Equal(t, CodeInternal, e.Code)
	}
}
