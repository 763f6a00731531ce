package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/chronoq/chronoq/internal/batch"
	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
)

// run is one claimed job on its way through a handler.
type run struct {
	job    *queue.Job
	q      *queueState
	cancel context.CancelCauseFunc
	// state: runRunning until the handler returns (runFinished) or the
	// stop hands the job back (runHandedBack), whichever comes first.
	state atomic.Int32
	// skip: a run claimed ahead whose context ended before its due time:
	// its handler is not called
	skip    bool
	hbStop  chan struct{}
	hbClose sync.Once
	// span is the run's span ("process <queue>", see startSpan), nil while
	// tracing is off; bg is the context of the calls that record its
	// outcome: the worker's, with span in it.
	span trace.Span
	bg   context.Context

	// What the handler leaves beside its result (jobctx.go).
	w        *Worker
	log      *jobLog         // its log writer
	beat     chan struct{}   // progress waits: heartbeat now (capacity 1)
	beatMu   sync.Mutex      // held while a heartbeat that may carry progress is in flight
	progMu   sync.Mutex      // guards progress
	progress *queue.Progress // set by Progress, not sent yet
}

const (
	runRunning = iota
	runFinished
	runHandedBack
)

func (r *run) stopHeartbeat() { r.hbClose.Do(func() { close(r.hbStop) }) }

// start takes a slot for job and runs it, with its heartbeat, in
// goroutines of their own: at once, or, for a job claimed ahead of its due
// time, at at (an instant of the client's clock). Only the claim loop
// calls it.
func (w *Worker) start(q *queueState, job *queue.Job, at time.Time) {
	ctx, cancel := context.WithCancelCause(w.jobCtx)
	r := &run{job: job, q: q, cancel: cancel, hbStop: make(chan struct{}),
		w: w, log: newJobLog(w, job), beat: make(chan struct{}, 1), bg: w.bg}
	ctx = context.WithValue(ctx, runKey{}, r)
	w.mu.Lock()
	w.free--
	q.running++
	w.running[r] = struct{}{}
	if !at.IsZero() {
		q.held++
	}
	w.mu.Unlock()
	w.live.Add(1)
	w.wg.Add(1)
	go func() {
		if !at.IsZero() {
			held := w.holds.wait(ctx, at)
			w.mu.Lock()
			if q.held--; q.held == 0 {
				q.openGate()
			}
			w.mu.Unlock()
			if !held {
				// Its context ended first (the stop handed it back): the
				// handler does not run, and the run settles as one that
				// returned its context's error at once.
				r.skip = true
				w.wg.Done() // no heartbeat
				w.execute(ctx, r)
				return
			}
		}
		// The run's span starts with its handler: a held job's when it starts.
		if t, on := tracing.Tracer(); on {
			ctx = r.startSpan(ctx, t)
		}
		go w.heartbeat(ctx, r)
		w.execute(ctx, r)
	}()
}

// startSpan starts the run's span, "process <queue>" (a consumer span of
// the messaging semantic conventions), and answers ctx with it. A first
// attempt's span is a child of the job's enqueue (Job.TraceParent); a
// retry's starts a trace of its own, linked to the enqueue, so that one
// trace does not grow with every attempt. A job stored without a trace
// context gets a root span.
func (r *run) startSpan(ctx context.Context, t trace.Tracer) context.Context {
	j := r.job
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(append(tracing.Attrs(j.Queue, "process", tracing.OpProcess), tracing.AttrMessageID.String(j.ID),
			tracing.AttrKind.String(j.Kind), tracing.AttrAttempt.Int(j.Attempts))...)}
	parent := ctx
	if sc, ok := tracing.Parse(j.TraceParent); ok {
		if j.Attempts <= 1 {
			parent = trace.ContextWithRemoteSpanContext(ctx, sc)
		} else {
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, r.span = t.Start(parent, "process "+j.Queue, opts...)
	r.bg = trace.ContextWithSpan(r.w.bg, r.span)
	return ctx
}

// execute runs the handler, frees the slot and settles the job.
func (w *Worker) execute(ctx context.Context, r *run) {
	start := w.clock.Now()
	var res json.RawMessage
	var err error
	if r.skip {
		err = context.Cause(ctx)
	} else {
		res, err = w.call(ctx, r.job)
	}
	end := w.clock.Now()
	// Its last log lines and progress reach the store before its outcome
	// (after it, they would be refused), while its lease is still kept.
	r.log.close()
	r.flushProgress()
	r.stopHeartbeat()
	cause := context.Cause(ctx)
	r.cancel(nil)
	finished := r.state.CompareAndSwap(runRunning, runFinished)
	w.mu.Lock()
	w.free++
	r.q.running--
	delete(w.running, r)
	w.mu.Unlock()
	signal(w.slotFreed)
	w.reg.heldChanged()
	if !finished {
		r.endSpan(err)
		return // handed back by the stop, which settled it
	}
	defer w.live.Done()
	w.settle(r, res, err, cause, start, end)
	r.endSpan(err) // once its outcome is recorded, and before the stop can see the run over
}

// endSpan ends the run's span (when it has one) with the handler's error.
func (r *run) endSpan(err error) {
	if r.span != nil {
		tracing.End(r.span, err)
	}
}

// call runs the handler, turning a panic into a *PanicError.
func (w *Worker) call(ctx context.Context, job *queue.Job) (res json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, recovered(v)
		}
	}()
	return w.cfg.Handler.Work(ctx, job)
}

