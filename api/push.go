package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
)

// PushStore keeps the push configs of queues: the routes
// /v1/queues/{queue}/config, registered only when [Config.Push] is set
// (*dispatch.Store is one). Errors: dispatch.ErrNoConfig for a queue
// without one (404), a *queue.FieldError naming a bad field (400).
type PushStore interface {
	Get(ctx context.Context, queue string) (dispatch.QueueConfig, error)
	Put(ctx context.Context, queue string, c dispatch.QueueConfig) (dispatch.QueueConfig, error)
	Delete(ctx context.Context, queue string) error
	// Guard checks the URLs of jobs that carry their own target or
	// callbacks.
	Guard() dispatch.Guard
}

var _ PushStore = (*dispatch.Store)(nil)

// targetJSON is a push target in the API.
type targetJSON struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Timeout *string           `json:"timeout,omitempty"`
}

// pushConfigRequest is the body of PUT /v1/queues/{queue}/config.
type pushConfigRequest struct {
	Target      *targetJSON `json:"target"`
	Secrets     []string    `json:"secrets"`
	Concurrency *int        `json:"concurrency"`
	Labels      []string    `json:"labels"`
}

// pushConfigJSON is a queue's push config as answered; secrets only on
// the config routes.
type pushConfigJSON struct {
	Target      targetJSON `json:"target"`
	Secrets     []string   `json:"secrets,omitempty"`
	Concurrency int        `json:"concurrency"`
	Labels      []string   `json:"labels"`
}

func (t *targetJSON) target(field string) (dispatch.Target, error) {
	out := dispatch.Target{URL: t.URL, Method: t.Method, Headers: t.Headers}
	if t.Timeout != nil {
		d, err := parseDuration(field+".timeout", *t.Timeout, dispatch.MinTimeout, dispatch.MaxTimeout)
		if err != nil {
			return out, err
		}
		out.Timeout = d
	}
	return out, nil
}

func toPushJSON(c dispatch.QueueConfig, secrets bool) pushConfigJSON {
	to := wire.Duration(c.Target.Timeout)
	out := pushConfigJSON{Target: targetJSON{URL: c.Target.URL, Method: c.Target.Method, Headers: c.Target.Headers, Timeout: &to},
		Concurrency: c.Concurrency, Labels: c.Labels}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	if secrets {
		out.Secrets = c.Secrets
	}
	return out
}

func pushErr(err error) error {
	if errors.Is(err, dispatch.ErrNoConfig) {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error(), err: err}
	}
	return err
}

// getPushConfig: GET /v1/queues/{queue}/config.
func (s *Server) getPushConfig(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	pc, err := s.cfg.Push.Get(c.Request().Context(), q)
	if err != nil {
		return pushErr(err)
	}
	return writeJSON(c, http.StatusOK, toPushJSON(pc, true))
}

// putPushConfig: PUT /v1/queues/{queue}/config; makes the queue a push
// queue (creating it), answers the config with its secrets.
func (s *Server) putPushConfig(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	var req pushConfigRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	var pc dispatch.QueueConfig
	if req.Target != nil {
		if pc.Target, err = req.Target.target("target"); err != nil {
			return err
		}
	}
	pc.Secrets = req.Secrets
	if req.Concurrency != nil {
		if *req.Concurrency == 0 {
			return invalidArg("concurrency", "must be at least 1: leave it out for %d", dispatch.DefaultConcurrency)
		}
		pc.Concurrency = *req.Concurrency
	}
	pc.Labels = req.Labels
	out, err := s.cfg.Push.Put(c.Request().Context(), q, pc)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toPushJSON(out, true))
}

