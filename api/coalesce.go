package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/chronoq/chronoq/queue"
)

// Limits of one coalesced enqueue.
const (
	maxCoalesce        = 256     // jobs
	maxCoalesceBytes   = 1 << 20 // payload bytes
	coalesceTimeout    = 10 * time.Second
	coalesceQueueLimit = 4096 // waiting calls per queue before callers go straight to the store
)

// coalescer turns the single enqueues of concurrent requests into batches:
// while one enqueue of a queue is in flight, the next ones of that queue
// wait and then go together, in one EnqueueBatch (one script call). Nothing
// waits on purpose: a lone request goes at once, and a batch is whatever
// arrived during the call before it. Under load this divides the Redis work
// per job several times over. Before taking each batch the sender yields
// its processor once (runtime.Gosched), so that requests being read and
// decoded then join this batch rather than the next: 26–27k against 30–31k
// single enqueues a second in BenchmarkHTTPEnqueue/single. A yield is not
// a wait: with nothing else runnable it returns at once. (The engine's own
// coalescer does the same, see queue/coalesce.go.)
//
// Each request still gets exactly its own answer: a batch is validated
// before anything is written, so a job that fails validation is answered
// its error and the batch is sent again without it; any other error (Redis
// away, too many queues) concerns the queue, so every job of the batch gets
// it, as each would have alone. Batches never mix queues, so one call is
// one script: it is written whole or not at all.
type coalescer struct {
	p   producer
	log *slog.Logger

	mu     sync.Mutex
	queues map[string]*pendingBatch // queues with calls waiting or in flight
}

// producer is what the coalescer needs of the engine ([Store]): its own
// small seam, so that its tests can gate the batches.
type producer interface {
	Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error)
	EnqueueBatch(ctx context.Context, jobs []queue.NewJob) ([]queue.Enqueued, error)
}

type pendingBatch struct {
	calls []*enqueueCall
}

type enqueueCall struct {
	nj   queue.NewJob
	res  queue.Enqueued
	err  error
	done chan struct{}
}

func newCoalescer(p producer, log *slog.Logger) *coalescer {
	return &coalescer{p: p, log: log, queues: map[string]*pendingBatch{}}
}

// Enqueue enqueues nj, in a batch with the enqueues of the same queue that
// arrive meanwhile.
func (c *coalescer) Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error) {
	q := cmp.Or(nj.Queue, queue.DefaultQueue)
	if queue.ValidateQueue(q) != nil {
		return c.p.Enqueue(ctx, nj) // the store names the error
	}
	call := &enqueueCall{nj: nj, done: make(chan struct{})}
	c.mu.Lock()
	pb, running := c.queues[q]
	if !running {
		pb = &pendingBatch{}
		c.queues[q] = pb
	}
	if len(pb.calls) >= coalesceQueueLimit {
		c.mu.Unlock()
		return c.p.Enqueue(ctx, nj)
	}
	pb.calls = append(pb.calls, call)
	c.mu.Unlock()
	if !running {
		go c.run(q, pb)
	}
	<-call.done // bounded: each batch has coalesceTimeout
	return call.res, call.err
}

// run sends the waiting calls of queue q, batch after batch, until none is
// left.
func (c *coalescer) run(q string, pb *pendingBatch) {
	for {
		runtime.Gosched() // let requests under way join this batch (see coalescer)
		c.mu.Lock()
		if len(pb.calls) == 0 {
			delete(c.queues, q)
			c.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(pb.calls) && n < maxCoalesce && (n == 0 || size+len(pb.calls[n].nj.Payload) <= maxCoalesceBytes) {
			size += len(pb.calls[n].nj.Payload)
			n++
		}
		batch := slices.Clone(pb.calls[:n])
		pb.calls = slices.Delete(pb.calls, 0, n)
		c.mu.Unlock()
		c.send(batch)
	}
}

// send enqueues batch and answers each call. A panic of the store is
// answered as an internal error, as the HTTP handlers' is.
func (c *coalescer) send(batch []*enqueueCall) {
	ctx, cancel := context.WithTimeout(context.Background(), coalesceTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("api: panic in the store's EnqueueBatch", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			for _, call := range batch {
				select {
				case <-call.done:
				default:
					call.err = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
					close(call.done)
				}
			}
		}
	}()
	for len(batch) > 0 {
		njs := make([]queue.NewJob, len(batch))
		for i, call := range batch {
			njs[i] = call.nj
		}
		res, err := c.p.EnqueueBatch(ctx, njs)
		if err == nil && len(res) == len(batch) {
			for i, call := range batch {
				call.res = res[i]
				close(call.done)
			}
			return
		}
		if err == nil {
			err = errors.New("api: store answered a batch with the wrong number of jobs")
		}
		var fe *queue.FieldError
		if errors.As(err, &fe) && fe.Index >= 0 && fe.Index < len(batch) {
			// Nothing was written: answer the bad job, send the rest again.
			single := *fe
			single.Index = -1
			bad := batch[fe.Index]
			bad.err = &single
			close(bad.done)
			batch = slices.Delete(batch, fe.Index, fe.Index+1)
			continue
		}
		for _, call := range batch {
			call.err = err
			close(call.done)
		}
		return
	}
}
