package dispatch

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// holdLine holds the first script call that carries the note line, until
// gate closes.
type holdLine struct {
	line    string
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (h *holdLine) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdLine) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *holdLine) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if slices.Contains(cmd.Args(), any(h.line)) {
			h.once.Do(func() {
				close(h.entered)
				<-h.gate
			})
		}
		return next(ctx, cmd)
	}
}

// The notes of a queue that wait while one note call is in flight go in
// the next call, under a context of the batch's own: the caller whose
// note went first giving up must not fail the others' notes.
func TestNoteCallerGivingUpDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := testutil.Redis(t)
	h := &holdLine{line: "lead", entered: make(chan struct{}), gate: make(chan struct{})}
	rdb.AddHook(h)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	const q = "q"
	_, err = c.EnqueueBatch(ctx, []queue.NewJob{{Queue: q, Kind: "k"}, {Queue: q, Kind: "k"}, {Queue: q, Kind: "k"}})
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, q, queue.ClaimOptions{Max: 3})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	n := newNotes(c)

	leadCtx, giveUp := context.WithCancel(ctx)
	lead := make(chan error, 1)
	go func() {
		lead <- n.note(leadCtx, q, plumbing.NoteItem{ID: jobs[0].ID, Token: jobs[0].Token, Line: "lead"})
	}()
	<-h.entered
	others := make(chan error, 2)
	for i, line := range []string{"b", "c"} {
		j := jobs[i+1]
		go func() { others <- n.note(ctx, q, plumbing.NoteItem{ID: j.ID, Token: j.Token, Line: line}) }()
	}
	require.Eventually(t, func() bool { return n.b.Waiting(q) == 2 }, 10*time.Second, time.Millisecond)
	// The lead's note is in flight (held at the gate): giving up answers
	// its context's error at once, before the call it leads returns.
	giveUp()
	require.ErrorIs(t, <-lead, context.Canceled)
	close(h.gate)
	for range 2 {
		require.NoError(t, <-others)
	}
	for i, line := range []string{"b", "c"} {
		got, err := plumbing.Of(c).Notes(ctx, q, jobs[i+1].ID)
		require.NoError(t, err)
		require.Equal(t, []string{line}, got)
	}
}
