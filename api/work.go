package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/queue"
)

type claimRequest struct {
	Wait       *string `json:"wait"`
	Max        *int    `json:"max"`
	Visibility *string `json:"visibility"`
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
	o := queue.ClaimOptions{Labels: req.Labels}
	if req.Wait != nil {
		if o.Wait, err = parseDuration("wait", *req.Wait, 0, queue.MaxClaimWait); err != nil {
			return err
		}
	}
	if req.Max != nil {
		if *req.Max < 1 || *req.Max > queue.MaxBatch {
			return invalidArg("max", "must be in [1, %d], got %d", queue.MaxBatch, *req.Max)
		}
		o.Max = *req.Max
	}
	if req.Visibility != nil {
		if o.Visibility, err = parseDuration("visibility", *req.Visibility, queue.MinVisibility, queue.MaxVisibility); err != nil {
			return err
		}
	}
	ctx, cancel := s.streamContext(c)
	defer cancel()
	jobs, err := s.store.Claim(ctx, q, o)
	if err != nil && ctx.Err() != nil && c.Request().Context().Err() == nil {
		jobs, err = nil, nil // drained: the server is shutting down
	}
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if !j.ClaimedAt.IsZero() && !j.RunAt.IsZero() {
			s.metrics.lateness.WithLabelValues(q).Observe(max(j.ClaimedAt.Sub(j.RunAt).Seconds(), 0))
		}
	}
	return writeJobs(c, http.StatusOK, jobs, true)
}

type completeRequest struct {
	Token  string          `json:"token"`
	Result json.RawMessage `json:"result"`
}

// afterJob answers the job as it is now, or 204 when it is gone already
// (a server that deletes finished jobs at once).
func (s *Server) afterJob(c echo.Context, q, id string) (*queue.Job, error) {
	j, err := s.store.Get(c.Request().Context(), q, id)
	if errors.Is(err, queue.ErrNotFound) {
		return nil, c.NoContent(http.StatusNoContent)
	}
	if err != nil {
		return nil, err
	}
	return j, writeJob(c, http.StatusOK, j)
}

// complete: POST /v1/queues/{queue}/jobs/{id}/complete {"token","result"}.
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
	if err := s.store.Complete(c.Request().Context(), q, id, req.Token, req.Result); err != nil {
		return err
	}
	j, err := s.afterJob(c, q, id)
	if j != nil && !j.CompletedAt.IsZero() && !j.ClaimedAt.IsZero() {
		s.metrics.processing.WithLabelValues(q).Observe(max(j.CompletedAt.Sub(j.ClaimedAt).Seconds(), 0))
	}
	return err
}

type failRequest struct {
	Token      string  `json:"token"`
	Error      string  `json:"error"`
	RetryAfter *string `json:"retry_after"`
	Dead       bool    `json:"dead"`
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
		o.RetryAt = s.clock.Now().Add(d)
	}
	if _, err := s.store.Fail(c.Request().Context(), q, id, req.Token, o); err != nil {
		return err
	}
	_, err = s.afterJob(c, q, id)
	return err
}

type heartbeatRequest struct {
	Token  string  `json:"token"`
	Extend *string `json:"extend"`
}

type leaseJSON struct {
	LeaseUntil      *string `json:"lease_until"`
	CancelRequested bool    `json:"cancel_requested"`
}

// heartbeat: POST /v1/queues/{queue}/jobs/{id}/heartbeat
// {"token","extend"?}: {"lease_until","cancel_requested"}.
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
	l, err := s.store.Heartbeat(c.Request().Context(), q, id, req.Token, ext)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, leaseJSON{LeaseUntil: fmtTime(l.Until), CancelRequested: l.CancelRequested})
}

type tokenRequest struct {
	Token string `json:"token"`
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
	if err := s.store.CancelClaimed(c.Request().Context(), q, id, req.Token); err != nil {
		return err
	}
	_, err = s.afterJob(c, q, id)
	return err
}
