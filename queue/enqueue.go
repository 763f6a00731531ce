package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// NewJob is what a producer asks for. Only Kind is required.
type NewJob struct {
	// Queue defaults to "default".
	Queue string
	// Kind names the handler: 1 to 128 of [A-Za-z0-9._:-].
	Kind string
	// Payload is any JSON value, at most Config.MaxPayloadBytes. Defaults
	// to {}.
	Payload json.RawMessage
	// RunAt is when the job is due; zero or past means now. It is rounded
	// up to the millisecond: a job never runs before the instant it asked.
	RunAt time.Time
	// Delay is the alternative to RunAt: due this long from now (>= 0).
	Delay time.Duration
	// MaxAttempts is the number of claims the job may have, 1 to 1000.
	// Defaults to Config.DefaultMaxAttempts.
	MaxAttempts int
	// Backoff is the retry policy. Defaults to Config.DefaultBackoff.
	Backoff *Backoff
	// Visibility is the lease of a claim, 100 ms to 24 h. Defaults to
	// Config.DefaultVisibility.
	Visibility time.Duration
	// IdempotencyKey, when set, makes a repeat within Config.IdempotencyTTL
	// answer the first job and enqueue nothing. At most 256 bytes, no
	// control characters.
	IdempotencyKey string
	// ResultTTL is how long the job is kept once completed, up to 30 days.
	// Defaults to Config.Retention.
	ResultTTL time.Duration
	// Labels are the labels a claimer must have (ClaimOptions.Labels) to
	// receive the job: at most MaxJobLabels, each 1 to MaxLabelBytes of
	// [A-Za-z0-9._:/=+@-]; kept sorted, without duplicates. None: any
	// claimer. A queue holds at most MaxLabelSets distinct sets.
	Labels []string
	// TraceParent is the W3C traceparent to store with the job (see
	// Job.TraceParent), for a caller whose trace context is not in the
	// ctx of the enqueue (a batch gathered from several requests); one of
	// a later version is read by its first four fields and stored as
	// version 00, anything else is refused (ErrInvalid). Empty: while
	// tracing is on (package internal/tracing: a TracerProvider was
	// installed), the enqueue's own span, a child of ctx's.
	TraceParent string
	// FlowKey puts the job under its queue's flow control (see
	// FlowLimits): its key's limits, and turns between keys. 1 to
	// MaxFlowKeyBytes of [A-Za-z0-9._:/=+@-]; "" none. A job with labels
	// cannot have one (ErrInvalid): a key's jobs are taken in turns by
	// every claimer of the queue.
	FlowKey string
	// Debounce, with a FlowKey, makes this job replace its key's job
	// still waiting from an earlier debounced enqueue (see Debounce).
	Debounce *Debounce
}

// Enqueued is the answer to one NewJob.
type Enqueued struct {
	Job *Job
	// Replayed is true when the idempotency key named an earlier job: Job
	// is that job, and nothing new was enqueued.
	Replayed bool
	// Debounced is true when the job was folded into its flow key's
	// waiting debounced job: Job is that job, with this job's payload and
	// its due time moved.
	Debounced bool
}

// FieldError is an invalid field of a NewJob (or of a batch's job Index).
type FieldError struct {
	Index int // the job's place in a batch; -1 for a single job
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("jobs[%d].%s: %v", e.Index, e.Field, e.Err)
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Index: -1, Field: field, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
}

// Enqueue adds one job. Calls into one queue that arrive while another is
// in flight go to Redis together, in one script call, each still with its
// own answer (see coalesce.go); EnqueueBatch of one job is a script call
// of its own.
func (c *Client) Enqueue(ctx context.Context, nj NewJob) (Enqueued, error) {
	p, err := c.prepare(nj, c.clock.Now(), -1)
	if err != nil {
		return Enqueued{}, err
	}
	if t, on := tracing.Tracer(); on {
		return c.enqueueTraced(ctx, t, p)
	}
	return c.enqueueOne(ctx, p)
}

