package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/batch"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

// The server batches five calls of concurrent requests through package
// batch, each per key: single enqueues per queue (coalescer), claims that
// ask alike (claimer), completes (completer) and failures (failer) per
// queue, and the worker registry's sightings per worker (toucher). While one
// call of a key is in flight, the next ones wait and then go together in
// one script call; nothing waits on purpose, and each request still gets
// exactly its own answer. Config.DisableCoalescing sends each alone.

// batcher is a batch.Batcher of the server's calls to the store. A panic
// of the store in a batch is logged, and answered to each of its
// requests as the HTTP handlers answer theirs: an internal error.
type batcher[I, R any] struct {
	*batch.Batcher[I, R]
	log  *slog.Logger
	what string // the store's method, for the log
}

func newBatcher[I, R any](log *slog.Logger, what string, send batch.Send[I, R], cfg batch.Config[I]) batcher[I, R] {
	return batcher[I, R]{Batcher: batch.New(send, cfg), log: log, what: what}
}

// do sends item in the next batch of key.
func (b batcher[I, R]) do(ctx context.Context, key string, item I) (R, error) {
	res, err := b.Do(ctx, key, item)
	var pe *batch.PanicError
	if errors.As(err, &pe) {
		b.log.Error("api: panic in the store's "+b.what, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		return res, &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	}
	return res, err
}

// coalescer batches the single enqueues (POST /v1/jobs) of each queue
// into one EnqueueBatch. Under load this divides the Redis work per job
// several times over (BenchmarkHTTPEnqueue/single).
//
// A batch is validated before anything is written, so a job that fails
// validation is answered its error and the batch is sent again without
// it; any other error (Redis away, too many queues) concerns the queue,
// so every job of the batch gets it, as each would have alone. Batches
// never mix queues, so one call is one script: it is written whole or
// not at all.
type coalescer struct {
	p producer
	b batcher[queue.NewJob, queue.Enqueued]
}

// producer is what the coalescer needs of the engine ([Store]): its own
// small seam, so that its tests can gate the batches.
type producer interface {
	EnqueueBatch(ctx context.Context, jobs []queue.NewJob) ([]queue.Enqueued, error)
}

func newCoalescer(p producer, log *slog.Logger) *coalescer {
	c := &coalescer{p: p}
	c.b = newBatcher(log, "EnqueueBatch", c.send, batch.Config[queue.NewJob]{Size: func(nj queue.NewJob) int { return len(nj.Payload) }})
	return c
}

// Enqueue enqueues nj, in a batch with the enqueues of the same queue that
// arrive meanwhile.
func (c *coalescer) Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error) {
	q := cmp.Or(nj.Queue, queue.DefaultQueue)
	if names.ValidateQueue(q) != nil {
		return enqueueAlone(c.p)(ctx, nj) // the store names the error
	}
	return c.b.do(ctx, q, nj)
}

// send enqueues njs, jobs of one queue, and answers each.
func (c *coalescer) send(ctx context.Context, _ string, njs []queue.NewJob) ([]queue.Enqueued, []error, error) {
	res, errs := make([]queue.Enqueued, len(njs)), make([]error, len(njs))
	left := make([]int, len(njs)) // the jobs not answered yet
	for i := range left {
		left[i] = i
	}
	for len(left) > 0 {
		jobs := make([]queue.NewJob, len(left))
		for i, j := range left {
			jobs[i] = njs[j]
		}
		out, err := c.p.EnqueueBatch(ctx, jobs)
		if err == nil && len(out) != len(jobs) {
			err = errors.New("api: store answered a batch with the wrong number of jobs")
		}
		if err == nil {
			for i, j := range left {
				res[j] = out[i]
			}
			break
		}
		var fe *queue.FieldError
		if errors.As(err, &fe) && fe.Index >= 0 && fe.Index < len(left) {
			// Nothing was written: answer the bad job, send the rest again.
			single := *fe
			single.Index = -1
			errs[left[fe.Index]] = &single
			left = slices.Delete(left, fe.Index, fe.Index+1)
			continue
		}
		for _, j := range left {
			errs[j] = err
		}
		break
	}
	return res, errs, nil
}

// enqueueAlone enqueues each job in a script call of its own: through
// EnqueueBatch, since queue.Client.Enqueue batches.
func enqueueAlone(p producer) func(context.Context, queue.NewJob) (queue.Enqueued, error) {
	return func(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error) {
		res, err := p.EnqueueBatch(ctx, []queue.NewJob{nj})
		if err != nil {
			var fe *queue.FieldError
			if errors.As(err, &fe) {
				fe.Index = -1 // as for a single enqueue
			}
			return queue.Enqueued{}, err
		}
		if len(res) != 1 {
			return queue.Enqueued{}, errors.New("api: store answered a batch with the wrong number of jobs")
		}
		return res[0], nil
	}
}

