package api

import (
	"encoding/json"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
)

// Headers of idempotent enqueues.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

func jobLocation(j *queue.Job) string { return "/v1/queues/" + j.Queue + "/jobs/" + j.ID }

// enqueueOne: POST /v1/jobs and POST /v1/queues/{queue}/jobs. With
// ?wait=<duration>, it answers the job once it has ended, or as it is when
// the wait runs out (afterEnqueue).
func (s *Server) enqueueOne(c echo.Context) error {
	wait, release, err := s.waitParam(c)
	if err != nil {
		return err
	}
	defer release()
	var req enqueueRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	if q := c.Param("queue"); q != "" {
		if err := names.ValidateQueue(q); err != nil {
			return invalidArg("queue", "%v", err)
		}
		if req.Queue != nil && *req.Queue != q {
			return invalidArg("queue", "the body names queue %q, the path %q", *req.Queue, q)
		}
		req.Queue = &q
	}
	if h := c.Request().Header.Get(HeaderIdempotencyKey); h != "" {
		if req.IdempotencyKey != nil && *req.IdempotencyKey != h {
			return invalidArg("idempotency_key", "the body and the %s header name different keys", HeaderIdempotencyKey)
		}
		req.IdempotencyKey = &h
	}
	nj, err := req.newJob(-1)
	if err != nil {
		return err
	}
	if nj, err = s.pushJob(nj, &req, ""); err != nil {
		return err
	}
	if err := s.pushQueues(c.Request().Context(), []queue.NewJob{nj}, func(int) string { return "" }); err != nil {
		return err
	}
	if req.DependsOn != nil || req.OnFailure != nil {
		return s.enqueueAfter(c, nj, &req, wait)
	}
	if nj.TraceParent == "" {
		// The request's span: the enqueue is batched with others', under
		// a context of its own (see coalesce.go).
		nj.TraceParent = tracing.FromContext(c.Request().Context())
	}
	e, err := s.enqueue(c.Request().Context(), nj)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, jobLocation(e.Job))
	status := http.StatusCreated
	switch {
	case e.Replayed:
		c.Response().Header().Set(HeaderIdempotentReplayed, "true")
		status = http.StatusOK
	case e.Debounced:
		// Folded into its flow key's waiting job: nothing new, as a replay.
		b := wire.MarkDebounced(wire.AppendJob(nil, s.afterEnqueue(c, e.Job, wait), false))
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
	}
	return writeJob(c, status, s.afterEnqueue(c, e.Job, wait))
}

// decodeBatch reads {"jobs":[...]} in one pass; when that fails it reads
// the body again job by job, to name the bad one ("jobs[3].kind").
func (s *Server) decodeBatch(body []byte) ([]queue.NewJob, error) {
	var fast struct {
		Jobs []enqueueRequest `json:"jobs"`
	}
	if err := wire.Strict(body, &fast, ""); err != nil {
		var slow struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		if err := wire.Strict(body, &slow, ""); err != nil {
			return nil, err
		}
		for i, raw := range slow.Jobs {
			var jr enqueueRequest
			if err := wire.Raw(raw, &jr, fmt.Sprintf("jobs[%d].", i)); err != nil {
				return nil, err
			}
		}
		return nil, err
	}
	if len(fast.Jobs) == 0 || len(fast.Jobs) > queue.MaxBatch {
		return nil, invalidArg("jobs", "a batch holds 1 to %d jobs, got %d", queue.MaxBatch, len(fast.Jobs))
	}
	njs := make([]queue.NewJob, len(fast.Jobs))
	for i := range fast.Jobs {
		if fast.Jobs[i].DependsOn != nil || fast.Jobs[i].OnFailure != nil {
			return nil, invalidArg(fieldPrefix(i)+"depends_on", "a batch's jobs take no depends_on: enqueue a workflow (POST /v1/workflows)")
		}
		nj, err := fast.Jobs[i].newJob(i)
		if err != nil {
			return nil, err
		}
		if nj, err = s.pushJob(nj, &fast.Jobs[i], fieldPrefix(i)); err != nil {
			return nil, err
		}
		njs[i] = nj
	}
	return njs, nil
}

// enqueueBatch: POST /v1/jobs/batch. The batch is validated as a whole:
// one bad job is a 400 naming it ("jobs[3].kind") and nothing is
// enqueued.
func (s *Server) enqueueBatch(c echo.Context) error {
	if c.Request().Header.Get(HeaderIdempotencyKey) != "" {
		return invalidArg("idempotency_key", "a batch takes no %s header: give each job its idempotency_key", HeaderIdempotencyKey)
	}
	body, err := wire.ReadBody(c.Request())
	if err != nil {
		return err
	}
	njs, err := s.decodeBatch(body)
	if err != nil {
		return err
	}
	if err := s.pushQueues(c.Request().Context(), njs, fieldPrefix); err != nil {
		return err
	}
	res, err := s.produce.EnqueueBatch(c.Request().Context(), njs)
	if err != nil {
		return err
	}
	jobs := make([]*queue.Job, len(res))
	replayed, debounced := 0, 0
	for i, e := range res {
		jobs[i] = e.Job
		switch {
		case e.Replayed:
			replayed++
		case e.Debounced:
			debounced++
		}
	}
	status := http.StatusCreated
	switch {
	case replayed == len(res):
		// Every job's idempotency key named an earlier job: nothing new.
		c.Response().Header().Set(HeaderIdempotentReplayed, "true")
		status = http.StatusOK
	case replayed+debounced == len(res):
		status = http.StatusOK // nothing new either
	}
	if debounced == 0 {
		return writeJobs(c, status, jobs, false)
	}
	b := make([]byte, 0, 16+len(jobs)*700)
	b = append(b, `{"jobs":[`...)
	for i, e := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = wire.AppendJob(b, e.Job, false)
		if e.Debounced {
			b = wire.MarkDebounced(b)
		}
	}
	return c.Blob(status, echo.MIMEApplicationJSON, append(b, "]}"...))
}