// enqueueTraced is Enqueue under the span "send <queue>" (a producer
// span, a child of ctx's), whose context the job stores unless it was
// given one (NewJob.TraceParent; the span then links to it).
func (c *Client) enqueueTraced(ctx context.Context, t trace.Tracer, p prepared) (Enqueued, error) {
	ctx, span := tracing.Start(ctx, t, p.job.Queue, "send", tracing.OpSend, trace.SpanKindProducer,
		tracing.AttrMessageID.String(p.job.ID), tracing.AttrKind.String(p.job.Kind))
	if p.item.Trace == "" {
		p.item.Trace = tracing.Format(span.SpanContext())
		p.job.TraceParent = p.item.Trace
	} else if sc, ok := tracing.Parse(p.item.Trace); ok {
		span.AddLink(trace.Link{SpanContext: sc})
	}
	res, err := c.enqueueOne(ctx, p)
	tracing.End(span, err)
	return res, err
}

// prepared is a validated NewJob, ready for enqueue.lua.
type prepared struct {
	job    *Job
	item   store.EnqueueItem
	labels string // the job's labels, canonical and joined ("" none)
	index  int    // the job's place in its batch, -1 for a single job (FieldError.Index)
}

// prepare validates nj (index i of a batch) against the clock's now.
func (c *Client) prepare(nj NewJob, now time.Time, i int) (prepared, error) {
	if fe := c.checkContent(&nj); fe != nil {
		return failAt(i, fe)
	}
	when, fe := whenOf(&nj, now)
	if fe != nil {
		return failAt(i, fe)
	}
	maxAttempts, bo, vis, fe := c.deliveryOf(&nj)
	if fe != nil {
		return failAt(i, fe)
	}
	labels, fe := checkExtras(&nj)
	if fe != nil {
		return failAt(i, fe)
	}
	deb, fe := checkFlow(&nj, labels)
	if fe != nil {
		return failAt(i, fe)
	}
	if nj.TraceParent != "" {
		sc, ok := tracing.Parse(nj.TraceParent)
		if !ok {
			return failAt(i, invalid("trace_parent", "not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"))
		}
		nj.TraceParent = tracing.Format(sc) // stored in version 00's form, whatever version was given
	}
	id, err := names.NewID()
	if err != nil {
		return prepared{}, fmt.Errorf("queue: %w", err)
	}
	j := &Job{ID: id, Queue: nj.Queue, Kind: nj.Kind, Payload: nj.Payload, Status: StatusScheduled,
		MaxAttempts: maxAttempts, Backoff: bo, Visibility: vis, ResultTTL: nj.ResultTTL,
		IdempotencyKey: nj.IdempotencyKey, Labels: labels, TraceParent: nj.TraceParent, FlowKey: nj.FlowKey}
	lab := joinLabels(labels)
	item := c.enqueueItem(j, nj.Backoff != nil, when, lab)
	item.Debounce = deb
	return prepared{job: j, item: item, labels: lab, index: i}, nil
}

// failAt answers fe as the error of the job at index i of its batch.
func failAt(i int, fe *FieldError) (prepared, error) {
	fe.Index = i
	return prepared{}, fe
}

// checkContent checks nj's queue, kind and payload, and fills in the
// default queue and the empty payload ({}).
func (c *Client) checkContent(nj *NewJob) *FieldError {
	nj.Queue = cmp.Or(nj.Queue, DefaultQueue)
	if err := names.ValidateQueue(nj.Queue); err != nil {
		return &FieldError{Field: "queue", Err: err}
	}
	if err := names.ValidateKind(nj.Kind); err != nil {
		return &FieldError{Field: "kind", Err: err}
	}
	if len(nj.Payload) == 0 {
		nj.Payload = json.RawMessage("{}")
	}
	if len(nj.Payload) > c.cfg.MaxPayloadBytes {
		return &FieldError{Field: "payload", Err: fmt.Errorf("%w: %d bytes, the cap is %d", ErrPayloadTooLarge, len(nj.Payload), c.cfg.MaxPayloadBytes)}
	}
	if !json.Valid(nj.Payload) {
		return invalid("payload", "not valid JSON")
	}
	return nil
}

