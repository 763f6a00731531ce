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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chronoq/chronoq/queue"
)

// Limits of one coalesced enqueue (maxCoalesce), of a batch's payloads,
// or results and artifacts (maxCoalesceBytes), and of every batch.
const (
	maxCoalesce        = 256     // jobs
	maxCoalesceBytes   = 1 << 20 // payload bytes
	coalesceTimeout    = 10 * time.Second
	coalesceQueueLimit = 4096 // waiting calls per key before callers go straight to the store
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
	b   batches[*enqueueCall]
}

// producer is what the coalescer needs of the engine ([Store]): its own
// small seam, so that its tests can gate the batches.
type producer interface {
	Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error)
	EnqueueBatch(ctx context.Context, jobs []queue.NewJob) ([]queue.Enqueued, error)
}

type enqueueCall struct {
	pendingCall
	nj  queue.NewJob
	res queue.Enqueued
}

func newCoalescer(p producer, log *slog.Logger) *coalescer {
	c := &coalescer{p: p, log: log}
	c.b = batches[*enqueueCall]{queues: map[string]*[]*enqueueCall{}, take: takeEnqueues,
		send: func(_ string, batch []*enqueueCall) { c.send(batch) }}
	return c
}

// takeEnqueues is how many of the waiting calls of a queue its next batch
// takes: up to maxCoalesce jobs and maxCoalesceBytes of payload.
func takeEnqueues(waiting []*enqueueCall) int {
	n, size := 0, 0
	for n < len(waiting) && n < maxCoalesce && (n == 0 || size+len(waiting[n].nj.Payload) <= maxCoalesceBytes) {
		size += len(waiting[n].nj.Payload)
		n++
	}
	return n
}

// Enqueue enqueues nj, in a batch with the enqueues of the same queue that
// arrive meanwhile.
func (c *coalescer) Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error) {
	q := cmp.Or(nj.Queue, queue.DefaultQueue)
	if queue.ValidateQueue(q) != nil {
		return c.p.Enqueue(ctx, nj) // the store names the error
	}
	call := &enqueueCall{pendingCall: newPendingCall(), nj: nj}
	if !c.b.add(q, call) {
		return c.p.Enqueue(ctx, nj)
	}
	<-call.done // bounded: each batch has coalesceTimeout
	return call.res, call.err
}

