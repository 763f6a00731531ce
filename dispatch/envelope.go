package dispatch

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/queue"
)

// A job with options of its own (a target, callbacks) travels as an
// envelope: kind EnvelopeKind and a payload of
//
//	{"body": <the request body>, "kind": "<the job's kind>", "target": {...},
//	 "callback_url": "...", "failure_callback_url": "...", "callback_of": "<job id>"}
//
// so that its options are part of the job: written with it in the one
// enqueue script, handed to the dispatcher by the same claim that hands it
// the job, and deleted with it, with no change to the job's record or to
// the queue's scripts. Any other job of a push queue is sent as it is,
// its payload the body, to the queue's target.

// EnvelopeKind is the kind of a job whose payload is an Envelope.
const EnvelopeKind = "chronoq.push"

// Envelope is the payload of an EnvelopeKind job.
type Envelope struct {
	Body               json.RawMessage `json:"body"`
	Kind               string          `json:"kind,omitempty"`
	Target             *storedTarget   `json:"target,omitempty"`
	CallbackURL        string          `json:"callback_url,omitempty"`
	FailureCallbackURL string          `json:"failure_callback_url,omitempty"`
	// CallbackOf is the job this one reports on: a callback gets no
	// callbacks of its own.
	CallbackOf string `json:"callback_of,omitempty"`
}

// storedTarget is a Target in an envelope.
type storedTarget struct {
	URL       string            `json:"url"`
	Method    string            `json:"method,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	TimeoutMs int64             `json:"timeout_ms,omitempty"`
}

func (t *storedTarget) target() Target {
	out := Target{URL: t.URL, Method: t.Method, Headers: t.Headers, Timeout: time.Duration(t.TimeoutMs) * time.Millisecond}
	if out.Method == "" {
		out.Method = "POST"
	}
	if out.Timeout == 0 {
		out.Timeout = DefaultTimeout
	}
	return out
}

// PushJob is a job for a push queue with options of its own.
type PushJob struct {
	// Job is the job: its Payload is the request body, its Kind is sent
	// as the chronoq-kind header.
	Job queue.NewJob
	// Target overrides the queue's target for this job.
	Target *Target
	// CallbackURL is POSTed a signed summary when the job completes;
	// FailureCallbackURL when it dies. Each callback is a job of the same
	// queue, retried with its backoff and under the same guard.
	CallbackURL, FailureCallbackURL string
}

// NewJob checks p with g and answers the job to enqueue: p.Job itself when
// it has no options, else an envelope. Errors name the field (target.url,
// callback_url...), as a *queue.FieldError.
func (p PushJob) NewJob(g Guard) (queue.NewJob, error) {
	nj := p.Job
	if p.Target == nil && p.CallbackURL == "" && p.FailureCallbackURL == "" {
		return nj, nil
	}
	env := Envelope{Body: nj.Payload, Kind: nj.Kind, CallbackURL: p.CallbackURL, FailureCallbackURL: p.FailureCallbackURL}
	if len(env.Body) == 0 {
		env.Body = json.RawMessage("{}")
	}
	if !json.Valid(env.Body) {
		return nj, invalid("payload", "not valid JSON")
	}
	if p.Target != nil {
		t := *p.Target
		if err := t.Validate(g, "target"); err != nil {
			return nj, err
		}
		env.Target = &storedTarget{URL: t.URL, Method: t.Method, Headers: t.Headers, TimeoutMs: t.Timeout.Milliseconds()}
	}
	for field, u := range map[string]string{"callback_url": p.CallbackURL, "failure_callback_url": p.FailureCallbackURL} {
		if u == "" {
			continue
		}
		if err := g.CheckURL(u); err != nil {
			return nj, invalid(field, "%v", err)
		}
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nj, fmt.Errorf("dispatch: envelope: %w", err)
	}
	nj.Payload, nj.Kind = b, EnvelopeKind
	return nj, nil
}

// Open answers the envelope of an EnvelopeKind job, ok false for any other
// job (or a malformed envelope).
func Open(j *queue.Job) (Envelope, bool) {
	if j.Kind != EnvelopeKind {
		return Envelope{}, false
	}
	var env Envelope
	if err := json.Unmarshal(j.Payload, &env); err != nil || len(env.Body) == 0 {
		return Envelope{}, false
	}
	return env, true
}

// TargetOf answers an envelope's own target, nil when it has none.
func (e Envelope) TargetOf() *Target {
	if e.Target == nil {
		return nil
	}
	t := e.Target.target()
	return &t
}
