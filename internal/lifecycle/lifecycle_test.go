package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/lifecycle"
)

// runFunc is a Runner from a function.
type runFunc func(context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

// untilDone runs until ctx ends, takes stopFor to stop, and answers err.
func untilDone(stopFor time.Duration, err error) lifecycle.Runner {
	return runFunc(func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(stopFor)
		return err
	})
}

func TestStopEndsRunAndAnswersItsError(t *testing.T) {
	t.Parallel()
	h := lifecycle.Start(t.Context(), untilDone(0, nil))
	select {
	case <-h.Done():
		t.Fatal("Run returned before Stop")
	case <-time.After(10 * time.Millisecond):
	}
	require.NoError(t, h.Stop(t.Context()))
	require.NoError(t, h.Err())

	boom := errors.New("boom")
	h = lifecycle.Start(t.Context(), untilDone(0, boom))
	require.ErrorIs(t, h.Stop(t.Context()), boom)
	require.ErrorIs(t, h.Stop(t.Context()), boom, "a second Stop answers as the first")
	require.ErrorIs(t, h.Err(), boom)
}

func TestStopGivesUpWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	h := lifecycle.Start(t.Context(), untilDone(50*time.Millisecond, nil))
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	require.ErrorIs(t, h.Stop(ctx), context.DeadlineExceeded)
	require.NoError(t, h.Err(), "still stopping")
	<-h.Done()
	require.NoError(t, h.Stop(t.Context()))
}

func TestRunEndsWithItsParentContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	h := lifecycle.Start(ctx, untilDone(0, nil))
	cancel()
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}

func TestGroupStopsEveryRunAndNamesTheirErrors(t *testing.T) {
	t.Parallel()
	var g lifecycle.Group
	boom := errors.New("boom")
	// Each stops only once the other has been told to: a Stop that ended
	// them one after the other would wait for ever.
	aStopping, bStopping := make(chan struct{}), make(chan struct{})
	g.Start(t.Context(), "clean", runFunc(func(ctx context.Context) error {
		<-ctx.Done()
		close(aStopping)
		<-bStopping
		return nil
	}))
	g.Start(t.Context(), "broken", runFunc(func(ctx context.Context) error {
		<-ctx.Done()
		close(bStopping)
		<-aStopping
		return boom
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := g.Stop(ctx)
	require.ErrorIs(t, err, boom)
	require.EqualError(t, err, "broken: boom")
	require.NoError(t, (&lifecycle.Group{}).Stop(t.Context()), "an empty group")
}