// send enqueues batch and answers each call. A panic of the store is
// answered as an internal error, as the HTTP handlers' is.
func (c *coalescer) send(batch []*enqueueCall) {
	ctx, cancel := context.WithTimeout(context.Background(), coalesceTimeout)
	defer cancel()
	defer answerPanic(c.log, "EnqueueBatch", batch)
	for len(batch) > 0 {
		njs := make([]queue.NewJob, len(batch))
		for i, call := range batch {
			njs[i] = call.nj
		}
		res, err := c.p.EnqueueBatch(ctx, njs)
		if err == nil && len(res) == len(batch) {
			for i, call := range batch {
				call.res = res[i]
				call.answer(nil)
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
			batch[fe.Index].answer(&single)
			batch = slices.Delete(batch, fe.Index, fe.Index+1)
			continue
		}
		for _, call := range batch {
			call.answer(err)
		}
		return
	}
}

// completer turns the completes of concurrent requests into batches, as
// the coalescer does their enqueues: while one complete of a queue is in
// flight, the next ones of that queue wait and then go together, in one
// CompleteManyJobs (one script call), which also answers each job as its
// completion left it (the answer of POST .../complete). On the path of an
// HTTP worker, one job a call, that is one script call for several jobs'
// completes where each was two round trips (BenchmarkHTTPWork).
//
// Each request gets its own answer: the store answers each ack on its own
// (a lost lease, full artifacts, or a result or artifacts it refused), so
// one request's does not touch the others. An error of the call as a
// whole concerns the queue, and every request of the batch gets it.
type completer struct {
	s   acker
	log *slog.Logger
	b   batches[*completeCall]
}

// acker is what the completer needs of the engine ([Store]).
type acker interface {
	CompleteManyJobs(ctx context.Context, queue string, acks []queue.Ack) ([]*queue.Job, []error, error)
}

type completeCall struct {
	pendingCall
	ack queue.Ack
	job *queue.Job
}

func newCompleter(s acker, log *slog.Logger) *completer {
	c := &completer{s: s, log: log}
	c.b = batches[*completeCall]{queues: map[string]*[]*completeCall{}, take: takeCompletes, send: c.send}
	return c
}

// takeCompletes is how many of the waiting completes of a queue its next
// batch takes: up to queue.MaxBatch, and maxCoalesceBytes of results and
// artifacts.
func takeCompletes(waiting []*completeCall) int {
	n, size := 0, 0
	for n < len(waiting) && n < queue.MaxBatch {
		a := waiting[n].ack
		size += len(a.Result)
		for _, v := range a.Artifacts {
			size += len(v)
		}
		if n > 0 && size > maxCoalesceBytes {
			break
		}
		n++
	}
	return n
}

// Complete completes a.ID of queue q, in a batch with the completes of q
// that arrive meanwhile, and answers the job as the completion left it
// (nil when it is not kept), as queue.Client.CompleteJob does.
func (c *completer) Complete(ctx context.Context, q string, a queue.Ack) (*queue.Job, error) {
	call := &completeCall{pendingCall: newPendingCall(), ack: a}
	if queue.ValidateQueue(q) != nil || !c.b.add(q, call) {
		c.send(q, []*completeCall{call}) // the store names a bad queue's error
	} else {
		<-call.done // bounded: each batch has coalesceTimeout
	}
	return call.job, call.err
}

// send completes batch, answering each call.
func (c *completer) send(q string, batch []*completeCall) {
	ctx, cancel := context.WithTimeout(context.Background(), coalesceTimeout)
	defer cancel()
	defer answerPanic(c.log, "CompleteManyJobs", batch)
	acks := make([]queue.Ack, len(batch))
	for i, call := range batch {
		acks[i] = call.ack
	}
	jobs, errs, err := c.s.CompleteManyJobs(ctx, q, acks)
	if err == nil && (len(jobs) != len(batch) || len(errs) != len(batch)) {
		err = errors.New("api: store answered a batch of completes with the wrong number of jobs")
	}
	for i, call := range batch {
		if err != nil {
			call.answer(err)
			continue
		}
		call.job = jobs[i]
		call.answer(errs[i])
	}
}

// claimer turns the claims of concurrent requests into batches, as the
// coalescer does their enqueues: while one claim of a queue is in flight,
// the next ones that claim alike (the same labels and visibility) wait and
// then go together, in one claim of as many jobs as they ask for in all,
// which are shared out in order: each request its own jobs, up to its max.
// A request that gets none and asked to wait then long-polls on its own,
// as it would have alone (its claim first claims again, then waits). On
// the path of an HTTP worker, one job a call, that is one script call for
// several requests' claims (BenchmarkHTTPWork).
//
// Every claim of a batch asks for the same thing but its max, which the
// handler checked: an error (Redis away, labels refused) is everyone's.
type claimer struct {
	s   claimStore
	log *slog.Logger
	b   batches[*claimCall]
}

// claimStore is what the claimer needs of the engine ([Store]).
type claimStore interface {
	Claim(ctx context.Context, queue string, o queue.ClaimOptions) ([]*queue.Job, error)
}

type claimCall struct {
	pendingCall
	q    string
	o    queue.ClaimOptions
	jobs []*queue.Job
}

func newClaimer(s claimStore, log *slog.Logger) *claimer {
	c := &claimer{s: s, log: log}
	c.b = batches[*claimCall]{queues: map[string]*[]*claimCall{}, take: takeClaims, send: c.send}
	return c
}

// takeClaims is how many of the waiting claims of a key its next batch
// takes: as many as ask for queue.MaxBatch jobs in all.
func takeClaims(waiting []*claimCall) int {
	n, want := 0, 0
	for n < len(waiting) && (n == 0 || want+waiting[n].o.Max <= queue.MaxBatch) {
		want += waiting[n].o.Max
		n++
	}
	return n
}

// Claim claims up to o.Max jobs of queue q as queue.Client.Claim does, at
// once in a batch with the claims alike that arrive meanwhile, then, when
// none came and o.Wait allows, alone.
func (c *claimer) Claim(ctx context.Context, q string, o queue.ClaimOptions) ([]*queue.Job, error) {
	o.Max = max(o.Max, 1)
	call := &claimCall{pendingCall: newPendingCall(), q: q, o: o}
	if !c.b.add(claimKey(q, o), call) {
		return c.s.Claim(ctx, q, o)
	}
	<-call.done // bounded: each batch has coalesceTimeout
	if call.err != nil || len(call.jobs) > 0 || o.Wait == 0 {
		return call.jobs, call.err
	}
	return c.s.Claim(ctx, q, o) // nothing pending: the long poll, alone
}

// claimKey is the batch key of a claim: the claims of a batch ask for the
// same thing but their max.
func claimKey(q string, o queue.ClaimOptions) string {
	return q + "\x00" + strconv.FormatInt(int64(o.Visibility), 10) + "\x00" + strings.Join(o.Labels, ",")
}

// send claims for batch at once, sharing the jobs out in order.
func (c *claimer) send(_ string, batch []*claimCall) {
	ctx, cancel := context.WithTimeout(context.Background(), coalesceTimeout)
	defer cancel()
	defer answerPanic(c.log, "Claim", batch)
	o := batch[0].o
	o.Max, o.Wait = 0, 0
	for _, call := range batch {
		o.Max += call.o.Max
	}
	jobs, err := c.s.Claim(ctx, batch[0].q, o)
	for _, call := range batch {
		if err == nil {
			n := min(call.o.Max, len(jobs))
			call.jobs, jobs = jobs[:n:n], jobs[n:]
		}
		call.answer(err)
	}
}

// batches is the group commit the three batchers share (enqueues, see
// coalescer; completes, see completer; claims, see claimer): per key (a
// queue, or for claims claimKey), while one batch is in flight the calls
// that arrive wait, and then go together. The first
// call of a key starts its sender, which sends batch after batch until
// none is waiting, yielding its processor once before taking each (see
// coalescer).
type batches[C any] struct {
	take func(waiting []C) int // how many of the waiting calls the next batch takes, ≥ 1
	send func(key string, batch []C)

	mu     sync.Mutex
	queues map[string]*[]C // keys with calls waiting or in flight
}

// add puts call in the next batch of key, and answers false, taking
// nothing, when coalesceQueueLimit calls wait there already: the caller
// then goes alone.
func (b *batches[C]) add(key string, call C) bool {
	b.mu.Lock()
	waiting, running := b.queues[key]
	if !running {
		waiting = new([]C)
		b.queues[key] = waiting
	}
	if len(*waiting) >= coalesceQueueLimit {
		b.mu.Unlock()
		return false
	}
	*waiting = append(*waiting, call)
	b.mu.Unlock()
	if !running {
		go b.run(key, waiting)
	}
	return true
}

// run sends the waiting calls of key, batch after batch, until none is
// left.
func (b *batches[C]) run(key string, waiting *[]C) {
	for {
		runtime.Gosched() // let requests under way join this batch (see coalescer)
		b.mu.Lock()
		if len(*waiting) == 0 {
			delete(b.queues, key)
			b.mu.Unlock()
			return
		}
		n := b.take(*waiting)
		batch := slices.Clone((*waiting)[:n])
		*waiting = slices.Delete(*waiting, 0, n)
		b.mu.Unlock()
		b.send(key, batch)
	}
}

// waiting is how many calls of key wait for a batch.
func (b *batches[C]) waiting(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.queues[key]; ok {
		return len(*w)
	}
	return 0
}

// pendingCall is what every coalesced call has: its error, and done,
// closed once it is answered.
type pendingCall struct {
	err  error
	done chan struct{}
}

func newPendingCall() pendingCall { return pendingCall{done: make(chan struct{})} }

func (p *pendingCall) answer(err error) {
	p.err = err
	close(p.done)
}

func (p *pendingCall) pending() *pendingCall { return p }

// answerPanic, deferred by a sender, answers a panic of the store (what,
// the method it called) as the HTTP handlers answer theirs: an internal
// error, to every call of batch not answered yet.
func answerPanic[C interface{ pending() *pendingCall }](log *slog.Logger, what string, batch []C) {
	r := recover()
	if r == nil {
		return
	}
	log.Error("api: panic in the store's "+what, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	for _, c := range batch {
		p := c.pending()
		select {
		case <-p.done:
		default:
			p.answer(&Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"})
		}
	}
}