// whenOf checks nj's run_at and delay and answers enqueue.lua's "when":
// "d<µs>", a delay counted from Redis's now, or "a<score>", an absolute
// time that stays absolute (the script decides which is due).
func whenOf(nj *NewJob, now time.Time) (string, *FieldError) {
	if !nj.RunAt.IsZero() && nj.Delay != 0 {
		return "", invalid("delay", "give run_at or delay, not both")
	}
	if nj.Delay < 0 || nj.Delay > MaxDelay {
		return "", invalid("delay", "must be in [0, %s], got %s", MaxDelay, nj.Delay)
	}
	if nj.RunAt.IsZero() {
		return delayWhen(nj.Delay), nil
	}
	if nj.RunAt.After(now.Add(MaxDelay)) {
		return "", invalid("run_at", "more than %s ahead", MaxDelay)
	}
	return "a" + scoreOf(nj.RunAt), nil
}

// deliveryOf checks nj's max_attempts, backoff and visibility and answers
// them with the client's defaults filled in.
func (c *Client) deliveryOf(nj *NewJob) (int, Backoff, time.Duration, *FieldError) {
	maxAttempts := cmp.Or(nj.MaxAttempts, c.cfg.DefaultMaxAttempts)
	if maxAttempts < 1 || maxAttempts > MaxAttemptsLimit {
		return 0, Backoff{}, 0, invalid("max_attempts", "must be in [1, %d], got %d", MaxAttemptsLimit, nj.MaxAttempts)
	}
	bo := c.backoff
	if nj.Backoff != nil {
		if err := nj.Backoff.Validate(); err != nil {
			return 0, Backoff{}, 0, &FieldError{Field: "backoff", Err: fmt.Errorf("%w: %w", ErrInvalid, err)}
		}
		bo = *nj.Backoff
	}
	vis := cmp.Or(nj.Visibility, c.cfg.DefaultVisibility)
	if vis < MinVisibility || vis > MaxVisibility {
		return 0, Backoff{}, 0, invalid("visibility", "must be in [%s, %s], got %s", MinVisibility, MaxVisibility, nj.Visibility)
	}
	return maxAttempts, bo, vis, nil
}

// checkExtras checks nj's result_ttl, idempotency key and labels and
// answers the labels canonical.
func checkExtras(nj *NewJob) ([]string, *FieldError) {
	if nj.ResultTTL < 0 || nj.ResultTTL > MaxResultTTL {
		return nil, invalid("result_ttl", "must be in [0, %s], got %s", MaxResultTTL, nj.ResultTTL)
	}
	if len(nj.IdempotencyKey) > MaxIdempotencyKey || slices.ContainsFunc([]rune(nj.IdempotencyKey), unicode.IsControl) {
		return nil, invalid("idempotency_key", "at most %d bytes without control characters", MaxIdempotencyKey)
	}
	labels, err := names.CanonicalLabels(nj.Labels, MaxJobLabels)
	if err != nil {
		return nil, &FieldError{Field: "labels", Err: err}
	}
	return labels, nil
}

// checkFlow checks nj's flow key and debounce, and answers the debounce
// as enqueue.lua reads it ("<period ms>|<max wait ms>", "" none).
func checkFlow(nj *NewJob, labels []string) (string, *FieldError) {
	if nj.FlowKey != "" {
		if fe := checkFlowKey(nj.FlowKey); fe != nil {
			return "", fe
		}
		if len(labels) > 0 {
			return "", invalid("flow_key", "a job with labels cannot have a flow key")
		}
	}
	d := nj.Debounce
	if d == nil {
		return "", nil
	}
	switch {
	case nj.FlowKey == "":
		return "", invalid("debounce", "needs a flow_key: jobs are debounced by key")
	case !nj.RunAt.IsZero() || nj.Delay != 0:
		return "", invalid("debounce", "give debounce or run_at/delay, not both: the debounce decides the due time")
	case d.Period < MinDebounce || d.Period > MaxDelay:
		return "", invalid("debounce.period", "must be in [%s, %s], got %s", MinDebounce, MaxDelay, d.Period)
	case d.MaxWait != 0 && (d.MaxWait < d.Period || d.MaxWait > MaxDelay):
		return "", invalid("debounce.max_wait", "must be 0 or in [period, %s], got %s", MaxDelay, d.MaxWait)
	}
	wait := d.MaxWait
	if wait == 0 {
		wait = min(10*d.Period, MaxDelay)
	}
	return strconv.FormatInt(d.Period.Milliseconds(), 10) + "|" + strconv.FormatInt(wait.Milliseconds(), 10), nil
}

