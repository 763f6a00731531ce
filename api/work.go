package api

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/chronoq/chronoq/internal/names"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

type claimRequest struct {
	Wait       *string `json:"wait"`
	Max        *int    `json:"max"`
	Visibility *string `json:"visibility"`
	WorkerID   *string `json:"worker_id"`
	// Labels are the claimer's (see queue.ClaimOptions.Labels).
	Labels []string `json:"labels"`
}

// claim: POST /v1/queues/{queue}/claim. It long-polls up to wait (30 s at
// most) and answers {"jobs":[...]}, each job with its claim token; an
// empty list when nothing came (or the server is shutting down).
func (s *Server) claim(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	var req claimRequest
	if err := s.decode(c, &req, true); err != nil {
		return err
	}
	o, err := req.options()
	if err != nil {
		return err
	}
	wid, err := s.workerID(req.WorkerID)
	if err != nil {
		return err
	}
	// Registered first: a worker the registry refuses claims nothing.
	if err := s.sighted(c.Request().Context(), wid, registry.Touch{Queue: q, Labels: o.Labels}); err != nil {
		return err
	}
	ctx, cancel := s.streamContext(c)
	defer cancel()
	jobs, err := s.claimJobs(ctx, q, o)
	if err != nil && ctx.Err() != nil && c.Request().Context().Err() == nil {
		jobs, err = nil, nil // drained: the server is shutting down
	}
	if err != nil {
		return err
	}
	s.claimed(c.Request().Context(), q, wid, jobs)
	return writeJobs(c, http.StatusOK, jobs, true)
}

// options reads the claim's options: the claimer's labels, how long to
// wait, how many jobs at most, their visibility.
func (req *claimRequest) options() (queue.ClaimOptions, error) {
	labels, err := names.CanonicalLabels(req.Labels, queue.MaxClaimLabels)
	if err != nil {
		// Checked before the registry records the worker with them.
		return queue.ClaimOptions{}, &queue.FieldError{Index: -1, Field: "labels", Err: err}
	}
	o := queue.ClaimOptions{Labels: labels}
	if req.Wait != nil {
		if o.Wait, err = parseDuration("wait", *req.Wait, 0, queue.MaxClaimWait); err != nil {
			return o, err
		}
	}
	if req.Max != nil {
		if *req.Max < 1 || *req.Max > queue.MaxBatch {
			return o, invalidArg("max", "must be in [1, %d], got %d", queue.MaxBatch, *req.Max)
		}
		o.Max = *req.Max
	}
	if req.Visibility != nil {
		if o.Visibility, err = parseDuration("visibility", *req.Visibility, queue.MinVisibility, queue.MaxVisibility); err != nil {
			return o, err
		}
	}
	return o, nil
}

// claimed records jobs claimed from q: their lateness, and in the
// registry the jobs worker wid now holds.
func (s *Server) claimed(ctx context.Context, q, wid string, jobs []*queue.Job) {
	held := make([]registry.JobRef, 0, len(jobs))
	for _, j := range jobs {
		if !j.ClaimedAt.IsZero() && !j.RunAt.IsZero() {
			s.metrics.lateness.WithLabelValues(q).Observe(max(j.ClaimedAt.Sub(j.RunAt).Seconds(), 0))
		}
		held = append(held, registry.JobRef{Queue: q, ID: j.ID})
	}
	s.holds(ctx, wid, held, true)
}

type completeRequest struct {
	Token     string                     `json:"token"`
	Result    json.RawMessage            `json:"result"`
	Artifacts map[string]json.RawMessage `json:"artifacts"`
	WorkerID  *string                    `json:"worker_id"`
}

// afterJob answers the job as it is now, or 204 when it is gone already
// (a server that deletes finished jobs at once).
func (s *Server) afterJob(c echo.Context, q, id string) (*queue.Job, error) {
	j, err := s.read.Get(c.Request().Context(), q, id)
	if errors.Is(err, queue.ErrNotFound) {
		return nil, c.NoContent(http.StatusNoContent)
	}
	if err != nil {
		return nil, err
	}
	return j, writeJob(c, http.StatusOK, j)
}

// complete: POST /v1/queues/{queue}/jobs/{id}/complete
// {"token","result"?,"artifacts"?}: artifacts are set with the completion
// (see putArtifact); over a cap, 413 and the job stays processing.
func (s *Server) complete(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	var req completeRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	if req.Token == "" {
		return invalidArg("token", "token is required: the claim's token")
	}
	if string(req.Result) == "null" {
		req.Result = nil
	}
	wid, err := s.workerID(req.WorkerID)
	if err != nil {
		return err
	}
	// The job as the completion left it comes back with it, from the same
	// script call (see completer): no read after.
	j, err := s.completeJob(c.Request().Context(), q, queue.Ack{ID: id, Token: req.Token, Result: req.Result, Artifacts: req.Artifacts})
	s.released(c.Request().Context(), wid, q, id, err)
	if err != nil {
		return err
	}
	if j == nil {
		return c.NoContent(http.StatusNoContent) // not kept (a server that deletes finished jobs at once)
	}
	if !j.CompletedAt.IsZero() && !j.ClaimedAt.IsZero() {
		s.metrics.processing.WithLabelValues(q).Observe(max(j.CompletedAt.Sub(j.ClaimedAt).Seconds(), 0))
	}
	return writeJob(c, http.StatusOK, j)
}

