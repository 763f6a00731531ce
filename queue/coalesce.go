package queue

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Coalescing single enqueues.
//
// Most producers send one job at a time, and a script call has a fixed
// cost (the round trip, reading the request and writing the reply, the
// script's own set-up) several times what one more job in the same call
// costs. So concurrent Enqueue calls into one queue share script calls:
// while one enqueue of a queue is in flight, the calls that arrive wait,
// and then go together in one enqueue.lua call (group commit). Nothing
// waits on purpose: a call that finds its queue idle goes at once, alone,
// and a batch is whatever arrived while the call before it was in flight.
//
// One thing is done to make batches whole: before it takes the next batch,
// the sender yields its processor once (runtime.Gosched). The callers the
// batch before it just answered are runnable then; a producer that sends
// one job after another comes back with its next job within that yield and
// joins the batch rather than wait for the one after. Without it, N
// producers that each wait for their answer split into two alternating
// batches: those in flight, and those that came back while they were (4
// producers made batches of 1 and 3, 2.1 jobs a call on average; with it,
// 3.9). A yield is not a wait: when nothing else is runnable it returns at
// once.
//
// Each call still gets exactly its own answer. A job is validated
// (prepare) before it joins a batch, so a batch cannot be refused for one
// of its jobs; an error of the call as a whole (Redis away) is every
// job's, as it would have been alone. One batch is one script call on one
// queue: written whole or not at all. The jobs of a batch keep the order
// in which their calls arrived. A caller whose ctx ends while its job
// waits takes it out (never sent); once sent, it answers ctx's error
// while the batch goes on, as a single call cut short would.
type coalescer struct {
	mu     sync.Mutex
	queues map[string]*enqueueGroup // queues with an enqueue in flight
}

// Limits of one coalesced call.
const (
	maxCoalesce        = MaxBatch     // jobs
	maxCoalesceBytes   = 1 << 20      // payload bytes (a first job larger than this still goes)
	maxCoalesceWaiting = 4 * MaxBatch // calls; more go alone
	// maxInFlight is how many script calls of one queue's enqueues may be
	// in flight at once before further calls wait to go together. One:
	// with two or four, batches were smaller and Redis's time per job
	// higher, for no more jobs a second (bench, 8 producers).
	maxInFlight = 1
	// coalesceTimeout bounds a batch's script call: past any migration
	// retry (clusterRetryFor), as a single call's own ctx would.
	coalesceTimeout = clusterRetryFor + 30*time.Second
)

// enqueueGroup is a queue with an enqueue in flight, and the calls waiting
// for it to end.
type enqueueGroup struct {
	inFlight int
	waiting  []*enqueueCall
}

type enqueueCall struct {
	p    prepared
	res  Enqueued
	err  error
	done chan struct{}
}

// enqueueOne enqueues the validated job p, in a script call with the
// enqueues of its queue that arrive meanwhile (see coalescer).
func (c *Client) enqueueOne(ctx context.Context, p prepared) (Enqueued, error) {
	q := p.job.Queue
	if err := c.register(ctx, q); err != nil {
		return Enqueued{}, err
	}
	co := &c.coalescer
	co.mu.Lock()
	if co.queues == nil {
		co.queues = map[string]*enqueueGroup{}
	}
	g := co.queues[q]
	if g == nil {
		g = &enqueueGroup{}
		co.queues[q] = g
	}
	if g.inFlight < maxInFlight || len(g.waiting) >= maxCoalesceWaiting {
		// Room in flight: go at once, alone, on the caller's ctx, and let
		// what arrives meanwhile follow.
		g.inFlight++
		co.mu.Unlock()
		out := make([]Enqueued, 1)
		err := c.enqueueQueue(ctx, q, []prepared{p}, []int{0}, out)
		c.landed(q, g)
		return out[0], err
	}
	call := &enqueueCall{p: p, done: make(chan struct{})}
	g.waiting = append(g.waiting, call)
	co.mu.Unlock()
	select {
	case <-call.done:
		return call.res, call.err
	case <-ctx.Done():
		co.mu.Lock()
		if i := slices.Index(g.waiting, call); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
		}
		co.mu.Unlock()
		select {
		case <-call.done: // answered meanwhile
			return call.res, call.err
		default:
		}
		return Enqueued{}, ctx.Err()
	}
}

// landed ends one call in flight of queue q's group g: the calls that
// arrived meanwhile go next, from a goroutine of their own, or the queue
// is idle again.
func (c *Client) landed(q string, g *enqueueGroup) {
	co := &c.coalescer
	co.mu.Lock()
	defer co.mu.Unlock()
	if len(g.waiting) == 0 {
		g.inFlight--
		if g.inFlight == 0 {
			delete(co.queues, q)
		}
		return
	}
	go c.drainGroup(q, g) // keeps this call's place in flight
}

// drainGroup sends g's waiting calls, batch after batch, until none is
// left.
func (c *Client) drainGroup(q string, g *enqueueGroup) {
	co := &c.coalescer
	for {
		runtime.Gosched() // let the callers just answered come back and join (see coalescer)
		co.mu.Lock()
		if len(g.waiting) == 0 {
			g.inFlight--
			if g.inFlight == 0 {
				delete(co.queues, q)
			}
			co.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(g.waiting) && n < maxCoalesce && (n == 0 || size+len(g.waiting[n].p.job.Payload) <= maxCoalesceBytes) {
			size += len(g.waiting[n].p.job.Payload)
			n++
		}
		batch := slices.Clone(g.waiting[:n])
		g.waiting = slices.Delete(g.waiting, 0, n)
		co.mu.Unlock()
		c.sendBatch(q, batch)
	}
}

// sendBatch enqueues the jobs of batch in one script call and answers
// each call.
func (c *Client) sendBatch(q string, batch []*enqueueCall) {
	ctx, cancel := context.WithTimeout(context.Background(), coalesceTimeout)
	defer cancel()
	preps := make([]prepared, len(batch))
	idx := make([]int, len(batch))
	for i, call := range batch {
		preps[i], idx[i] = call.p, i
	}
	out := make([]Enqueued, len(batch))
	err := c.enqueueQueue(ctx, q, preps, idx, out)
	if errors.Is(err, ErrTooManyLabelSets) && len(batch) > 1 {
		// One job's new label set passes the cap: the others go alone,
		// each with its own answer (a batch is never refused for one job).
		for _, call := range batch {
			o := make([]Enqueued, 1)
			call.err = c.enqueueQueue(ctx, q, []prepared{call.p}, []int{0}, o)
			call.res = o[0]
			close(call.done)
		}
		return
	}
	for i, call := range batch {
		if err != nil {
			call.err = err
		} else {
			call.res = out[i]
		}
		close(call.done)
	}
}
