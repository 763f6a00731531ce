package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

// The worker registry (package registry): GET /v1/workers and
// /v1/workers/{id}, PUT and DELETE /v1/workers/{id}, and the worker_id an
// HTTP worker may give to its claim, complete, fail, heartbeat and cancel
// calls, which registers or refreshes it and keeps the list of jobs it
// holds: a claim adds the jobs it answers, a heartbeat the job it extends,
// and complete, fail and cancel drop theirs (as does a heartbeat or an
// ack answered lease_lost or not_found). A registry failure after the job
// call succeeded is logged, not answered: the job call happened.

// workersRoutes are the registry's routes, when the server has one.
func (s *Server) workersRoutes() []route {
	if s.workers == nil {
		return nil
	}
	return []route{
		{http.MethodGet, "/v1/workers", s.listWorkers, false},
		{http.MethodGet, "/v1/workers/:id", s.getWorker, false},
		{http.MethodPut, "/v1/workers/:id", s.putWorker, false},
		{http.MethodDelete, "/v1/workers/:id", s.deleteWorker, false},
	}
}

type workerJSON struct {
	ID         string       `json:"id"`
	Host       string       `json:"host"`
	Labels     []string     `json:"labels"`
	Queues     []string     `json:"queues"`
	Version    string       `json:"version"`
	StartedAt  *string      `json:"started_at"`
	LastSeenAt *string      `json:"last_seen_at"`
	ExpiresAt  *string      `json:"expires_at"`
	Jobs       []jobRefJSON `json:"jobs"`
}

type workersJSON struct {
	Workers    []workerJSON `json:"workers"`
	NextCursor string       `json:"next_cursor"`
	Live       int          `json:"live"`
}

func toWorkerJSON(w registry.Worker) workerJSON {
	out := workerJSON{ID: w.ID, Host: w.Host, Labels: w.Labels, Queues: w.Queues, Version: w.Version,
		StartedAt: wire.Time(w.StartedAt), LastSeenAt: wire.Time(w.LastSeenAt), ExpiresAt: wire.Time(w.ExpiresAt),
		Jobs: make([]jobRefJSON, len(w.Jobs))}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	if out.Queues == nil {
		out.Queues = []string{}
	}
	for i, j := range w.Jobs {
		out.Jobs[i] = jobRefJSON{Queue: j.Queue, ID: j.ID}
	}
	return out
}

// listWorkers: GET /v1/workers?limit=N&cursor=C: the live workers by id.
func (s *Server) listWorkers(c echo.Context) error {
	o := registry.ListOptions{Cursor: c.QueryParam("cursor")}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > registry.MaxListLimit {
			return invalidArg("limit", "must be an integer in [1, %d], got %q", registry.MaxListLimit, l)
		}
		o.Limit = n
	}
	if o.Cursor != "" && registry.ValidateID(o.Cursor) != nil {
		return invalidArg("cursor", "not a cursor of this list: give the next_cursor of the page before")
	}
	s.sightingsWritten(c.Request().Context(), "")
	p, err := s.workers.List(c.Request().Context(), o)
	if err != nil {
		return err
	}
	out := workersJSON{Workers: make([]workerJSON, len(p.Workers)), NextCursor: p.Next, Live: p.Live}
	for i, w := range p.Workers {
		out.Workers[i] = toWorkerJSON(w)
	}
	return writeJSON(c, http.StatusOK, out)
}

// pathWorker is the {id} of the path, validated.
func pathWorker(c echo.Context) (string, error) {
	id := c.Param("id")
	if err := registry.ValidateID(id); err != nil {
		return "", invalidArg("id", "%v", errors.Unwrap(err))
	}
	return id, nil
}

// getWorker: GET /v1/workers/{id}; 404 unless it is live.
func (s *Server) getWorker(c echo.Context) error {
	id, err := pathWorker(c)
	if err != nil {
		return err
	}
	s.sightingsWritten(c.Request().Context(), id)
	w, err := s.workers.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toWorkerJSON(w))
}

type workerRequest struct {
	Host    *string       `json:"host"`
	Labels  []string      `json:"labels"`
	Queues  []string      `json:"queues"`
	Version *string       `json:"version"`
	TTL     *string       `json:"ttl"`
	Jobs    *[]jobRefJSON `json:"jobs"`
}

