package api

import (
	"context"
	"encoding/json"
	"github.com/chronoq/chronoq/internal/names"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
)

const (
	defaultListLimit = queue.DefaultListLimit
	maxListLimit     = queue.MaxListLimit
	// statsParallel bounds the Stats calls under way at once when every
	// queue is read (GET /v1/queues, a metrics scrape).
	statsParallel = 8
)

// pathQueue is the {queue} of the path, validated.
func pathQueue(c echo.Context) (string, error) {
	q := c.Param("queue")
	if err := names.ValidateQueue(q); err != nil {
		return "", invalidArg("queue", "%v", err)
	}
	return q, nil
}

// pathJob is the {queue} and {id} of the path, validated.
func pathJob(c echo.Context) (string, string, error) {
	q, err := pathQueue(c)
	if err != nil {
		return "", "", err
	}
	id := c.Param("id")
	if err := names.ValidateID(id); err != nil {
		return "", "", invalidArg("id", "%v", err)
	}
	return q, id, nil
}

// allStats reads the stats of the known queues, sorted by name, the first
// limit of them (all when limit is 0), statsParallel at a time.
func allStats(ctx context.Context, r Reader, limit int) ([]queue.Stats, error) {
	qs, err := r.Queues(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(qs)
	if limit > 0 && len(qs) > limit {
		qs = qs[:limit]
	}
	out := make([]queue.Stats, len(qs))
	errs := make([]error, len(qs))
	sem := make(chan struct{}, statsParallel)
	var wg sync.WaitGroup
	for i, q := range qs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = r.Stats(ctx, q)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

type queuesJSON struct {
	Queues []queueJSON `json:"queues"`
}

// listQueues: GET /v1/queues.
func (s *Server) listQueues(c echo.Context) error {
	stats, err := allStats(c.Request().Context(), s.read, 0)
	if err != nil {
		return err
	}
	out := queuesJSON{Queues: make([]queueJSON, len(stats))}
	for i, st := range stats {
		out.Queues[i] = toQueueJSON(st)
	}
	return writeJSON(c, http.StatusOK, out)
}

// getQueue: GET /v1/queues/{queue}; 404 for a queue never used.
func (s *Server) getQueue(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	qs, err := s.read.Queues(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(qs, q) {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no queue " + strconv.Quote(q)}
	}
	return s.answerQueue(c, q)
}

func (s *Server) answerQueue(c echo.Context, q string) error {
	st, err := s.read.Stats(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := toQueueJSON(st)
	if out.Push, err = s.pushOf(c.Request().Context(), q); err != nil {
		return err
	}
	l, err := s.manage.Limits(c.Request().Context(), q)
	if err != nil {
		return err
	}
	if l != (queue.Limits{}) { // a queue without limits reads the zero Limits
		lj := toLimitsJSON(l)
		out.Limits = &lj
	}
	return writeJSON(c, http.StatusOK, out)
}

// deleteQueue: DELETE /v1/queues/{queue}[?force=true]; 204. A queue with a
// job processing answers 409 queue_busy unless force.
func (s *Server) deleteQueue(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	force := false
	switch v := c.QueryParam("force"); v {
	case "", "false":
	case "true":
		force = true
	default:
		return invalidArg("force", "must be true or false, got %q", v)
	}
	if err := s.manage.DeleteQueue(c.Request().Context(), q, force); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// pauseQueue: POST /v1/queues/{queue}/pause; answers the queue.
func (s *Server) pauseQueue(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	if err := s.decode(c, &struct{}{}, true); err != nil {
		return err
	}
	if err := s.manage.Pause(c.Request().Context(), q); err != nil {
		return err
	}
	return s.answerQueue(c, q)
}

// resumeQueue: POST /v1/queues/{queue}/resume; answers the queue.
func (s *Server) resumeQueue(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	if err := s.decode(c, &struct{}{}, true); err != nil {
		return err
	}
	if err := s.manage.Resume(c.Request().Context(), q); err != nil {
		return err
	}
	return s.answerQueue(c, q)
}

// reclaimQueue: POST /v1/queues/{queue}/reclaim.
func (s *Server) reclaimQueue(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	if err := s.decode(c, &struct{}{}, true); err != nil {
		return err
	}
	ids, err := s.manage.Reclaim(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string][]string{"reclaimed": append([]string{}, ids...)})
}

// getJob: GET /v1/queues/{queue}/jobs/{id}[?wait=<duration>]. With a
// wait, it answers once the job has ended, or as it is when the wait runs
// out (waitJob).
func (s *Server) getJob(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	wait, release, err := s.waitParam(c)
	if err != nil {
		return err
	}
	defer release()
	var j *queue.Job
	if wait > 0 {
		j, err = s.waitJob(c, q, id, wait)
	} else {
		j, err = s.read.Get(c.Request().Context(), q, id)
	}
	if err != nil {
		return err
	}
	ds, err := s.deliveries(c.Request().Context(), q, id)
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		return writeJob(c, http.StatusOK, j)
	}
	// The attempts of a push job, after the Job resource's own fields.
	b := wire.AppendJob(make([]byte, 0, 640+len(j.Payload)+len(j.Result)), j, false)
	extra, err := json.Marshal(ds)
	if err != nil {
		return err
	}
	b = append(append(append(b[:len(b)-1], `,"deliveries":`...), extra...), '}')
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

// listJobs: GET /v1/queues/{queue}/jobs?status=S&limit=N&cursor=C.
func (s *Server) listJobs(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	o := ListOptions{Limit: defaultListLimit, Cursor: c.QueryParam("cursor"), Status: queue.Status(c.QueryParam("status"))}
	switch o.Status {
	case queue.StatusScheduled, queue.StatusPending, queue.StatusProcessing, queue.StatusCompleted, queue.StatusDead:
	case "":
		return invalidArg("status", "status is required: scheduled, pending, processing, completed or dead")
	default:
		return invalidArg("status", "must be scheduled, pending, processing, completed or dead, got %q (canceled jobs sit in no list)", o.Status)
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return invalidArg("limit", "must be an integer in [1, %d], got %q", maxListLimit, l)
		}
		o.Limit = n
	}
	jobs, next, err := s.read.List(c.Request().Context(), q, o)
	if err != nil {
		return err
	}
	b := wire.AppendJobs(make([]byte, 0, 64+len(jobs)*700), jobs, false)
	b = append(b, `,"next_cursor":`...)
	b = append(wire.AppendString(b, next), '}')
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

type rescheduleRequest struct {
	RunAt *string `json:"run_at"`
	Delay *string `json:"delay"`
}

// rescheduleJob: PATCH /v1/queues/{queue}/jobs/{id}.
func (s *Server) rescheduleJob(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	var req rescheduleRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	var j *queue.Job
	switch {
	case req.RunAt != nil && req.Delay != nil:
		return invalidArg("delay", "give run_at or delay, not both")
	case req.RunAt != nil:
		runAt, err := parseTime("run_at", *req.RunAt)
		if err != nil {
			return err
		}
		if j, err = s.manage.Reschedule(c.Request().Context(), q, id, runAt); err != nil {
			return err
		}
	case req.Delay != nil:
		d, err := parseDuration("delay", *req.Delay, 0, queue.MaxDelay)
		if err != nil {
			return err
		}
		// after Redis's now, by Redis's clock, as an enqueue's delay
		if j, err = s.manage.RescheduleIn(c.Request().Context(), q, id, d); err != nil {
			return err
		}
	default:
		return invalidArg("run_at", "give run_at or delay")
	}
	return writeJob(c, http.StatusOK, j)
}

// cancelJob: DELETE /v1/queues/{queue}/jobs/{id}.
func (s *Server) cancelJob(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	j, err := s.manage.Cancel(c.Request().Context(), q, id)
	if err != nil {
		return err
	}
	return writeJob(c, http.StatusOK, j)
}

// retryJob: POST /v1/queues/{queue}/jobs/{id}/retry.
func (s *Server) retryJob(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	if err := s.decode(c, &struct{}{}, true); err != nil {
		return err
	}
	j, err := s.manage.RunNow(c.Request().Context(), q, id)
	if err != nil {
		return err
	}
	return writeJob(c, http.StatusOK, j)
}

type deadRequest struct {
	Kind string `json:"kind"`
}

// requeueDead: POST /v1/queues/{queue}/dead/retry, optional {"kind"}.
func (s *Server) requeueDead(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	var req deadRequest
	if err := s.decode(c, &req, true); err != nil {
		return err
	}
	if req.Kind != "" {
		if err := names.ValidateKind(req.Kind); err != nil {
			return invalidArg("kind", "%v", err)
		}
	}
	n, err := s.manage.RequeueDead(c.Request().Context(), q, req.Kind)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]int{"requeued": n})
}

// purgeDead: DELETE /v1/queues/{queue}/dead, optional ?kind=K.
func (s *Server) purgeDead(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	kind := c.QueryParam("kind")
	if kind != "" {
		if err := names.ValidateKind(kind); err != nil {
			return invalidArg("kind", "%v", err)
		}
	}
	n, err := s.manage.PurgeDead(c.Request().Context(), q, kind)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]int{"deleted": n})
}
