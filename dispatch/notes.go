package dispatch

import (
	"context"
	"sync"

	"github.com/chronoq/chronoq/queue"
)

// notes group-commits the attempt notes of a queue: a note that finds
// another queue's batch under way waits for it and goes in the next one,
// so at most one note call per queue is in flight and, under load, one
// script call writes many notes (a call per request was a fifth of the
// dispatcher's CPU and a Redis round trip per job). A note alone goes at
// once: no timer, no added latency.
type notes struct {
	client *queue.Client
	mu     sync.Mutex
	queues map[string]*noteQueue
}

type noteQueue struct {
	busy    bool
	pending []noteReq
}

type noteReq struct {
	item queue.NoteItem
	done chan error
}

func newNotes(c *queue.Client) *notes { return &notes{client: c, queues: map[string]*noteQueue{}} }

// note writes one line on a claimed job's notes and answers how it went
// (nil, queue.ErrLeaseLost, queue.ErrNotFound, or the call's error).
func (n *notes) note(ctx context.Context, q string, item queue.NoteItem) error {
	req := noteReq{item: item, done: make(chan error, 1)}
	n.mu.Lock()
	nq := n.queues[q]
	if nq == nil {
		nq = &noteQueue{}
		n.queues[q] = nq
	}
	nq.pending = append(nq.pending, req)
	if nq.busy {
		n.mu.Unlock()
		return <-req.done // the caller under way writes it
	}
	nq.busy = true
	for len(nq.pending) > 0 {
		batch := nq.pending[:min(len(nq.pending), queue.MaxBatch)]
		nq.pending = nq.pending[len(batch):]
		n.mu.Unlock()
		n.flush(ctx, q, batch)
		n.mu.Lock()
	}
	nq.busy = false
	delete(n.queues, q)
	n.mu.Unlock()
	return <-req.done
}

func (n *notes) flush(ctx context.Context, q string, batch []noteReq) {
	items := make([]queue.NoteItem, len(batch))
	for i, r := range batch {
		items[i] = r.item
	}
	errs, err := n.client.NoteMany(ctx, q, items)
	for i, r := range batch {
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
	}
}
