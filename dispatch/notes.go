package dispatch

import (
	"context"
	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/chronoq/chronoq/internal/batch"
	"github.com/chronoq/chronoq/queue"
)

// notes group-commits the attempt notes of a queue (package batch): a
// note that finds its queue's note call in flight goes in the next one,
// so under load one script call writes many notes (a call per request
// was a fifth of the dispatcher's CPU and a Redis round trip per job). A
// note alone goes at once: no timer, no added latency.
type notes struct {
	b *batch.Batcher[plumbing.NoteItem, struct{}]
}

func newNotes(c *queue.Client) *notes {
	send := func(ctx context.Context, q string, items []plumbing.NoteItem) ([]struct{}, []error, error) {
		errs, err := plumbing.Of(c).NoteMany(ctx, q, items)
		return nil, errs, err
	}
	return &notes{b: batch.New(send, batch.Config[plumbing.NoteItem]{Size: func(n plumbing.NoteItem) int { return len(n.Line) }})}
}

// note writes one line on a claimed job's notes and answers how it went
// (nil, queue.ErrLeaseLost, queue.ErrNotFound, the call's error, or
// ctx's when it ends first).
func (n *notes) note(ctx context.Context, q string, item plumbing.NoteItem) error {
	_, err := n.b.Do(ctx, q, item)
	return err
}
