package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
)

// bodyLimit caps every request body: a Content-Length over the limit is a
// 413 at once, and reading past it fails the decode with a 413.
func (s *Server) bodyLimit(c echo.Context) error {
	r := c.Request()
	if r.ContentLength > s.cfg.BodyLimit {
		return tooLarge("", fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, s.cfg.BodyLimit))
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(c.Response().Writer, r.Body, s.cfg.BodyLimit)
	}
	return nil
}

// decode reads the request body, one JSON object, into v: unknown fields,
// trailing data and values of the wrong type are 400s naming the field, a
// body over the limit a 413. An empty body is an empty object when
// optional, else a 400.
func (s *Server) decode(c echo.Context, v any, optional bool) error {
	body, err := wire.ReadBody(c.Request())
	if err != nil {
		return err
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return wire.Strict(body, v, "")
}

// parseDuration reads a Go duration string ("90s", "1m30s", "250ms") of
// field, which must lie in [lo, hi].
func parseDuration(field, s string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalidArg(field, "not a duration (%q): want a Go duration such as \"90s\", \"1m30s\" or \"250ms\"", s)
	}
	if d < lo || d > hi {
		return 0, invalidArg(field, "must be in [%s, %s], got %s", wire.Duration(lo), wire.Duration(hi), wire.Duration(d))
	}
	return d, nil
}

// parseTime reads an RFC 3339 time of field.
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalidArg(field, "not an RFC 3339 time (%q): want e.g. \"2026-11-22T10:05:00.000Z\"", s)
	}
	return t, nil
}

// jobBufs recycles the buffers writeJob writes a job in: the response
// writer copies what it is given (io.Writer must not retain it), so a
// buffer is free again once the answer is written. Buffers over
// maxPooledBuf are left to the collector.
var jobBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuf = 16 << 10

// writeJob answers one job.
func writeJob(c echo.Context, status int, j *queue.Job) error {
	bp := jobBufs.Get().(*[]byte) //nolint:forcetypeassert // the pool holds nothing else
	b := wire.AppendJob(slices.Grow((*bp)[:0], 640+len(j.Payload)+len(j.Result)+len(j.Artifacts)), j, false)
	err := c.Blob(status, echo.MIMEApplicationJSON, b)
	if cap(b) <= maxPooledBuf {
		*bp = b
		jobBufs.Put(bp)
	}
	return err
}

// writeJobs answers {"jobs":[...]}.
func writeJobs(c echo.Context, status int, jobs []*queue.Job, withToken bool) error {
	b := wire.AppendJobs(make([]byte, 0, 16+len(jobs)*700), jobs, withToken)
	return c.Blob(status, echo.MIMEApplicationJSON, append(b, '}'))
}

// writeJSON answers v as JSON with status.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Blob(status, echo.MIMEApplicationJSON, b)
}