// deletePushConfig: DELETE /v1/queues/{queue}/config; 204.
func (s *Server) deletePushConfig(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	if err := s.cfg.Push.Delete(c.Request().Context(), q); err != nil {
		return pushErr(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// pushOf is a queue's push config for GET /v1/queues/{queue}, without
// its secrets; nil when it has none or no PushStore is configured.
func (s *Server) pushOf(ctx context.Context, q string) (*pushConfigJSON, error) {
	if s.cfg.Push == nil {
		return nil, nil
	}
	pc, err := s.cfg.Push.Get(ctx, q)
	if errors.Is(err, dispatch.ErrNoConfig) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := toPushJSON(pc, false)
	return &out, nil
}

// pushJob wraps nj into a push envelope when the request gave a target or
// callbacks (a 400 without a PushStore: nothing would send them), and
// checks the envelope of a job that names the envelope's kind itself.
func (s *Server) pushJob(nj queue.NewJob, r *enqueueRequest, prefix string) (queue.NewJob, error) {
	options := r.Target != nil || r.CallbackURL != nil || r.FailureCallbackURL != nil
	if nj.Kind == dispatch.EnvelopeKind {
		if options {
			return nj, invalidArg(prefix+"kind", "%s is the kind of the envelope chronoq makes of a job with a target or "+
				"callbacks: give the job its own kind", dispatch.EnvelopeKind)
		}
		return nj, s.checkEnvelope(nj.Payload, prefix)
	}
	if !options {
		return nj, nil
	}
	if s.cfg.Push == nil {
		return nj, invalidArg(prefix+"target", "push dispatch is not configured on this server")
	}
	pj := dispatch.PushJob{Job: nj}
	if r.Target != nil {
		t, err := r.Target.target(prefix + "target")
		if err != nil {
			return nj, err
		}
		pj.Target = &t
	}
	if r.CallbackURL != nil {
		pj.CallbackURL = *r.CallbackURL
	}
	if r.FailureCallbackURL != nil {
		pj.FailureCallbackURL = *r.FailureCallbackURL
	}
	out, err := pj.NewJob(s.cfg.Push.Guard())
	var fe *queue.FieldError
	if errors.As(err, &fe) {
		return nj, invalidArg(prefix+fe.Field, "%v", fe.Err)
	}
	return out, err
}

// pushQueues refuses the push jobs (kind dispatch.EnvelopeKind: a job
// given a target or callbacks, or an envelope made by hand) of a queue
// that is not a push queue: only the dispatchers of a push queue send
// them, so such a job would wait in pending for ever. prefix(i) names
// the i-th job ("jobs[3].", "nodes[0].job."). A queue becomes a push
// queue by its push config (PUT /v1/queues/{queue}/config), which may
// leave the target out when every job brings its own.
func (s *Server) pushQueues(ctx context.Context, njs []queue.NewJob, prefix func(i int) string) error {
	checked := map[string]bool{}
	for i, nj := range njs {
		if nj.Kind != dispatch.EnvelopeKind || s.cfg.Push == nil {
			continue
		}
		q := cmp.Or(nj.Queue, queue.DefaultQueue)
		if checked[q] {
			continue
		}
		_, err := s.cfg.Push.Get(ctx, q)
		if errors.Is(err, dispatch.ErrNoConfig) {
			return invalidArg(prefix(i)+"queue", "queue %q is not a push queue, so nothing would ever send this job "+
				"(it has a target or callbacks): configure the queue for push first (PUT /v1/queues/%s/config; "+
				"its target may be left out when each job brings its own)", q, q)
		}
		if err != nil {
			return err
		}
		checked[q] = true
	}
	return nil
}

// checkEnvelope checks the payload of a job (or cron entry) of kind
// dispatch.EnvelopeKind made by hand, exactly as the options it would be
// made of are checked (see dispatch.CheckEnvelope); prefix names the job
// ("jobs[3].").
func (s *Server) checkEnvelope(payload json.RawMessage, prefix string) error {
	if s.cfg.Push == nil {
		return invalidArg(prefix+"kind", "%s is the kind of push jobs, and push dispatch is not configured on this server",
			dispatch.EnvelopeKind)
	}
	if len(payload) == 0 || string(payload) == "null" {
		payload = json.RawMessage("{}") // the default payload
	}
	err := dispatch.CheckEnvelope(s.cfg.Push.Guard(), payload)
	var fe *queue.FieldError
	if errors.As(err, &fe) {
		return invalidArg(prefix+fe.Field, "%v", fe.Err)
	}
	return err
}

// deliveryJSON is one attempt of a push job.
type deliveryJSON struct {
	Attempt    int     `json:"attempt"`
	Fence      int64   `json:"fence"`
	At         string  `json:"at"`
	URL        string  `json:"url"`
	Status     int     `json:"status"`
	DurationMs float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
	Outcome    string  `json:"outcome"`
}

// deliveries reads the attempts the dispatcher noted on a job, oldest
// first.
func (s *Server) deliveries(ctx context.Context, q, id string) ([]deliveryJSON, error) {
	notes, err := s.engine.Notes(ctx, q, id)
	if err != nil {
		return nil, err
	}
	out := make([]deliveryJSON, 0, len(notes))
	for _, line := range notes {
		var a dispatch.Attempt
		if json.Unmarshal([]byte(line), &a) != nil {
			continue
		}
		out = append(out, deliveryJSON{Attempt: a.Attempt, Fence: a.Fence, At: a.At.UTC().Format(time.RFC3339Nano),
			URL: a.URL, Status: a.Status, DurationMs: a.Duration, Error: a.Error, Outcome: a.Outcome})
	}
	return slices.Clip(out), nil
}
