package cron

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"github.com/chronoq/chronoq/internal/names"
	"time"

	"github.com/chronoq/chronoq/queue"
)

// Missed is what happens to the ticks of an entry that passed while no
// instance ran (or while every instance was cut off from Redis for longer
// than the scheduler's Grace).
type Missed string

// The missed-run policies.
const (
	// MissedSkip enqueues nothing for missed ticks. The default.
	MissedSkip Missed = "skip"
	// MissedOnce enqueues one catch-up job for all the missed ticks, under
	// the idempotency key of the latest of them.
	MissedOnce Missed = "once"
)

// Overlap is whether a tick runs while the entry's previous run has not
// finished.
type Overlap string

// The overlap policies.
const (
	// OverlapAllow enqueues every tick. The default.
	OverlapAllow Overlap = "allow"
	// OverlapSkip leaves out a tick while the entry's last job is still
	// scheduled, pending or processing.
	OverlapSkip Overlap = "skip"
)

// Entry is a recurring job: each tick of Schedule enqueues one job of Kind
// with Payload into Queue.
type Entry struct {
	// Name identifies the entry: 1 to 64 of [a-z0-9._-], starting with a
	// letter or digit (the queue-name pattern). Required.
	Name string `json:"name"`
	// Schedule is the spec: 5 fields, 6 fields with leading seconds, a
	// descriptor such as @hourly, or "@every <duration>" (see [Parse]).
	// Required.
	Schedule string `json:"schedule"`
	// Timezone is the IANA zone the spec is read in. Defaults to "UTC".
	Timezone string `json:"timezone,omitempty"`
	// Queue is where the jobs go. Defaults to "default".
	Queue string `json:"queue,omitempty"`
	// Kind is the jobs' kind (their handler). Required.
	Kind string `json:"kind"`
	// Payload is the jobs' payload, any JSON value, at most the queue
	// client's Config.MaxPayloadBytes once compacted (Put refuses a
	// larger one with queue.ErrPayloadTooLarge). Defaults to {}.
	Payload json.RawMessage `json:"payload,omitempty"`
	// MaxAttempts is the jobs' attempts, 1 to 1000. Defaults to the queue
	// client's default.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Missed is the missed-run policy. Defaults to "skip".
	Missed Missed `json:"missed,omitempty"`
	// Overlap is the overlap policy. Defaults to "allow".
	Overlap Overlap `json:"overlap,omitempty"`
	// FlowKey puts the entry's jobs under their queue's flow control
	// (queue.NewJob.FlowKey): 1 to queue.MaxFlowKeyBytes of
	// [A-Za-z0-9._:/=+@-]; "" none. A cron job takes no debounce: its
	// ticks are spaced by its schedule.
	FlowKey string `json:"flow_key,omitempty"`
	// Paused stops the ticks; the entry is kept. Ticks that pass while an
	// entry is paused are never run, whatever its Missed policy.
	Paused bool `json:"paused"`

	// Read-only, filled by [Store.Get] and [Store.List]; ignored by Put.

	// LastRunAt is when the entry's last job was enqueued.
	LastRunAt time.Time `json:"last_run_at,omitzero"`
	// LastJobID is the id of that job.
	LastJobID string `json:"last_job_id,omitempty"`
	// NextRunAt is the next tick; zero when the entry is paused or never
	// fires again.
	NextRunAt time.Time `json:"next_run_at,omitzero"`
}

// stored is an entry as kept in the entries hash.
type stored struct {
	Entry
	// UpdatedAtMs is when the entry's settings last changed. Ticks at or
	// before it are not the entry's to run.
	UpdatedAtMs int64 `json:"updated_at_ms"`
}

// normalize checks e, fills its defaults and clears its read-only fields.
// Errors are *FieldError.
func normalize(e Entry) (Entry, *Schedule, error) {
	if err := validateName(e.Name); err != nil {
		return Entry{}, nil, err
	}
	e.Timezone = cmp.Or(e.Timezone, DefaultTimezone)
	sched, err := Parse(e.Schedule, e.Timezone)
	if err != nil {
		return Entry{}, nil, err
	}
	e.Queue = cmp.Or(e.Queue, queue.DefaultQueue)
	if err := names.ValidateQueue(e.Queue); err != nil {
		return Entry{}, nil, &FieldError{Index: -1, Field: "queue", Err: err}
	}
	if err := names.ValidateKind(e.Kind); err != nil {
		return Entry{}, nil, &FieldError{Index: -1, Field: "kind", Err: err}
	}
	if len(e.Payload) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, e.Payload); err != nil {
			return Entry{}, nil, invalid("payload", "not valid JSON")
		}
		e.Payload = buf.Bytes()
	} else {
		e.Payload = nil
	}
	if e.MaxAttempts < 0 || e.MaxAttempts > queue.MaxAttemptsLimit {
		return Entry{}, nil, invalid("max_attempts", "must be in [1, %d] (0: the queue's default), got %d", queue.MaxAttemptsLimit, e.MaxAttempts)
	}
	if e.FlowKey != "" {
		if err := queue.ValidateFlowKey(e.FlowKey); err != nil {
			var fe *queue.FieldError
			if errors.As(err, &fe) {
				return Entry{}, nil, &FieldError{Index: -1, Field: "flow_key", Err: fe.Err}
			}
			return Entry{}, nil, err
		}
	}
	e.Missed = cmp.Or(e.Missed, MissedSkip)
	if e.Missed != MissedSkip && e.Missed != MissedOnce {
		return Entry{}, nil, invalid("missed", `%q: want "skip" or "once"`, e.Missed)
	}
	e.Overlap = cmp.Or(e.Overlap, OverlapAllow)
	if e.Overlap != OverlapAllow && e.Overlap != OverlapSkip {
		return Entry{}, nil, invalid("overlap", `%q: want "allow" or "skip"`, e.Overlap)
	}
	e.LastRunAt, e.LastJobID, e.NextRunAt = time.Time{}, "", time.Time{}
	return e, sched, nil
}

func validateName(name string) error {
	if names.ValidateQueue(name) != nil {
		return invalid("name", "%q: want ^[a-z0-9][a-z0-9._-]{0,63}$", name)
	}
	return nil
}
