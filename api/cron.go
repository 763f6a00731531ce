package api

import (
	"cmp"
	"encoding/json"
	"github.com/chronoq/chronoq/internal/names"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
)

// cronRequest is the body of PUT /v1/cron/{name}. As for POST /v1/jobs,
// an optional field left out (or null) takes its default, and one given
// as "" is a 400: an empty string is a mistake, not a wish for the
// default.
type cronRequest struct {
	Schedule    string          `json:"schedule"`
	Timezone    *string         `json:"timezone"`
	Queue       *string         `json:"queue"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts *int            `json:"max_attempts"`
	Missed      *string         `json:"missed"`
	Overlap     *string         `json:"overlap"`
	Paused      bool            `json:"paused"`
	FlowKey     *string         `json:"flow_key"`
	// Debounce is refused with a message of its own: a cron job's
	// ticks are spaced by its schedule.
	Debounce json.RawMessage `json:"debounce"`
}

// optional is the value of an optional string field: def when it was left
// out (or null), a 400 naming field when it was given empty.
func optional(field string, v *string, def string) (string, error) {
	switch {
	case v == nil:
		return def, nil
	case *v == "":
		return "", invalidArg(field, "must not be empty: leave %s out for %q", field, def)
	}
	return *v, nil
}

type cronJSON struct {
	Name        string          `json:"name"`
	Schedule    string          `json:"schedule"`
	Timezone    string          `json:"timezone"`
	Queue       string          `json:"queue"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts int             `json:"max_attempts"`
	Missed      string          `json:"missed"`
	Overlap     string          `json:"overlap"`
	Paused      bool            `json:"paused"`
	NextRunAt   *string         `json:"next_run_at"`
	LastRunAt   *string         `json:"last_run_at"`
	LastJobID   *string         `json:"last_job_id"`
	FlowKey     string          `json:"flow_key,omitempty"`
}

func toCronJSON(e CronEntry) cronJSON {
	out := cronJSON{Name: e.Name, Schedule: e.Schedule, Timezone: e.Timezone, Queue: e.Queue, Kind: e.Kind,
		Payload: e.Payload, MaxAttempts: cmp.Or(e.MaxAttempts, queue.DefaultMaxAttempts), Missed: string(e.Missed), Overlap: string(e.Overlap), Paused: e.Paused,
		NextRunAt: wire.Time(e.NextRunAt), LastRunAt: wire.Time(e.LastRunAt), LastJobID: nilIfEmpty(e.LastJobID), FlowKey: e.FlowKey}
	if len(out.Payload) == 0 {
		out.Payload = json.RawMessage("{}")
	}
	return out
}

// pathCronName is the {name} of the path: names match the queue-name
// pattern.
func pathCronName(c echo.Context) (string, error) {
	name := c.Param("name")
	if err := names.ValidateQueue(name); err != nil {
		return "", invalidArg("name", "cron entry names match ^[a-z0-9][a-z0-9._-]{0,63}$, got %q", name)
	}
	return name, nil
}

