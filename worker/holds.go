package worker

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/internal/alarm"
)

// holds are the runs claimed ahead of their due time that wait to start.
// One alarm, set for the earliest of them, wakes every run whose time has
// come. A claim ahead often holds tens of jobs due within a few
// milliseconds (a burst of retries), and an alarm each would cost each
// run a timer and a kernel timer of its own, on the process's CPU just
// when those runs start.
type holds struct {
	clock clockwork.Clock // the client's: the instants held for are its

	mu    sync.Mutex
	q     holdHeap
	alarm *alarm.Alarm // set for q's earliest; nil when q is empty
}

// hold is one run waiting for its time: ready is closed when at comes.
type hold struct {
	at    time.Time
	ready chan struct{}
	i     int // its index in holds.q; -1 once out of it
}

// wait waits until at on the clock and answers true, or false when ctx
// ends first.
func (h *holds) wait(ctx context.Context, at time.Time) bool {
	if !at.After(h.clock.Now()) {
		return ctx.Err() == nil // its time came while its claim's reply was read
	}
	e := &hold{at: at, ready: make(chan struct{})}
	h.mu.Lock()
	heap.Push(&h.q, e)
	h.armLocked()
	h.mu.Unlock()
	select {
	case <-e.ready:
		return ctx.Err() == nil
	case <-ctx.Done():
		h.mu.Lock()
		if e.i >= 0 {
			heap.Remove(&h.q, e.i)
			h.armLocked()
		}
		h.mu.Unlock()
		return false
	}
}

// armLocked sets the alarm for the earliest hold, keeping the one set for
// that instant already, and stops it when none is left. Call with h.mu
// held.
func (h *holds) armLocked() {
	if len(h.q) == 0 {
		if h.alarm != nil {
			h.alarm.Stop()
			h.alarm = nil
		}
		return
	}
	at := h.q[0].at
	if h.alarm != nil {
		if h.alarm.At().Equal(at) && h.alarm.Pending() {
			return
		}
		h.alarm.Stop()
	}
	h.alarm = alarm.New(h.clock, at, func() { h.ring(at) })
}

// ring releases the holds whose time has come: those up to at, the
// instant the alarm was set for (so a ring always releases the hold it
// was set for), and any the clock has passed since.
func (h *holds) ring(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	for len(h.q) > 0 && (!h.q[0].at.After(at) || !h.q[0].at.After(now)) {
		close(heap.Pop(&h.q).(*hold).ready)
	}
	h.armLocked()
}

// holdHeap orders holds by their instant, earliest first (container/heap).
type holdHeap []*hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].i, q[j].i = i, j
}

func (q *holdHeap) Push(x any) {
	e := x.(*hold)
	e.i = len(*q)
	*q = append(*q, e)
}

func (q *holdHeap) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.i = -1
	*q = old[:len(old)-1]
	return e
}