// enqueueItem is enqueue.lua's item for j: ownBackoff, the job has a
// backoff of its own (the client's default is encoded once); lab, its
// labels joined.
func (c *Client) enqueueItem(j *Job, ownBackoff bool, when, lab string) store.EnqueueItem {
	rttl := ""
	if j.ResultTTL > 0 {
		rttl = strconv.FormatInt(j.ResultTTL.Milliseconds(), 10)
	}
	boEnc := c.backoffEnc
	if ownBackoff {
		boEnc = j.Backoff.encode()
	}
	return store.EnqueueItem{ID: j.ID, Kind: j.Kind, Payload: string(j.Payload), Spec: encodeSpec(j.MaxAttempts, j.Visibility, boEnc),
		When: when, Idem: j.IdempotencyKey, ResultTTLMs: rttl, Labels: lab, Trace: j.TraceParent, Flow: j.FlowKey}
}

// Validate reports whether c would enqueue nj, with c's own limits
// (payload size, attempts, delays, names), without enqueueing it or
// calling Redis: the error is the one Enqueue would answer, a *FieldError
// naming the field. For callers that store a job to enqueue later (cron
// entries), so that what would be refused then is refused now.
func (c *Client) Validate(nj NewJob) error {
	_, err := c.prepare(nj, c.clock.Now(), -1)
	return err
}

