package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/queue"
)

// MaxWait caps the ?wait of GET /v1/queues/{queue}/jobs/{id} and of the
// enqueues (POST /v1/jobs, POST /v1/queues/{queue}/jobs), as
// queue.MaxClaimWait caps the claim's long poll: under the idle timeouts
// of the usual proxies and load balancers (60 s).
const MaxWait = 30 * time.Second

// noWait gives back no wait.
func noWait() {}

// waitParam reads ?wait=, how long a request waits for its job to end: a
// Go duration in [0, MaxWait]; 0 (no wait) when left out. A wait takes
// one of Config.MaxWaits, which release gives back; past the cap it is a
// 503, before anything is done.
func (s *Server) waitParam(c echo.Context) (wait time.Duration, release func(), err error) {
	vs, ok := c.QueryParams()["wait"]
	if !ok {
		return 0, noWait, nil
	}
	if len(vs) != 1 {
		return 0, noWait, invalidArg("wait", "give wait once, got it %d times", len(vs))
	}
	if wait, err = parseDuration("wait", vs[0], 0, MaxWait); err != nil || wait == 0 {
		return wait, noWait, err
	}
	if n := s.waits.Add(1); n > int64(s.cfg.MaxWaits) {
		s.waits.Add(-1)
		return 0, noWait, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: fmt.Sprintf("too many requests wait for a job's end (%d); retry later, or without wait", s.cfg.MaxWaits)}
	}
	return wait, func() { s.waits.Add(-1) }, nil
}

// waitJob waits up to wait for job id of q to end (see
// queue.Client.WaitEnded) and answers it then: ended, or as it is when
// the wait runs out. A server that drains (Drain) ends the wait: the job
// is answered as it is then.
func (s *Server) waitJob(c echo.Context, q, id string, wait time.Duration) (*queue.Job, error) {
	rctx := c.Request().Context()
	ctx, cancel := s.streamContext(c)
	defer cancel()
	j, err := s.subscribe.WaitEnded(ctx, q, id, wait)
	if err != nil && ctx.Err() != nil && rctx.Err() == nil {
		return s.read.Get(rctx, q, id) // drained
	}
	return j, err
}

// afterEnqueue is the job an enqueue with ?wait answers: j, the job as
// the enqueue made it, once it has ended or as it is when the wait runs
// out. The job is enqueued whatever the wait meets: when reading it
// fails (Redis away, the job deleted meanwhile), the answer is j.
func (s *Server) afterEnqueue(c echo.Context, j *queue.Job, wait time.Duration) *queue.Job {
	if wait == 0 || finished(j.Status) {
		return j
	}
	w, err := s.waitJob(c, j.Queue, j.ID, wait)
	if err != nil {
		return j
	}
	return w
}
