package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
)

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// enqueueRequest is the body of POST /v1/jobs and one job of a batch.
// Durations and times are strings, parsed after decoding so that a bad one
// is named by its field.
type enqueueRequest struct {
	Queue          *string         `json:"queue"` // nil (left out, or null): "default"; "" is a 400`
	Kind           string          `json:"kind"`
	Payload        json.RawMessage `json:"payload"`
	RunAt          *string         `json:"run_at"`
	Delay          *string         `json:"delay"`
	MaxAttempts    *int            `json:"max_attempts"`
	Backoff        json.RawMessage `json:"backoff"` // a backoffRequest, decoded apart to name its fields
	Visibility     *string         `json:"visibility"`
	IdempotencyKey *string         `json:"idempotency_key"`
	ResultTTL      *string         `json:"result_ttl"`
	// Push options (package dispatch): the job's own target, callbacks.
	Target             *targetJSON `json:"target"`
	CallbackURL        *string     `json:"callback_url"`
	FailureCallbackURL *string     `json:"failure_callback_url"`
	// Labels a claimer must have to receive the job (see queue.NewJob.Labels).
	Labels []string `json:"labels"`
	// Workflows (package workflow): a single job that runs once these
	// jobs have ended (POST /v1/jobs only), and what their failure does.
	DependsOn []jobRefJSON `json:"depends_on"`
	OnFailure *string      `json:"on_failure"`
	// Flow control (see queue.NewJob.FlowKey): the job's flow key, and a
	// debounce (a debounceRequest, decoded apart to name its fields).
	FlowKey  *string         `json:"flow_key"`
	Debounce json.RawMessage `json:"debounce"`
}

// debounceRequest is a job's debounce (queue.Debounce): period is
// required, max_wait left out is 10 × period.
type debounceRequest struct {
	Period  *string `json:"period"`
	MaxWait *string `json:"max_wait"`
}

// jobRefJSON names a job.
type jobRefJSON struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
}

// backoffRequest is a retry policy; a field left out takes the value of
// queue.DefaultBackoff.
type backoffRequest struct {
	Initial *string  `json:"initial"`
	Factor  *float64 `json:"factor"`
	Max     *string  `json:"max"`
	Jitter  *float64 `json:"jitter"`
}

// newJob checks the fields only the API sees (formats, explicit zeros) and
// leaves the rest to queue's validation. index is the job's place in a
// batch, -1 for a single job.
func (r *enqueueRequest) newJob(index int) (queue.NewJob, error) {
	nj := queue.NewJob{Kind: r.Kind, Payload: r.Payload, Labels: r.Labels}
	if r.Queue != nil {
		if *r.Queue == "" {
			// Given, but empty: a mistake, not a wish for the default.
			return nj, invalidArg(fieldPrefix(index)+"queue", "must not be empty: leave queue out for %q", queue.DefaultQueue)
		}
		nj.Queue = *r.Queue
	}
	if r.RunAt == nil && r.Delay == nil && r.MaxAttempts == nil && r.Visibility == nil && r.ResultTTL == nil &&
		r.IdempotencyKey == nil && len(r.Backoff) == 0 && r.FlowKey == nil && len(r.Debounce) == 0 &&
		nj.Kind != "" && string(nj.Payload) != "null" {
		return nj, nil // the common case: nothing to check here
	}
	prefix := fieldPrefix(index)
	if string(nj.Payload) == "null" {
		nj.Payload = nil // the default, {}
	}
	if nj.Kind == "" {
		return nj, invalidArg(prefix+"kind", "kind is required")
	}
	if err := r.when(&nj, prefix); err != nil {
		return nj, err
	}
	if err := r.limits(&nj, prefix); err != nil {
		return nj, err
	}
	if r.IdempotencyKey != nil {
		nj.IdempotencyKey = *r.IdempotencyKey
	}
	if err := r.retries(&nj, prefix); err != nil {
		return nj, err
	}
	if err := r.flow(&nj, prefix); err != nil {
		return nj, err
	}
	return nj, nil
}

// flow reads the job's flow key and debounce; queue's validation checks
// the key, and the debounce against it and the job's due time.
func (r *enqueueRequest) flow(nj *queue.NewJob, prefix string) error {
	if r.FlowKey != nil {
		if *r.FlowKey == "" {
			return invalidArg(prefix+"flow_key", "must not be empty: leave flow_key out for none")
		}
		nj.FlowKey = *r.FlowKey
	}
	if len(r.Debounce) == 0 || string(r.Debounce) == "null" {
		return nil
	}
	var dr debounceRequest
	if err := wire.Raw(r.Debounce, &dr, prefix+"debounce."); err != nil {
		return err
	}
	if dr.Period == nil {
		return invalidArg(prefix+"debounce.period", "period is required")
	}
	var d queue.Debounce
	var err error
	if d.Period, err = parseDuration(prefix+"debounce.period", *dr.Period, queue.MinDebounce, queue.MaxDelay); err != nil {
		return err
	}
	if dr.MaxWait != nil {
		if d.MaxWait, err = parseDuration(prefix+"debounce.max_wait", *dr.MaxWait, 0, queue.MaxDelay); err != nil {
			return err
		}
	}
	nj.Debounce = &d
	return nil
}