// completer batches the completes (POST .../complete) of each queue into
// one CompleteMany, which also answers each job as its completion
// left it (the answer of the request). On the path of an HTTP worker, one
// job a call, that is one script call for several jobs' completes, and no
// read after it (see docs/ARCHITECTURE.md, "Batching", for the figures).
//
// The store answers each ack on its own (a lost lease, full artifacts, or
// a result or artifacts it refused), so one request's does not touch the
// others. An error of the call as a whole concerns the queue, and every
// request of the batch gets it.
type completer struct {
	s acker
	b batcher[queue.Ack, *queue.Job]
}

// acker is what the completer needs of the engine ([Store]).
type acker interface {
	CompleteMany(ctx context.Context, queue string, acks []queue.Ack) ([]*queue.Job, []error, error)
}

func newCompleter(s acker, log *slog.Logger) *completer {
	return &completer{s: s, b: newBatcher(log, "CompleteMany", s.CompleteMany, batch.Config[queue.Ack]{Size: ackSize})}
}

// ackSize is the bytes of an ack's result and artifacts.
func ackSize(a queue.Ack) int {
	n := len(a.Result)
	for _, v := range a.Artifacts {
		n += len(v)
	}
	return n
}

// Complete completes a.ID of queue q, in a batch with the completes of q
// that arrive meanwhile, and answers the job as the completion left it
// (nil when it is not kept), as queue.Ack.ReturnJob asks.
func (c *completer) Complete(ctx context.Context, q string, a queue.Ack) (*queue.Job, error) {
	a.ReturnJob = true
	if names.ValidateQueue(q) != nil {
		return storeComplete(c.s)(ctx, q, a) // the store names the error
	}
	return c.b.do(ctx, q, a)
}

// failer batches the failures (POST .../fail) of each queue into one
// FailMany, which also answers each job as its failure left it (the
// answer of the request): one script call for several requests, and no
// read after it, as completer does for completes. The store answers
// each failure on its own (a lost lease, options it refused); an error of
// the call as a whole concerns the queue, and every request of the
// batch gets it.
type failer struct {
	s failStore
	b batcher[queue.Failed, queue.FailResult]
}

// failStore is what the failer needs of the engine ([Store]).
type failStore interface {
	FailMany(ctx context.Context, queue string, fails []queue.Failed) ([]queue.FailResult, []error, error)
}

func newFailer(s failStore, log *slog.Logger) *failer {
	return &failer{s: s, b: newBatcher(log, "FailMany", s.FailMany, batch.Config[queue.Failed]{Size: func(f queue.Failed) int { return len(f.Error) }})}
}

// Fail records f, a failure of a job of queue q, in a batch with the
// failures of q that arrive meanwhile, and answers where the job went
// and the job as the failure left it (FailResult.Job, nil when it is not
// kept), as queue.Failed.ReturnJob asks.
func (f *failer) Fail(ctx context.Context, q string, x queue.Failed) (queue.FailResult, error) {
	x.ReturnJob = true
	if names.ValidateQueue(q) != nil {
		return storeFail(f.s)(ctx, q, x) // the store names the error
	}
	return f.b.do(ctx, q, x)
}

// toucher batches the registry's sightings of each worker (see
// registry.Touch): the worker calls that carry a worker_id record it
// before a claim (its queue and labels), after a claim (the jobs it now
// holds), a heartbeat (the job it holds), and a complete or a failure
// (the job it no longer holds). Each is a registry script call about as
// costly as the job call it follows, and sightings waits to write most of
// them (see sightings.go); those it writes of one worker while one of its
// calls is in flight go together: a job's last sighting says whether it
// is held (held, then released in the same batch: released), the queues
// it claimed from are each recorded, and the last labels given are the
// ones recorded. An error of the call is every sighting's of the batch:
// they are the same worker's (the registry's cap refused it, or Redis
// failed); a sighting the registry would refuse for what it carries is
// refused alone, before it joins one.
type toucher struct {
	b batcher[registry.Touch, time.Duration]
}

// touchStore is what the toucher needs of the registry.
type touchStore interface {
	TouchTTL(ctx context.Context, id string, t registry.Touch) (time.Duration, error)
}

func newToucher(r touchStore, log *slog.Logger) *toucher {
	send := func(ctx context.Context, id string, ts []registry.Touch) ([]time.Duration, []error, error) {
		var ttl time.Duration
		for _, t := range mergeTouches(ts) {
			var err error
			if ttl, err = r.TouchTTL(ctx, id, t); err != nil {
				return nil, nil, err
			}
		}
		res := make([]time.Duration, len(ts))
		for i := range res {
			res[i] = ttl
		}
		return res, nil, nil
	}
	return &toucher{b: newBatcher(log, "Touch", send, batch.Config[registry.Touch]{
		Items: func(t registry.Touch) int { return max(len(t.Add)+len(t.Drop), 1) }, // at most registry.MaxHeldJobs
	})}
}