// putWorker: PUT /v1/workers/{id}: registers or refreshes an HTTP worker
// and answers it as recorded.
func (s *Server) putWorker(c echo.Context) error {
	id, err := pathWorker(c)
	if err != nil {
		return err
	}
	var req workerRequest
	if err := s.decode(c, &req, true); err != nil {
		return err
	}
	reg := registry.Registration{Info: registry.Info{ID: id, Labels: req.Labels, Queues: req.Queues}}
	if req.Host != nil {
		reg.Host = *req.Host
	}
	if req.Version != nil {
		reg.Version = *req.Version
	}
	if req.TTL != nil {
		if reg.TTL, err = parseDuration("ttl", *req.TTL, registry.MinTTL, registry.MaxTTL); err != nil {
			return err
		}
	}
	if req.Jobs != nil {
		reg.Jobs = make([]registry.JobRef, len(*req.Jobs))
		for i, j := range *req.Jobs {
			reg.Jobs[i] = registry.JobRef{Queue: j.Queue, ID: j.ID}
		}
	}
	s.sightingsForgotten(c.Request().Context(), id)
	w, err := s.workers.Register(c.Request().Context(), reg)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toWorkerJSON(w))
}

// deleteWorker: DELETE /v1/workers/{id}: 204, or 404 when it was not live.
func (s *Server) deleteWorker(c echo.Context) error {
	id, err := pathWorker(c)
	if err != nil {
		return err
	}
	s.sightingsForgotten(c.Request().Context(), id)
	ok, err := s.workers.Deregister(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no live worker " + strconv.Quote(id)}
	}
	return c.NoContent(http.StatusNoContent)
}

// workerID checks the worker_id of a worker call: "" when it gives none
// (or the server has no registry).
func (s *Server) workerID(id *string) (string, error) {
	if id == nil || s.workers == nil {
		return "", nil
	}
	if err := registry.ValidateID(*id); err != nil {
		return "", invalidArg("worker_id", "%v", errors.Unwrap(err))
	}
	return *id, nil
}

// sighted records a sighting of worker id before a claim (see
// registry.Touch, and sightings for when it is not written); its error is
// the call's.
func (s *Server) sighted(ctx context.Context, id string, t registry.Touch) error {
	switch {
	case id == "":
		return nil
	case s.sightings != nil:
		return s.sightings.beforeClaim(ctx, id, t)
	}
	_, err := s.touch(ctx, id, t)
	return err
}

// holds records that worker id holds jobs (h), or no longer does, after
// a job call: with the worker's other sightings within a second when
// this server wrote it within that second (see sightings), else at once;
// a failure is logged, not answered.
func (s *Server) holds(ctx context.Context, id string, jobs []registry.JobRef, h bool) {
	if id == "" || len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), registryTimeout)
	defer cancel()
	var err error
	switch {
	case s.sightings != nil:
		err = s.sightings.heldJobs(ctx, id, jobs, h)
	case h:
		_, err = s.touch(ctx, id, registry.Touch{Add: jobs})
	default:
		_, err = s.touch(ctx, id, registry.Touch{Drop: jobs})
	}
	if err != nil {
		s.log.Warn("api: recording a worker's jobs in the registry failed", "worker_id", id, "err", err)
	}
}

// registryTimeout bounds a registry call made after a job call.
const registryTimeout = 5 * time.Second

// released records that worker id no longer holds job q/jobID once a job
// call answered err: done (nil), or the job is no longer its (lease lost,
// gone).
func (s *Server) released(ctx context.Context, id, q, jobID string, err error) {
	if err == nil || errors.Is(err, queue.ErrLeaseLost) || errors.Is(err, queue.ErrNotFound) {
		s.holds(ctx, id, []registry.JobRef{{Queue: q, ID: jobID}}, false)
	}
}

// sightingsWritten writes the sightings this server keeps of worker id
// (every worker's for ""), before a read of the registry, so that its
// answer is current; a failure is logged, and the read goes on.
func (s *Server) sightingsWritten(ctx context.Context, id string) {
	if s.sightings == nil {
		return
	}
	var err error
	if id == "" {
		err = s.sightings.flushAll(ctx)
	} else {
		err = s.sightings.flush(ctx, id)
	}
	if err != nil {
		s.log.Warn("api: recording the workers' jobs in the registry failed", "worker_id", id, "err", err)
	}
}

// sightingsForgotten writes the sightings this server keeps of worker id
// and forgets it, before a PUT or DELETE of it; a failure is logged.
func (s *Server) sightingsForgotten(ctx context.Context, id string) {
	if s.sightings == nil {
		return
	}
	if err := s.sightings.forget(ctx, id); err != nil {
		s.log.Warn("api: recording a worker's jobs in the registry failed", "worker_id", id, "err", err)
	}
}

// workersCollector reads the number of live workers at scrape time.
type workersCollector struct{ r *registry.Registry }

var descWorkers = prometheus.NewDesc("chronoq_workers",
	"Workers live in the registry now (Go and HTTP workers seen within their TTL), the same on every instance.", nil, nil)

func (w *workersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descWorkers }

func (w *workersCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	n, err := w.r.Live(ctx)
	if err != nil {
		return // chronoq_store_up says Redis did not answer
	}
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(n))
}
