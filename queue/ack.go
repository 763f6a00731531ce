package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/internal/tracing"
	"go.opentelemetry.io/otel/trace"
	"math/rand/v2"
	"strings"
	"time"
)

// The answers of the fenced scripts (complete, fail, heartbeat, release).
const (
	codeNotFound  = -1
	codeLeaseLost = 0
	codeDone      = 1
	codeRepeated  = 2  // the same token's call was done before: idempotent
	codeMalformed = -4 // the job's stored record could not be read: nothing changed
)

func codeErr(code int64, queue, id string) error {
	switch code {
	case codeDone, codeRepeated:
		return nil
	case codeLeaseLost:
		return fmt.Errorf("%w: job %s/%s", ErrLeaseLost, queue, id)
	case codeNotFound:
		return fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	case codeMalformed:
		return fmt.Errorf("queue: job %s/%s: its stored record is malformed (left as it is)", queue, id)
	}
	return fmt.Errorf("queue: job %s/%s: unexpected script answer %d", queue, id, code)
}

// Ack completes one claimed job (see CompleteMany).
type Ack struct {
	ID, Token string
	// Result is stored with the job (any JSON, at most
	// Config.MaxPayloadBytes). Optional.
	Result json.RawMessage
	// Artifacts are set over the job's artifacts with the completion (see
	// CompleteOptions.Artifacts). Optional.
	Artifacts map[string]json.RawMessage
	// ReturnJob asks for the job as the completion left it, read in the
	// same script call: what Get would answer right after (its result,
	// artifacts and upstream included, its token not), without a second
	// round trip. It is nil when the job is no longer kept (a Client
	// whose Retention is negative deletes a completed job at once).
	ReturnJob bool
}

// Complete marks a claimed job done, storing o's result and artifacts
// with it. It answers ErrLeaseLost, and changes nothing, when token is
// not the job's current claim.
func (c *Client) Complete(ctx context.Context, queue, id, token string, o CompleteOptions) error {
	_, errs, err := c.CompleteMany(ctx, queue, []Ack{{ID: id, Token: token, Result: o.Result, Artifacts: o.Artifacts}})
	if err != nil {
		return err
	}
	return errs[0]
}

// CompleteMany completes up to MaxBatch claimed jobs of one queue in one
// script call. The error is for the call as a whole (a queue name or a
// number of acks not valid, or Redis); otherwise errs[i] is the answer for
// acks[i]: nil, ErrLeaseLost or ErrNotFound, or a *FieldError when the ack
// itself is refused (an id that is not valid, a result or artifacts that
// are not valid JSON, a result over Config.MaxPayloadBytes or artifacts
// over a cap: ErrInvalid or ErrPayloadTooLarge). A refused ack leaves its
// job processing and does not hold the others back: they are sent without
// it. jobs is nil unless an ack asks for its job (Ack.ReturnJob): then
// jobs[i] is the job of acks[i] when it asked, nil when errs[i] is not nil
// or the job is not kept.
func (c *Client) CompleteMany(ctx context.Context, queue string, acks []Ack) (jobs []*Job, errs []error, err error) {
	answer := false
	for _, a := range acks {
		answer = answer || a.ReturnJob
	}
	jobs, errs, err = c.completeMany(ctx, queue, acks, answer)
	for i := range jobs {
		if !acks[i].ReturnJob {
			jobs[i] = nil
		}
	}
	return jobs, errs, err
}

// completeMany is CompleteMany, answering the jobs when answer is set.
func (c *Client) completeMany(ctx context.Context, queue string, acks []Ack, answer bool) (jobs []*Job, errs []error, err error) {
	if t, on := tracing.Tracer(); on {
		sctx, span := tracing.Start(ctx, t, queue, "complete", tracing.OpSettle, trace.SpanKindClient, tracing.AttrBatchCount.Int(len(acks)))
		if len(acks) == 1 {
			span.SetAttributes(tracing.AttrMessageID.String(acks[0].ID))
		}
		jobs, errs, err = c.completeAcks(sctx, queue, acks, answer)
		tracing.End(span, err)
		return jobs, errs, err
	}
	return c.completeAcks(ctx, queue, acks, answer)
}