// Touch records x, a sighting of worker id, in a batch with the sightings
// of id that arrive meanwhile, and answers the worker's TTL. A sighting
// the registry would refuse for what it carries (registry.Touch.Check) is
// refused here, alone: in a batch, its error would be every sighting's.
func (t *toucher) Touch(ctx context.Context, id string, x registry.Touch) (time.Duration, error) {
	if err := x.Check(); err != nil {
		return 0, err
	}
	return t.b.do(ctx, id, x)
}

// mergeTouches answers the registry calls that record ts, one worker's
// sightings in the order they came: one a queue claimed from beyond the
// first, then one with the first queue, the last labels given, the jobs
// whose last sighting holds them (Add) and those whose last sighting
// released them (Drop). A TTL, which the server's sightings never give,
// is the last one given.
func mergeTouches(ts []registry.Touch) []registry.Touch {
	if len(ts) == 1 {
		return ts
	}
	var out []registry.Touch
	var m registry.Touch
	held := map[registry.JobRef]bool{}
	var order []registry.JobRef
	note := func(refs []registry.JobRef, h bool) {
		for _, j := range refs {
			if _, ok := held[j]; !ok {
				order = append(order, j)
			}
			held[j] = h
		}
	}
	for _, t := range ts {
		switch {
		case t.Queue == "" || t.Queue == m.Queue:
		case m.Queue == "":
			m.Queue = t.Queue
		case !slices.ContainsFunc(out, func(o registry.Touch) bool { return o.Queue == t.Queue }):
			out = append(out, registry.Touch{Queue: t.Queue})
		}
		if len(t.Labels) > 0 {
			m.Labels = t.Labels
		}
		if t.TTL != 0 {
			m.TTL = t.TTL
		}
		note(t.Add, true)
		note(t.Drop, false)
	}
	for _, j := range order {
		if held[j] {
			m.Add = append(m.Add, j)
		} else {
			m.Drop = append(m.Drop, j)
		}
	}
	return append(out, m)
}

// claimer batches the claims (POST /v1/queues/{queue}/claim) that ask
// alike (the same queue, labels and visibility) into one claim of as many
// jobs as they ask for in all, which are shared out in order: each
// request its own jobs, up to its max. A request that gets none and asked
// to wait then long-polls on its own, as it would have alone (its claim
// first claims again, then waits). On the path of an HTTP worker, one job
// a call, that is one script call for several requests' claims
// (BenchmarkHTTPWork).
//
// Every claim of a batch asks for the same thing but its max, which the
// handler checked: an error (Redis away, labels refused) is everyone's.
type claimer struct {
	s claimStore
	b batcher[claim, []*queue.Job]
}

// claimStore is what the claimer needs of the engine ([Store]).
type claimStore interface {
	Claim(ctx context.Context, queue string, o queue.ClaimOptions) ([]*queue.Job, error)
}

// claim is one request's claim.
type claim struct {
	q string
	o queue.ClaimOptions
}

func newClaimer(s claimStore, log *slog.Logger) *claimer {
	c := &claimer{s: s}
	c.b = newBatcher(log, "Claim", c.send, batch.Config[claim]{Items: func(cl claim) int { return cl.o.Max }})
	return c
}

// Claim claims up to o.Max jobs of queue q as queue.Client.Claim does, at
// once in a batch with the claims alike that arrive meanwhile, then, when
// none came and o.Wait allows, alone.
func (c *claimer) Claim(ctx context.Context, q string, o queue.ClaimOptions) ([]*queue.Job, error) {
	o.Max = max(o.Max, 1)
	jobs, err := c.b.do(ctx, claimKey(q, o), claim{q: q, o: o})
	if err != nil || len(jobs) > 0 || o.Wait == 0 {
		return jobs, err
	}
	return c.s.Claim(ctx, q, o) // nothing pending: the long poll, alone
}

// claimKey is the batch key of a claim: the claims of a batch ask for the
// same thing but their max.
func claimKey(q string, o queue.ClaimOptions) string {
	return q + "\x00" + strconv.FormatInt(int64(o.Visibility), 10) + "\x00" + strings.Join(o.Labels, ",")
}

// send claims for claims at once, without waiting, and shares the jobs
// out in order.
func (c *claimer) send(ctx context.Context, _ string, claims []claim) ([][]*queue.Job, []error, error) {
	o := claims[0].o
	o.Max, o.Wait = 0, 0
	for _, cl := range claims {
		o.Max += cl.o.Max
	}
	jobs, err := c.s.Claim(ctx, claims[0].q, o)
	if err != nil {
		return nil, nil, err
	}
	res := make([][]*queue.Job, len(claims))
	for i, cl := range claims {
		n := min(cl.o.Max, len(jobs))
		res[i], jobs = jobs[:n:n], jobs[n:]
	}
	return res, nil, nil
}