// settle records the outcome of the run from start to end: a success goes
// to complete, a failure to Fail (or CancelClaimed when the job's
// cancellation was asked).
func (w *Worker) settle(r *run, res json.RawMessage, err, cause error, start, end time.Time) {
	j := r.job
	o := Outcome{Job: j, Duration: end.Sub(start), Err: err}
	if err == nil {
		if len(res) == 0 || json.Valid(res) {
			w.complete(r.bg, r.q, o, res)
			return
		}
		err = errors.New("worker: the handler's result is not valid JSON")
		o.Err = err
	}
	if errors.Is(cause, ErrJobCanceled) {
		o.StoreErr = w.client.CancelClaimed(r.bg, j.Queue, j.ID, j.Token)
		if o.StoreErr == nil {
			o.Status = queue.StatusCanceled
		}
		w.finish(o)
		return
	}
	w.fail(r.bg, r.q, o, errorText(err, cause), end)
}

// fail records a failed attempt of o.Job with msg as its last error; a
// RetryAfter delay counts from at, when the handler returned (not from
// when this goroutine got to run again).
func (w *Worker) fail(ctx context.Context, q *queueState, o Outcome, msg string, at time.Time) {
	j := o.Job
	fo := queue.FailOptions{Error: msg}
	var skip *skipRetryError
	var after *retryAfterError
	var by time.Time
	switch {
	case errors.As(o.Err, &skip):
		fo.Dead = true
	case errors.As(o.Err, &after):
		by = at.Add(min(after.delay, queue.MaxDelay))
	}
	span := settleSpan(ctx, j, "fail")
	res, err := w.fails.Do(w.bg, q.Name, failure{Failed: queue.Failed{ID: j.ID, Token: j.Token, FailOptions: fo}, by: by})
	if span != nil {
		tracing.End(span, err)
	}
	if err != nil {
		o.StoreErr = err
	} else {
		o.Status, o.RunAt = res.Status, res.RunAt
		if res.Status == queue.StatusScheduled {
			w.retryAsked(q, res.Due)
		}
	}
	w.finish(o)
}

// finish logs what the store refused and reports the outcome.
func (w *Worker) finish(o Outcome) {
	if o.StoreErr != nil {
		level, msg := w.log.Warn, "worker: the store refused the job's outcome"
		if errors.Is(o.StoreErr, queue.ErrLeaseLost) {
			level, msg = w.log.Info, "worker: late outcome refused: the job's lease was lost"
		}
		level(msg, "queue", o.Job.Queue, "id", o.Job.ID, "err", o.StoreErr)
	}
	w.report(o)
}

// errorText is the last error recorded for a failed run: the handler's
// error, and why its context was cancelled when that is not in it.
func errorText(err, cause error) string {
	if cause != nil && !errors.Is(err, cause) {
		return fmt.Sprintf("%v (%v)", err, cause)
	}
	return err.Error()
}

// heartbeat extends r's lease every interval while the handler runs, and
// cancels the handler's context when the lease is lost, the job's
// cancellation is requested, or its timeout passes. After a cancellation
// it goes on extending the lease until the handler returns, so that no
// other worker runs the job meanwhile.
func (w *Worker) heartbeat(ctx context.Context, r *run) {
	defer w.wg.Done()
	j := r.job
	interval := w.cfg.HeartbeatInterval
	if interval <= 0 {
		interval = max(j.Visibility/3, minHeartbeat)
	}
	var timeoutC <-chan time.Time
	timeout := w.cfg.Timeout
	if d, ok := w.cfg.KindTimeouts[j.Kind]; ok {
		timeout = d
	}
	if timeout > 0 {
		tt := w.clock.NewTimer(timeout)
		defer tt.Stop()
		timeoutC = tt.Chan()
	}
	t := w.clock.NewTimer(interval)
	defer t.Stop()
	leaseUntil := j.LeaseUntil
	for {
		select {
		case <-r.hbStop:
			return
		case <-timeoutC:
			timeoutC = nil
			r.cancel(fmt.Errorf("%w after %s", ErrTimeout, timeout))
			continue
		case <-t.Chan():
		case <-r.beat: // progress to send: at once
		}
		r.beatMu.Lock()
		p := r.takeProgress()
		lease, err := w.client.Heartbeat(w.bg, j.Queue, j.ID, j.Token, queue.HeartbeatOptions{Progress: p})
		if err != nil && p != nil {
			r.progMu.Lock()
			if r.progress == nil {
				r.progress = p // not sent: with the next beat, unless a newer one came
			}
			r.progMu.Unlock()
		}
		r.beatMu.Unlock()
		switch {
		case errors.Is(err, queue.ErrLeaseLost):
			r.cancel(err)
			return
		case errors.Is(err, queue.ErrNotFound):
			r.cancel(fmt.Errorf("%w: %w", queue.ErrLeaseLost, err))
			return
		case err != nil:
			if ctx.Err() == nil && !w.clock.Now().Before(leaseUntil) {
				// The lease has lapsed for all we know: another worker may
				// have the job by now.
				r.cancel(fmt.Errorf("%w: lease expired while heartbeats failed: %w", queue.ErrLeaseLost, err))
			}
			w.log.Warn("worker: heartbeat failed", "queue", j.Queue, "id", j.ID, "err", err)
		default:
			leaseUntil = lease.Until
			if lease.CancelRequested {
				r.cancel(ErrJobCanceled)
			}
		}
		if !t.Stop() { // a beat for progress: the next one interval from now
			select {
			case <-t.Chan():
			default:
			}
		}
		t.Reset(interval)
	}
}