// completeAcks is completeMany without its span.
func (c *Client) completeAcks(ctx context.Context, queue string, acks []Ack, answer bool) (jobs []*Job, errs []error, err error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, nil, err
	}
	if len(acks) == 0 || len(acks) > MaxBatch {
		return nil, nil, invalid("acks", "a batch holds 1 to %d, got %d", MaxBatch, len(acks))
	}
	errs = make([]error, len(acks))
	if answer {
		jobs = make([]*Job, len(acks))
	}
	// The acks refused here stay out of the call: sent[k] is the index of
	// the k-th ack sent.
	sent := make([]int, 0, len(acks))
	p := store.CompleteArgs{RetentionMs: max(c.cfg.Retention.Milliseconds(), 0), History: c.cfg.CompletedHistory, TombMs: c.tombMs(),
		Answer: answer, Acks: make([]store.CompleteItem, 0, len(acks))}
	for i, a := range acks {
		arts, err := c.checkAck(a)
		if err != nil {
			errs[i] = err
			continue
		}
		sent = append(sent, i)
		p.Acks = append(p.Acks, store.CompleteItem{ID: a.ID, Token: a.Token, Result: string(a.Result), Artifacts: arts})
	}
	if len(sent) == 0 {
		return jobs, errs, nil
	}
	reply, err := call(ctx, c, store.Complete, k, &p)
	if err != nil {
		return nil, nil, fmt.Errorf("queue: complete in %s: %w", queue, err)
	}
	if err := readCompleted(queue, reply.Rows, acks, sent, errs, jobs); err != nil {
		return nil, nil, fmt.Errorf("queue: complete in %s: %w", queue, err)
	}
	if !answer {
		return nil, errs, nil
	}
	return jobs, errs, nil
}

// readCompleted reads complete.lua's reply res to the acks sent (their
// indexes into acks): a code each into errs, then, when jobs is not nil,
// each job as its completion left it.
func readCompleted(queue string, res []any, acks []Ack, sent []int, errs []error, jobs []*Job) error {
	n := len(sent)
	if jobs != nil {
		n *= 2
	}
	if len(res) != n {
		return &store.ReplyError{Script: "complete", Reply: res, Want: fmt.Sprintf("%d elements", n)}
	}
	for k, i := range sent {
		code, err := store.Int("complete", res, k, "code")
		if err != nil {
			return err
		}
		if code == codeArtifactsCount || code == codeArtifactsBytes {
			errs[i] = artifactsErr(code)
			continue
		}
		errs[i] = codeErr(code, queue, acks[i].ID)
	}
	if jobs == nil {
		return nil
	}
	for k, i := range sent {
		s, err := store.Str("complete", res, len(sent)+k, "job")
		if err != nil {
			return err
		}
		if s == "" || errs[i] != nil {
			continue
		}
		j, err := parsePacked(queue, s)
		if err != nil {
			return err
		}
		j.Token = "" // as Get answers it
		jobs[i] = j
	}
	return nil
}

// checkAck checks what an ack carries before it is sent, and answers its
// artifacts encoded for complete.lua.
func (c *Client) checkAck(a Ack) (arts string, err error) {
	if err := names.ValidateID(a.ID); err != nil {
		return "", err
	}
	if len(a.Result) > c.cfg.MaxPayloadBytes {
		return "", &FieldError{Index: -1, Field: "result", Err: fmt.Errorf("%w: %d bytes, the cap is %d", ErrPayloadTooLarge, len(a.Result), c.cfg.MaxPayloadBytes)}
	}
	if len(a.Result) > 0 && !json.Valid(a.Result) {
		return "", invalid("result", "not valid JSON")
	}
	return encodeArtifacts(a.Artifacts)
}

// FailOptions describe a failed attempt.
type FailOptions struct {
	// Error is recorded as the job's last error.
	Error string
	// RetryAt, when set, is the next run instead of now + backoff: an
	// instant of the caller's clock, taken as it is.
	RetryAt time.Time
	// RetryIn, when not zero, is the next run instead of now + backoff:
	// this long after Redis records the failure, by Redis's clock, so a
	// host whose clock is off does not move it (a delay made an instant
	// with RetryAt would move by the host's error). Less than zero: at
	// once. At most MaxDelay; not with RetryAt.
	RetryIn time.Duration
	// Dead sends the job to the dead set whatever attempts are left.
	Dead bool
}

// FailResult is where a failed job went.
type FailResult struct {
	Status Status    // StatusScheduled or StatusPending (a retry), or StatusDead
	RunAt  time.Time // the retry's due time; the time of death when dead
	// Due is a scheduled retry's due time as the schedule keeps it, to the
	// microsecond (RunAt is the millisecond it falls in, as a job shows).
	Due time.Time
	// Job is the job as the failure left it, when FailMany was asked for
	// it (Failed.ReturnJob); nil otherwise, or when it is not kept.
	Job *Job
}

// MaxErrorBytes caps the error message stored with a job.
const MaxErrorBytes = 64 << 10

// Fail records a failed attempt of a claimed job: it retries at now + the
// job's backoff (or at o.RetryAt, or o.RetryIn from now), or goes to the dead set when its
// attempts are spent or o.Dead is set. It answers ErrLeaseLost, and changes
// nothing, when token is not the job's current claim.
func (c *Client) Fail(ctx context.Context, queue, id, token string, o FailOptions) (FailResult, error) {
	if t, on := tracing.Tracer(); on {
		sctx, span := tracing.Start(ctx, t, queue, "fail", tracing.OpSettle, trace.SpanKindClient, tracing.AttrMessageID.String(id))
		r, err := c.fail(sctx, queue, id, token, o)
		tracing.End(span, err)
		return r, err
	}
	return c.fail(ctx, queue, id, token, o)
}