// when reads when the job runs: run_at (a time in the past, the zero time
// too, means now) or delay, not both.
func (r *enqueueRequest) when(nj *queue.NewJob, prefix string) error {
	if r.RunAt != nil && r.Delay != nil {
		return invalidArg(prefix+"delay", "give run_at or delay, not both")
	}
	var err error
	if r.RunAt != nil {
		if nj.RunAt, err = parseTime(prefix+"run_at", *r.RunAt); err != nil {
			return err
		}
	}
	if r.Delay != nil {
		if nj.Delay, err = parseDuration(prefix+"delay", *r.Delay, 0, queue.MaxDelay); err != nil {
			return err
		}
	}
	return nil
}

// limits reads the job's bounds: max_attempts, visibility, result_ttl.
func (r *enqueueRequest) limits(nj *queue.NewJob, prefix string) error {
	if r.MaxAttempts != nil {
		if *r.MaxAttempts < 1 || *r.MaxAttempts > queue.MaxAttemptsLimit {
			return invalidArg(prefix+"max_attempts", "must be in [1, %d], got %d", queue.MaxAttemptsLimit, *r.MaxAttempts)
		}
		nj.MaxAttempts = *r.MaxAttempts
	}
	var err error
	if r.Visibility != nil {
		if nj.Visibility, err = parseDuration(prefix+"visibility", *r.Visibility, queue.MinVisibility, queue.MaxVisibility); err != nil {
			return err
		}
	}
	if r.ResultTTL != nil {
		if nj.ResultTTL, err = parseDuration(prefix+"result_ttl", *r.ResultTTL, 0, queue.MaxResultTTL); err != nil {
			return err
		}
	}
	return nil
}

// retries reads the job's backoff, a retry policy whose fields are named
// under "backoff.".
func (r *enqueueRequest) retries(nj *queue.NewJob, prefix string) error {
	if len(r.Backoff) == 0 || string(r.Backoff) == "null" {
		return nil
	}
	var br backoffRequest
	if err := wire.Raw(r.Backoff, &br, prefix+"backoff."); err != nil {
		return err
	}
	b, err := br.backoff(prefix + "backoff.")
	if err != nil {
		return err
	}
	nj.Backoff = &b
	return nil
}

// fieldPrefix names the fields of the job at index of a batch
// ("jobs[3]."), or of a single job (index -1: none).
func fieldPrefix(index int) string {
	if index < 0 {
		return ""
	}
	return fmt.Sprintf("jobs[%d].", index)
}

func (r *backoffRequest) backoff(prefix string) (queue.Backoff, error) {
	b := queue.DefaultBackoff
	var err error
	if r.Initial != nil {
		if b.Initial, err = parseDuration(prefix+"initial", *r.Initial, time.Millisecond, queue.MaxBackoffDelay); err != nil {
			return b, err
		}
	}
	if r.Max != nil {
		if b.Max, err = parseDuration(prefix+"max", *r.Max, time.Millisecond, queue.MaxBackoffDelay); err != nil {
			return b, err
		}
	}
	if r.Factor != nil {
		b.Factor = *r.Factor
	}
	if r.Jitter != nil {
		b.Jitter = *r.Jitter
	}
	if err := b.Validate(); err != nil {
		// "invalid backoff: factor must be in ...": name the field.
		msg := strings.TrimPrefix(err.Error(), queue.ErrInvalidBackoff.Error()+": ")
		field, _, _ := strings.Cut(msg, " ")
		return b, invalidArg(prefix+field, "%s", msg)
	}
	return b, nil
}

// queueJSON is a queue's depths and totals.
type queueJSON struct {
	Name               string  `json:"name"`
	Paused             bool    `json:"paused"`
	Scheduled          int64   `json:"scheduled"`
	Pending            int64   `json:"pending"`
	Processing         int64   `json:"processing"`
	Dead               int64   `json:"dead"`
	CompletedTotal     int64   `json:"completed_total"`
	FailedTotal        int64   `json:"failed_total"`
	RetriedTotal       int64   `json:"retried_total"`
	ReclaimedTotal     int64   `json:"reclaimed_total"`
	EnqueuedTotal      int64   `json:"enqueued_total"`
	PromotedTotal      int64   `json:"promoted_total"`
	DeadTotal          int64   `json:"dead_total"`
	OldestPendingAgeMs int64   `json:"oldest_pending_age_ms"`
	NextRunAt          *string `json:"next_run_at"`
	// Push is the queue's push config (without its secrets), when it has one.
	Push *pushConfigJSON `json:"push,omitempty"`
	// Limits are the queue's rate and in-flight limits, when it has any.
	Limits *limitsJSON `json:"limits,omitempty"`
}

func toQueueJSON(s queue.Stats) queueJSON {
	return queueJSON{Name: s.Queue, Paused: s.Paused, Scheduled: s.Scheduled, Pending: s.Pending,
		Processing: s.Processing, Dead: s.Dead, CompletedTotal: s.CompletedTotal, FailedTotal: s.FailedTotal,
		RetriedTotal: s.RetriedTotal, ReclaimedTotal: s.ReclaimedTotal, EnqueuedTotal: s.EnqueuedTotal,
		PromotedTotal: s.PromotedTotal, DeadTotal: s.DeadTotal,
		OldestPendingAgeMs: s.OldestPendingAge.Milliseconds(), NextRunAt: wire.Time(s.NextRunAt)}
}