// complete completes o.Job with result, in one CompleteMany with the
// completes of its queue that arrive meanwhile (w.completes, package
// batch), and reports the outcome. The jobs of one claim often end
// together: their completes then go in one script call.
func (w *Worker) complete(ctx context.Context, q *queueState, o Outcome, result json.RawMessage) {
	j := o.Job
	w.awaitGate(q)
	span := settleSpan(ctx, j, "complete")
	_, err := w.completes.Do(w.bg, q.Name, queue.Ack{ID: j.ID, Token: j.Token, Result: result})
	if span != nil {
		tracing.End(span, err)
	}
	if errors.Is(err, queue.ErrInvalid) || errors.Is(err, queue.ErrPayloadTooLarge) {
		// Its result was refused (over the cap) and its job left
		// processing: the attempt fails, with the reason.
		o.Err = fmt.Errorf("worker: the handler's result was refused: %w", err)
		w.fail(ctx, q, o, o.Err.Error(), w.clock.Now())
		return
	}
	w.settleAck(o, err)
}

// awaitGate waits, while runs of q claimed ahead wait for their due time,
// until the last of them starts, the next claim of q is sent, or the stop:
// the jobs of one lookahead claim then complete in one call, not one
// each, a wait of about Config.Lookahead at most.
func (w *Worker) awaitGate(q *queueState) {
	w.mu.Lock()
	if q.held == 0 {
		w.mu.Unlock()
		return
	}
	if q.gate == nil {
		q.gate = make(chan struct{})
	}
	g := q.gate
	w.mu.Unlock()
	select {
	case <-g:
	case <-w.quit:
	}
}

// newCompletes answers the batcher of the worker's completes, by queue.
func newCompletes(c *queue.Client) *batch.Batcher[queue.Ack, struct{}] {
	send := func(ctx context.Context, q string, acks []queue.Ack) ([]struct{}, []error, error) {
		_, errs, err := c.CompleteMany(ctx, q, acks)
		return nil, errs, err
	}
	return batch.New(send, batch.Config[queue.Ack]{Size: func(a queue.Ack) int { return len(a.Result) }})
}

// settleSpan starts, when the run's trace records, a span of its wait for
// the batched call that settles j (op "complete" or "fail"): the batch's
// script call is made under a context of its own. Nil when none starts.
func settleSpan(ctx context.Context, j *queue.Job, op string) trace.Span {
	tr, on := tracing.Tracer()
	if !on || !trace.SpanFromContext(ctx).IsRecording() {
		return nil
	}
	_, span := tracing.Start(ctx, tr, j.Queue, op, tracing.OpSettle, trace.SpanKindClient, tracing.AttrMessageID.String(j.ID))
	return span
}

// failure is a failed run on its way to the store: by, when set, is the
// instant of the worker's clock its retry was asked for (RetryAfter).
type failure struct {
	queue.Failed
	by time.Time
}

// newFails answers the batcher of the worker's failures, by queue: the
// runs of one claim often fail together (a dependency down), and their
// failures then go in one script call. A retry asked for by an instant
// goes as what is left of its delay as the call is sent (RetryIn): the
// time until then passes on this host's clock, the rest after Redis
// records the failure, on Redis's, so neither a host clock that is off
// nor the wait for the batch moves it.
func newFails(c *queue.Client, clock clockwork.Clock) *batch.Batcher[failure, queue.FailResult] {
	send := func(ctx context.Context, q string, fs []failure) ([]queue.FailResult, []error, error) {
		items := make([]queue.Failed, len(fs))
		for i, f := range fs {
			items[i] = f.Failed
			if !f.by.IsZero() {
				if items[i].RetryIn = clock.Until(f.by); items[i].RetryIn <= 0 {
					items[i].RetryIn = -1 // passed already: at once
				}
			}
		}
		return c.FailMany(ctx, q, items)
	}
	return batch.New(send, batch.Config[failure]{Size: func(f failure) int { return len(f.Error) }})
}

func (w *Worker) settleAck(o Outcome, err error) {
	if err != nil {
		o.StoreErr = err
	} else {
		o.Status = queue.StatusCompleted
	}
	w.finish(o)
}
