package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"io"
	"time"

	"github.com/chronoq/chronoq/internal/store"
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
const EnvelopeKind = store.EnvelopeKind

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

// CheckEnvelope checks the payload of a job of kind EnvelopeKind made
// without PushJob.NewJob (by hand, or read back from another job) exactly
// as NewJob checks the options it makes one of: the envelope's fields and
// nothing else, a body, a valid kind, the target as Target.Validate
// checks it (g checks its URL, the method is one of Target's, no header
// chronoq sets, a timeout in [MinTimeout, MaxTimeout]), and the callback
// URLs as g checks them. Errors are *queue.FieldError naming the field
// under "payload" ("payload.target.method"). The dispatcher checks every
// envelope again before its request, so a job that skipped this check
// (enqueued by a Go caller through queue.Client, or stored before it) is
// sent only if it passes, and is dead at once otherwise.
func CheckEnvelope(g Guard, payload json.RawMessage) error {
	_, _, err := checkEnvelope(g, payload)
	return err
}

// checkEnvelope reads and checks an envelope, answering it and its target
// as validated (nil when it has none).
func checkEnvelope(g Guard, payload []byte) (Envelope, *Target, error) {
	var env Envelope
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return env, nil, invalid("payload", "a %s job's payload is a push envelope, an object of body, kind, target, "+
			"callback_url and failure_callback_url (give your own kind, and target or callback_url beside it, to have "+
			"chronoq make one): %v", EnvelopeKind, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return env, nil, invalid("payload", "data after the envelope")
	}
	if len(env.Body) == 0 {
		return env, nil, invalid("payload.body", "the request body is required")
	}
	if env.Kind != "" {
		if err := names.ValidateKind(env.Kind); err != nil {
			return env, nil, invalid("payload.kind", "%v", err)
		}
	}
	var target *Target
	if env.Target != nil {
		// timeout_ms is checked before it becomes a Duration, which a
		// large one would overflow into range.
		if ms := env.Target.TimeoutMs; ms != 0 && (ms < MinTimeout.Milliseconds() || ms > MaxTimeout.Milliseconds()) {
			return env, nil, invalid("payload.target.timeout_ms", "must be in [%d, %d] (milliseconds), got %d",
				MinTimeout.Milliseconds(), MaxTimeout.Milliseconds(), ms)
		}
		t := Target{URL: env.Target.URL, Method: env.Target.Method, Headers: env.Target.Headers,
			Timeout: time.Duration(env.Target.TimeoutMs) * time.Millisecond}
		if err := t.Validate(g, "payload.target"); err != nil {
			return env, nil, err
		}
		target = &t
	}
	for _, cb := range []struct{ field, url string }{
		{"payload.callback_url", env.CallbackURL}, {"payload.failure_callback_url", env.FailureCallbackURL}} {
		if cb.url == "" {
			continue
		}
		if err := g.CheckURL(cb.url); err != nil {
			return env, nil, invalid(cb.field, "%v", err)
		}
	}
	if env.CallbackOf != "" {
		if err := names.ValidateID(env.CallbackOf); err != nil {
			return env, nil, invalid("payload.callback_of", "%v", err)
		}
	}
	return env, target, nil
}

// Open answers the envelope of an EnvelopeKind job, ok false for any other
// job (or a malformed envelope). It does not check the envelope: see
// CheckEnvelope.
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