// fail is Fail without its span.
func (c *Client) fail(ctx context.Context, queue, id, token string, o FailOptions) (FailResult, error) {
	res, errs, err := c.failMany(ctx, queue, []Failed{{ID: id, Token: token, FailOptions: o}})
	if err != nil {
		return FailResult{}, fmt.Errorf("queue: fail %s/%s: %w", queue, id, err)
	}
	return res[0], errs[0]
}

// Failed is one failed attempt, for FailMany: the job, its claim's
// token, and what Fail's options say.
type Failed struct {
	ID, Token string
	FailOptions
	// ReturnJob asks for the job as the failure left it (FailResult.Job),
	// read in the same script call: what Get would answer right after
	// (its token not), without a second round trip. It is nil when the
	// job is no longer kept (a canceled job on a Client whose Retention is
	// negative).
	ReturnJob bool
}

// FailMany records failed attempts of claimed jobs of one queue, each as
// Fail does, in one script call: res and errs hold an entry a failure,
// its result and its error (ErrLeaseLost, ErrNotFound, or what is wrong
// with its options: such a failure is left out of the call). err is an
// error of the call as a whole, every failure's. At most MaxBatch. A
// failure that asks for its job (Failed.ReturnJob) gets it in its
// result, also when the failure was recorded before (a repeated call).
func (c *Client) FailMany(ctx context.Context, queue string, fails []Failed) (res []FailResult, errs []error, err error) {
	if t, on := tracing.Tracer(); on {
		sctx, span := tracing.Start(ctx, t, queue, "fail", tracing.OpSettle, trace.SpanKindClient, tracing.AttrBatchCount.Int(len(fails)))
		if len(fails) == 1 {
			span.SetAttributes(tracing.AttrMessageID.String(fails[0].ID))
		}
		res, errs, err = c.failMany(sctx, queue, fails)
		tracing.End(span, err)
		return res, errs, err
	}
	return c.failMany(ctx, queue, fails)
}

// failMany is FailMany without its span, its call's error unwrapped.
func (c *Client) failMany(ctx context.Context, queue string, fails []Failed) (res []FailResult, errs []error, err error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, nil, err
	}
	if len(fails) == 0 || len(fails) > MaxBatch {
		return nil, nil, invalid("fails", "a batch holds 1 to %d, got %d", MaxBatch, len(fails))
	}
	res, errs = make([]FailResult, len(fails)), make([]error, len(fails))
	// The failures refused here stay out of the call: sent[k] is the index
	// of the k-th failure sent.
	sent := make([]int, 0, len(fails))
	p := store.FailArgs{DeadMax: c.cfg.DeadMaxJobs, DeadAgeMs: c.cfg.DeadMaxAge.Milliseconds(),
		RetentionMs: max(c.cfg.Retention.Milliseconds(), 0), TombMs: c.tombMs(), Fails: make([]store.FailItem, 0, len(fails))}
	for i, f := range fails {
		p.Answer = p.Answer || f.ReturnJob
		item, err := failItem(f)
		if err != nil {
			errs[i] = err
			continue
		}
		sent = append(sent, i)
		p.Fails = append(p.Fails, item)
	}
	if len(sent) == 0 {
		return res, errs, nil
	}
	reply, err := call(ctx, c, store.Fail, k, &p)
	if err != nil {
		return nil, nil, err
	}
	if err := readFailed(queue, reply.Rows, fails, sent, p.Answer, res, errs); err != nil {
		return nil, nil, err
	}
	return res, errs, nil
}

// failItem checks f and answers it as fail.lua takes it.
func failItem(f Failed) (store.FailItem, error) {
	if err := names.ValidateID(f.ID); err != nil {
		return store.FailItem{}, err
	}
	msg := strings.ToValidUTF8(strings.ReplaceAll(f.Error, "\x00", "\uFFFD"), "\uFFFD")
	if len(msg) > MaxErrorBytes {
		msg = strings.ToValidUTF8(msg[:MaxErrorBytes], "") + "…(truncated)"
	}
	retryAt := "-1"
	switch {
	case !f.RetryAt.IsZero() && f.RetryIn != 0:
		return store.FailItem{}, invalid("retry_in", "give RetryAt or RetryIn, not both")
	case f.RetryIn > MaxDelay:
		return store.FailItem{}, invalid("retry_in", "more than %s ahead", MaxDelay)
	case f.RetryIn != 0:
		retryAt = delayWhen(max(f.RetryIn, 0))
	case !f.RetryAt.IsZero():
		retryAt = scoreOf(f.RetryAt)
	}
	return store.FailItem{ID: f.ID, Token: f.Token, Error: msg, RetryAt: retryAt, Dead: f.Dead, Jitter: rand.Float64()}, nil
}