// entry checks what the API can check (the store checks the schedule) and
// fills in the defaults.
func (r *cronRequest) entry(name string) (CronEntry, error) {
	e := CronEntry{Name: name, Schedule: r.Schedule, Kind: r.Kind, Payload: r.Payload, Paused: r.Paused}
	var missed, overlap string
	var err error
	if e.Timezone, err = optional("timezone", r.Timezone, cron.DefaultTimezone); err != nil {
		return e, err
	}
	if e.Queue, err = optional("queue", r.Queue, queue.DefaultQueue); err != nil {
		return e, err
	}
	if missed, err = optional("missed", r.Missed, string(cron.MissedSkip)); err != nil {
		return e, err
	}
	if overlap, err = optional("overlap", r.Overlap, string(cron.OverlapAllow)); err != nil {
		return e, err
	}
	e.Missed, e.Overlap = cron.Missed(missed), cron.Overlap(overlap)
	switch {
	case e.Schedule == "":
		return e, invalidArg("schedule", "schedule is required")
	case names.ValidateQueue(e.Queue) != nil:
		return e, invalidArg("queue", "%v", names.ValidateQueue(e.Queue))
	case e.Kind == "":
		return e, invalidArg("kind", "kind is required")
	case names.ValidateKind(e.Kind) != nil:
		return e, invalidArg("kind", "%v", names.ValidateKind(e.Kind))
	case e.Missed != "skip" && e.Missed != "once":
		return e, invalidArg("missed", `must be "skip" or "once", got %q`, e.Missed)
	case e.Overlap != "allow" && e.Overlap != "skip":
		return e, invalidArg("overlap", `must be "allow" or "skip", got %q`, e.Overlap)
	}
	if _, err := time.LoadLocation(e.Timezone); err != nil {
		return e, invalidArg("timezone", "unknown time zone %q: want an IANA name such as \"Europe/Berlin\"", e.Timezone)
	}
	if string(e.Payload) == "null" || len(e.Payload) == 0 {
		e.Payload = json.RawMessage("{}")
	}
	if len(r.Debounce) > 0 && string(r.Debounce) != "null" {
		return e, invalidArg("debounce", "a cron entry's jobs take no debounce: its schedule spaces them")
	}
	if r.FlowKey != nil {
		if *r.FlowKey == "" {
			return e, invalidArg("flow_key", "must not be empty: leave flow_key out for none")
		}
		if err := queue.ValidateFlowKey(*r.FlowKey); err != nil {
			return e, err
		}
		e.FlowKey = *r.FlowKey
	}
	if r.MaxAttempts != nil {
		if *r.MaxAttempts < 1 || *r.MaxAttempts > queue.MaxAttemptsLimit {
			return e, invalidArg("max_attempts", "must be in [1, %d], got %d", queue.MaxAttemptsLimit, *r.MaxAttempts)
		}
		e.MaxAttempts = *r.MaxAttempts
	}
	return e, nil
}

// putCron: PUT /v1/cron/{name}; 201 when new, 200 when replaced.
func (s *Server) putCron(c echo.Context) error {
	name, err := pathCronName(c)
	if err != nil {
		return err
	}
	var req cronRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	e, err := req.entry(name)
	if err != nil {
		return err
	}
	if e.Kind == dispatch.EnvelopeKind {
		if err := s.checkEnvelope(e.Payload, ""); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	created, err := s.cron.Put(ctx, e)
	if err != nil {
		return err
	}
	if got, err := s.cron.Get(ctx, name); err == nil {
		e = got // with its next run time
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(c, status, toCronJSON(e))
}

type cronListJSON struct {
	Entries    []cronJSON `json:"entries"`
	NextCursor string     `json:"next_cursor"`
}

// listCron: GET /v1/cron?limit=N&cursor=C: a page of the entries, by name.
func (s *Server) listCron(c echo.Context) error {
	o := cron.ListOptions{Cursor: c.QueryParam("cursor")}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > cron.MaxListLimit {
			return invalidArg("limit", "must be an integer in [1, %d], got %q", cron.MaxListLimit, l)
		}
		o.Limit = n
	}
	p, err := s.cron.ListPage(c.Request().Context(), o)
	if err != nil {
		return err
	}
	out := cronListJSON{Entries: make([]cronJSON, len(p.Entries)), NextCursor: p.Next}
	for i, e := range p.Entries {
		out.Entries[i] = toCronJSON(e)
	}
	return writeJSON(c, http.StatusOK, out)
}

// getCron: GET /v1/cron/{name}.
func (s *Server) getCron(c echo.Context) error {
	name, err := pathCronName(c)
	if err != nil {
		return err
	}
	e, err := s.cron.Get(c.Request().Context(), name)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toCronJSON(e))
}

// deleteCron: DELETE /v1/cron/{name}; 204.
func (s *Server) deleteCron(c echo.Context) error {
	name, err := pathCronName(c)
	if err != nil {
		return err
	}
	if err := s.cron.Delete(c.Request().Context(), name); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// triggerCron: POST /v1/cron/{name}/trigger; 201 and the job.
func (s *Server) triggerCron(c echo.Context) error {
	name, err := pathCronName(c)
	if err != nil {
		return err
	}
	if err := s.decode(c, &struct{}{}, true); err != nil {
		return err
	}
	j, err := s.cron.Trigger(c.Request().Context(), name)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, jobLocation(j))
	return writeJob(c, http.StatusCreated, j)
}