// EnqueueBatch adds up to MaxBatch jobs, validated as a whole: one invalid
// job (a *FieldError naming its index), or a queue past Config.MaxQueues,
// and nothing is enqueued. Jobs of one queue go in one atomic script call;
// a batch over several queues makes one call per queue, so a Redis failure
// part-way can leave the earlier queues' jobs written (retrying the batch
// with idempotency keys is safe).
func (c *Client) EnqueueBatch(ctx context.Context, jobs []NewJob) ([]Enqueued, error) {
	if len(jobs) == 0 || len(jobs) > MaxBatch {
		return nil, &FieldError{Index: -1, Field: "jobs", Err: fmt.Errorf("%w: a batch holds 1 to %d jobs, got %d", ErrInvalid, MaxBatch, len(jobs))}
	}
	now := c.clock.Now()
	preps := make([]prepared, len(jobs))
	for i, nj := range jobs {
		p, err := c.prepare(nj, now, i)
		if err != nil {
			return nil, err
		}
		preps[i] = p
	}
	// queue -> indexes into preps, the queues in first-seen order
	order, byQueue := groupBy(indexes(len(preps)), func(i int) string { return preps[i].job.Queue })
	// Every queue is known (or within the cap) before any job is written:
	// a batch refused for its queues enqueues nothing.
	for _, q := range order {
		if err := c.register(ctx, q); err != nil {
			return nil, err
		}
	}
	out := make([]Enqueued, len(jobs))
	t, traced := tracing.Tracer()
	for _, q := range order {
		var err error
		if traced {
			err = c.enqueueQueueTraced(ctx, t, q, preps, byQueue[q], out)
		} else {
			err = c.enqueueQueue(ctx, q, preps, byQueue[q], out)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// enqueueQueueTraced is enqueueQueue under the span "send <queue>" (a
// producer span, a child of ctx's): the jobs given no trace context
// (NewJob.TraceParent) store the span's, and the span links to those
// given one.
func (c *Client) enqueueQueueTraced(ctx context.Context, t trace.Tracer, queue string, preps []prepared, idx []int, out []Enqueued) error {
	var links []trace.Link
	for _, i := range idx {
		if sc, ok := tracing.Parse(preps[i].item.Trace); ok {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := t.Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer), trace.WithLinks(links...),
		trace.WithAttributes(append(tracing.Attrs(queue, "send", tracing.OpSend), tracing.AttrBatchCount.Int(len(idx)))...))
	own := tracing.Format(span.SpanContext())
	for _, i := range idx {
		if preps[i].item.Trace == "" {
			preps[i].item.Trace, preps[i].job.TraceParent = own, own
		}
	}
	err := c.enqueueQueue(ctx, queue, preps, idx, out)
	tracing.End(span, err)
	return err
}

func (c *Client) enqueueQueue(ctx context.Context, queue string, preps []prepared, idx []int, out []Enqueued) error {
	k := store.QueueKeys(c.ns, queue)
	p := store.EnqueueArgs{IdemTTLMs: c.cfg.IdempotencyTTL.Milliseconds(), MaxSets: MaxLabelSets,
		RetentionMs: max(c.cfg.Retention.Milliseconds(), 0), TombMs: c.tombMs(), Jobs: make([]store.EnqueueItem, 0, len(idx))}
	var sets jobSets
	for _, i := range idx {
		p.Jobs = append(p.Jobs, preps[i].item)
		sets.add(k, preps[i].labels)
	}
	res, err := callCreating(ctx, c, store.Enqueue, queue, k, sets, &p)
	if err != nil {
		return fmt.Errorf("queue: enqueue into %s: %w", queue, err)
	}
	if labels, over := setsOver(res); over {
		index := -1
		for _, i := range idx {
			if preps[i].labels == labels {
				index = preps[i].index
				break
			}
		}
		return tooManySets(queue, labels, index)
	}
	if len(res.Rest) != 3*len(idx) {
		return fmt.Errorf("queue: enqueue into %s: %w", queue, &store.ReplyError{Script: "enqueue", Reply: res.Rest, Want: "3 elements a job"})
	}
	now := time.UnixMicro(res.First).UTC()
	for n, i := range idx {
		id, err := store.Str("enqueue", res.Rest, 3*n, "id")
		if err != nil {
			return fmt.Errorf("queue: enqueue into %s: %w", queue, err)
		}
		replayed, err := store.Int("enqueue", res.Rest, 3*n+1, "replayed")
		if err != nil {
			return fmt.Errorf("queue: enqueue into %s: %w", queue, err)
		}
		if replayed != 0 {
			// 1: the job of the idempotency key. 2: this very job, written by
			// an earlier run of this call whose reply was lost: it answers
			// as stored (its due time was fixed by that run), unless it has
			// run and been deleted since (then as below, by this run).
			// 3: the flow key's waiting debounced job, which took this
			// one's payload. 4: this job, canceled at once by its flow
			// key's strategy (FlowCancelNewest).
			j, err := c.Get(ctx, queue, id)
			if err == nil {
				out[i] = Enqueued{Job: j, Replayed: replayed == 1, Debounced: replayed == 3}
				continue
			}
			if replayed != 2 || !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("queue: enqueue into %s: reading replayed job: %w", queue, err)
			}
		}
		due, err := nextOfReply(res.Rest[3*n+2])
		if err != nil {
			return fmt.Errorf("queue: enqueue into %s: %w", queue, err)
		}
		j := *preps[i].job
		j.EnqueuedAt = time.UnixMilli(now.UnixMilli()).UTC()
		j.RunAt, j.Status = time.UnixMilli(due.UnixMilli()).UTC(), StatusScheduled
		if !due.After(now) {
			j.RunAt, j.Status = time.UnixMilli(now.UnixMilli()).UTC(), StatusPending
		}
		out[i] = Enqueued{Job: &j}
	}
	return nil
}

// groupBy groups xs by key, the keys in the order first seen.
func groupBy[T any](xs []T, key func(T) string) (order []string, groups map[string][]T) {
	groups = map[string][]T{}
	for _, x := range xs {
		k := key(x)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], x)
	}
	return order, groups
}