// readFailed reads fail.lua's reply rows, four a failure sent (their
// indexes into fails), then, when answered, a job each, into res and
// errs.
func readFailed(queue string, rows []any, fails []Failed, sent []int, answered bool, res []FailResult, errs []error) error {
	want := 4 * len(sent)
	if answered {
		want += len(sent)
	}
	if len(rows) != want {
		return &store.ReplyError{Script: "fail", Reply: rows, Want: fmt.Sprintf("%d elements", want)}
	}
	for k, i := range sent {
		id := fails[i].ID
		code, err := store.Int("fail", rows, 4*k, "code")
		if err != nil {
			return err
		}
		if errs[i] = codeErr(code, queue, id); errs[i] != nil {
			continue
		}
		status, err := store.Str("fail", rows, 4*k+1, "status")
		if err != nil {
			return err
		}
		runAt, err := store.Int("fail", rows, 4*k+2, "run_at_ms")
		if err != nil {
			return err
		}
		r := FailResult{Status: Status(status), RunAt: time.UnixMilli(runAt).UTC()}
		if r.Status == StatusScheduled {
			if r.Due, err = nextOfReply(rows[4*k+3]); err != nil {
				errs[i] = fmt.Errorf("queue: fail %s/%s: %w", queue, id, err)
				continue
			}
		}
		res[i] = r
	}
	if !answered {
		return nil
	}
	for k, i := range sent {
		if !fails[i].ReturnJob || errs[i] != nil {
			continue
		}
		s, err := store.Str("fail", rows, 4*len(sent)+k, "job")
		if err != nil {
			return err
		}
		if s == "" {
			continue
		}
		j, err := parsePacked(queue, s)
		if err != nil {
			return err
		}
		j.Token = "" // as Get answers it
		res[i].Job = j
	}
	return nil
}

// Lease is the answer to a heartbeat.
type Lease struct {
	Until time.Time
	// CancelRequested: someone asked for this job to be canceled; the
	// worker should stop and fail it (or complete it) soon.
	CancelRequested bool
}

// HeartbeatOptions are what a heartbeat carries.
type HeartbeatOptions struct {
	// Extend is the lease's new length from now; 0 for the job's
	// visibility.
	Extend time.Duration
	// Progress, when set, is recorded as the job's progress (its
	// UpdatedAt is Redis's time of the heartbeat) and published as a
	// "progress" event.
	Progress *Progress
}

// Heartbeat extends the lease of a claimed job to now + o.Extend (the
// job's visibility when it is 0), and records o.Progress when set; a
// lease is never shortened. It answers ErrLeaseLost when token is not
// the job's current claim.
func (c *Client) Heartbeat(ctx context.Context, queue, id, token string, o HeartbeatOptions) (Lease, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return Lease{}, err
	}
	if err := names.ValidateID(id); err != nil {
		return Lease{}, err
	}
	extend := o.Extend
	if extend != 0 && (extend < MinVisibility || extend > MaxVisibility) {
		return Lease{}, invalid("extend", "must be in [%s, %s], got %s", MinVisibility, MaxVisibility, extend)
	}
	progress, err := encodeProgress(o.Progress)
	if err != nil {
		return Lease{}, err
	}
	res, err := call(ctx, c, store.Heartbeat, k, &store.HeartbeatArgs{ID: id, Token: token, ExtendMs: extend.Milliseconds(), Progress: progress})
	if err != nil {
		return Lease{}, fmt.Errorf("queue: heartbeat %s/%s: %w", queue, id, err)
	}
	if err := codeErr(res.Code, queue, id); err != nil {
		return Lease{}, err
	}
	return Lease{Until: time.UnixMilli(res.LeaseUntilMs).UTC(), CancelRequested: res.CancelRequested == 1}, nil
}

// Release hands a claimed job straight back to the head of pending, as a
// worker does when it shuts down before the job ran. The attempt stays
// counted, but a released job is never sent to the dead set by the release.
func (c *Client) Release(ctx context.Context, queue, id, token string) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	if err := names.ValidateID(id); err != nil {
		return err
	}
	res, err := call(ctx, c, store.Release, k, &store.ReleaseArgs{ID: id, Token: token, RetentionMs: max(c.cfg.Retention.Milliseconds(), 0), TombMs: c.tombMs()})
	if err != nil {
		return fmt.Errorf("queue: release %s/%s: %w", queue, id, err)
	}
	return codeErr(res.Code, queue, id)
}