type failRequest struct {
	Token      string  `json:"token"`
	Error      string  `json:"error"`
	RetryAfter *string `json:"retry_after"`
	Dead       bool    `json:"dead"`
	WorkerID   *string `json:"worker_id"`
}

// fail: POST /v1/queues/{queue}/jobs/{id}/fail
// {"token","error","retry_after"?,"dead"?}: answers the job, scheduled for
// its retry or dead.
func (s *Server) fail(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	var req failRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	if req.Token == "" {
		return invalidArg("token", "token is required: the claim's token")
	}
	o := queue.FailOptions{Error: req.Error, Dead: req.Dead}
	if req.RetryAfter != nil {
		if req.Dead {
			return invalidArg("retry_after", "give retry_after or dead, not both")
		}
		d, err := parseDuration("retry_after", *req.RetryAfter, 0, queue.MaxDelay)
		if err != nil {
			return err
		}
		// after Redis records the failure, by Redis's clock (a delay added
		// to this host's now would move by the host clock's error)
		if o.RetryIn = d; d == 0 {
			o.RetryIn = -1 // at once
		}
	}
	wid, err := s.workerID(req.WorkerID)
	if err != nil {
		return err
	}
	// The job as the failure left it comes back with it, from the same
	// script call (see failer): no read after.
	res, err := s.failJob(c.Request().Context(), q, queue.Failed{ID: id, Token: req.Token, FailOptions: o})
	s.released(c.Request().Context(), wid, q, id, err)
	if err != nil {
		return err
	}
	if res.Job == nil {
		return c.NoContent(http.StatusNoContent) // not kept (a canceled job on a server that deletes finished jobs at once)
	}
	return writeJob(c, http.StatusOK, res.Job)
}

type heartbeatRequest struct {
	Token    string        `json:"token"`
	Extend   *string       `json:"extend"`
	Progress *progressJSON `json:"progress"`
	WorkerID *string       `json:"worker_id"`
}

// progressJSON is a job's progress: in a heartbeat, percent and message;
// in the Job resource and the stream, with updated_at too.
type progressJSON struct {
	Percent   *float64 `json:"percent"`
	Message   string   `json:"message"`
	UpdatedAt *string  `json:"updated_at,omitempty"`
}

type leaseJSON struct {
	LeaseUntil      *string `json:"lease_until"`
	CancelRequested bool    `json:"cancel_requested"`
}

// heartbeat: POST /v1/queues/{queue}/jobs/{id}/heartbeat
// {"token","extend"?,"progress"?}: {"lease_until","cancel_requested"}.
// progress {"percent","message"?} is recorded as the job's progress.
func (s *Server) heartbeat(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	var req heartbeatRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	if req.Token == "" {
		return invalidArg("token", "token is required: the claim's token")
	}
	var ext time.Duration // 0: the job's visibility
	if req.Extend != nil {
		if ext, err = parseDuration("extend", *req.Extend, queue.MinVisibility, queue.MaxVisibility); err != nil {
			return err
		}
	}
	wid, err := s.workerID(req.WorkerID)
	if err != nil {
		return err
	}
	var l queue.Lease
	if req.Progress != nil {
		if req.Progress.Percent == nil {
			return invalidArg("progress.percent", "percent is required: 0 to 100")
		}
		if p := *req.Progress.Percent; !(p >= 0 && p <= 100) {
			return invalidArg("progress.percent", "must be in [0, 100], got %v", p)
		}
		if len(req.Progress.Message) > queue.MaxProgressMessageBytes {
			return invalidArg("progress.message", "at most %d bytes, got %d", queue.MaxProgressMessageBytes, len(req.Progress.Message))
		}
		l, err = s.consume.Heartbeat(c.Request().Context(), q, id, req.Token, queue.HeartbeatOptions{Extend: ext,
			Progress: &queue.Progress{Percent: *req.Progress.Percent, Message: req.Progress.Message}})
	} else {
		l, err = s.consume.Heartbeat(c.Request().Context(), q, id, req.Token, queue.HeartbeatOptions{Extend: ext})
	}
	if err != nil {
		s.released(c.Request().Context(), wid, q, id, err)
		return err
	}
	s.holds(c.Request().Context(), wid, []registry.JobRef{{Queue: q, ID: id}}, true)
	return writeJSON(c, http.StatusOK, leaseJSON{LeaseUntil: wire.Time(l.Until), CancelRequested: l.CancelRequested})
}

type tokenRequest struct {
	Token    string  `json:"token"`
	WorkerID *string `json:"worker_id"`
}

// cancelClaimed: POST /v1/queues/{queue}/jobs/{id}/cancel {"token"}: the
// worker of a job whose cancellation was requested (its heartbeat said
// cancel_requested) ends it as canceled. Answers the job.
func (s *Server) cancelClaimed(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	var req tokenRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	if req.Token == "" {
		return invalidArg("token", "token is required: the claim's token")
	}
	wid, err := s.workerID(req.WorkerID)
	if err != nil {
		return err
	}
	err = s.consume.CancelClaimed(c.Request().Context(), q, id, req.Token)
	s.released(c.Request().Context(), wid, q, id, err)
	if err != nil {
		return err
	}
	_, err = s.afterJob(c, q, id)
	return err
}