// indexes answers 0 to n-1.
func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// jobSets gathers the label sets of one enqueue or wfadd call's jobs:
// their ids (the common argument lsets) and keys, which follow the
// script's declared keys (see setKeyScripts); the script registers those
// that are new.
type jobSets struct{ ids, keys []string }

func (s *jobSets) add(k store.Keys, labels string) {
	if labels == "" {
		return
	}
	if id := labelSetID(labels); !slices.Contains(s.ids, id) {
		s.ids = append(s.ids, id)
		s.keys = append(s.keys, k.SetListKey(id), k.SetWakeKey(id))
	}
}

// callCreating runs enqueue.lua or wfadd.lua on queue. When the script
// finds no queue ({-1}: it was deleted since this process created it), it
// makes the queue again, runs the script again, and puts the name back
// into the set of queues once the jobs are in (a delete racing this may
// have taken it out after the register; see Client.forget).
func callCreating[P any](ctx context.Context, c *Client, op *store.Op[P, store.EnqueueReply], queue string, k store.Keys, sets jobSets, p *P) (store.EnqueueReply, error) {
	lsets := strings.Join(sets.ids, ",")
	res, err := callKeys(ctx, c, op, k, sets.keys, lsets, p)
	if err != nil || res.First != -1 || len(res.Rest) != 0 {
		return res, err
	}
	c.known.Delete(queue)
	if err := c.register(ctx, queue); err != nil {
		return res, err
	}
	if res, err = callKeys(ctx, c, op, k, sets.keys, lsets, p); err != nil {
		return res, err
	}
	if err := c.rdb.SAdd(ctx, store.QueuesKey(c.ns), queue).Err(); err != nil {
		return res, wrapRedis(err)
	}
	return res, nil
}

// setsOver reports whether a script answered that a new label set would
// pass the cap ({-2, labels}), and the labels.
func setsOver(res store.EnqueueReply) (string, bool) {
	if res.First != -2 || len(res.Rest) != 1 {
		return "", false
	}
	labels, _ := res.Rest[0].(string)
	return labels, true
}

// tooManySets is the error of a job (index, -1 for none) that would add a
// label set past the queue's cap.
func tooManySets(queue, labels string, index int) error {
	return &FieldError{Index: index, Field: "labels", Err: fmt.Errorf("%w: queue %s has %d distinct label sets, the cap (MaxLabelSets); a job requiring [%s] would add one",
		ErrTooManyLabelSets, queue, MaxLabelSets, labels)}
}

// Get reads one job, with its artifacts (Job.Artifacts).
func (c *Client) Get(ctx context.Context, queue, id string) (*Job, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	if err := names.ValidateID(id); err != nil {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	read := getJob(ctx, pipe, k, queue, id)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapRedis(err)
	}
	return read()
}

// getJob queues on pipe the reads of Get for job id of k's queue, and
// answers the function that makes the job of their replies once pipe ran.
func getJob(ctx context.Context, pipe redis.Pipeliner, k store.Keys, queue, id string) func() (*Job, error) {
	rec := pipe.HGet(ctx, k.Jobs, id)
	data := pipe.HMGet(ctx, k.Data, id, store.ResultField(id), store.ArtifactsField(id), store.UpstreamField(id))
	return func() (*Job, error) {
		d := data.Val() // four values once pipe ran without an error but redis.Nil
		str := func(v any) string { s, _ := v.(string); return s }
		j, err := jobFromRecord(queue, id, rec.Val(), str(d[0]), str(d[1]))
		if err != nil {
			return nil, err
		}
		if a := str(d[2]); a != "" {
			j.Artifacts = json.RawMessage(a)
		}
		if u := str(d[3]); u != "" {
			j.Upstream = json.RawMessage(u)
		}
		j.Token = ""
		return j, nil
	}
}
