package demo

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api"
)

// Routes are the demo's HTTP routes, for api.Config.Routes:
//
//	GET  /v1/demo        the pool's settings and counters
//	POST /v1/demo/pool   change the settings: {"size","latency","fail_rate","hang_rate"}, each optional
//	POST /v1/demo/batch  enqueue a batch: {"count","kinds","delay","spread","max_attempts","visibility"}
//	POST /v1/demo/workflow  start a sample fan-out/fan-in workflow: {"width"} (with Config.Workflows)
func (p *Pool) Routes() []api.Route {
	rs := []api.Route{
		{Method: http.MethodGet, Path: "/v1/demo", Handler: p.getStatus},
		{Method: http.MethodPost, Path: "/v1/demo/pool", Handler: p.postPool},
		{Method: http.MethodPost, Path: "/v1/demo/batch", Handler: p.postBatch},
	}
	if p.cfg.Workflows != nil {
		rs = append(rs, api.Route{Method: http.MethodPost, Path: "/v1/demo/workflow", Handler: p.postWorkflow})
	}
	return rs
}

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI documents [Pool.Routes], for api.Config.RoutesOpenAPI: their
// paths and schemas, merged into the document the server serves at
// /v1/openapi.json (only `chronoq demo` serves them).
func OpenAPI() []byte { return openAPIDoc }

type statusJSON struct {
	Queue     string   `json:"queue"`
	Kinds     []string `json:"kinds"`
	Size      int      `json:"size"`
	Latency   string   `json:"latency"`
	FailRate  float64  `json:"fail_rate"`
	HangRate  float64  `json:"hang_rate"`
	Running   int      `json:"running"`
	Busy      int      `json:"busy"`
	Claimed   int64    `json:"claimed"`
	Completed int64    `json:"completed"`
	Failed    int64    `json:"failed"`
	Hung      int64    `json:"hung"`
	Released  int64    `json:"released"`
	HungJobs  []string `json:"hung_jobs"`
}

func (p *Pool) statusJSON() statusJSON {
	s := p.Status()
	return statusJSON{Queue: s.Queue, Kinds: Kinds, Size: s.Settings.Size, Latency: s.Settings.Latency.String(),
		FailRate: s.Settings.FailRate, HangRate: s.Settings.HangRate, Running: s.Running, Busy: s.Busy,
		Claimed: s.Claimed, Completed: s.Completed, Failed: s.Failed, Hung: s.Hung, Released: s.Released,
		HungJobs: s.HungJobs}
}

func (p *Pool) getStatus(c echo.Context) error {
	return c.JSON(http.StatusOK, p.statusJSON())
}

type poolRequest struct {
	Size     *int     `json:"size"`
	Latency  *string  `json:"latency"`
	FailRate *float64 `json:"fail_rate"`
	HangRate *float64 `json:"hang_rate"`
}

func (p *Pool) postPool(c echo.Context) error {
	var req poolRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	s := p.Status().Settings
	if req.Size != nil {
		s.Size = *req.Size
	}
	if req.Latency != nil {
		d, err := parseDuration("latency", *req.Latency)
		if err != nil {
			return err
		}
		s.Latency = d
	}
	if req.FailRate != nil {
		s.FailRate = *req.FailRate
	}
	if req.HangRate != nil {
		s.HangRate = *req.HangRate
	}
	if err := p.Configure(s); err != nil {
		return toAPIError(err)
	}
	return c.JSON(http.StatusOK, p.statusJSON())
}

type batchRequest struct {
	Count       int      `json:"count"`
	Kinds       []string `json:"kinds"`
	Delay       string   `json:"delay"`
	Spread      string   `json:"spread"`
	MaxAttempts int      `json:"max_attempts"`
	Visibility  string   `json:"visibility"`
}

type batchJSON struct {
	Enqueued   int       `json:"enqueued"`
	IDs        []string  `json:"ids"`
	FirstRunAt time.Time `json:"first_run_at"`
	LastRunAt  time.Time `json:"last_run_at"`
}

func (p *Pool) postBatch(c echo.Context) error {
	var req batchRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	b := Batch{Count: req.Count, Kinds: req.Kinds, MaxAttempts: req.MaxAttempts}
	var err error
	if b.Delay, err = parseDuration("delay", req.Delay); err != nil {
		return err
	}
	if b.Spread, err = parseDuration("spread", req.Spread); err != nil {
		return err
	}
	if b.Visibility, err = parseDuration("visibility", req.Visibility); err != nil {
		return err
	}
	jobs, err := p.Enqueue(c.Request().Context(), b)
	if err != nil {
		return toAPIError(err)
	}
	out := batchJSON{Enqueued: len(jobs), IDs: make([]string, len(jobs))}
	for i, j := range jobs {
		out.IDs[i] = j.ID
		if i == 0 || j.RunAt.Before(out.FirstRunAt) {
			out.FirstRunAt = j.RunAt.UTC()
		}
		if j.RunAt.After(out.LastRunAt) {
			out.LastRunAt = j.RunAt.UTC()
		}
	}
	return c.JSON(http.StatusCreated, out)
}

// toAPIError answers the demo's own errors as the API's; others (the
// store's) go to the API's mapping as they are.
func toAPIError(err error) error {
	var fe fieldError
	if errors.As(err, &fe) {
		return invalid(fe.field, fe.msg)
	}
	if errors.Is(err, ErrStopped) {
		return &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: err.Error()}
	}
	return err
}

func invalid(field, msg string) *api.Error {
	return &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalidArgument, Field: field, Message: msg}
}

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalid(field, fmt.Sprintf("want a duration such as \"10s\", got %q", s))
	}
	return d, nil
}

// decode reads the body, one JSON object (an empty body is {}), strictly.
func decode(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodePayloadTooLarge, Message: "request body too large"}
		}
		return invalid("", "reading the request body failed")
	}
	if !utf8.Valid(body) {
		return invalid("", "the body is not valid UTF-8 (RFC 8259, section 8.1)")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalid(te.Field, fmt.Sprintf("want %s", te.Type))
		}
		return invalid("", "the body must be one JSON object: "+err.Error())
	}
	if dec.More() {
		return invalid("", "the body must hold one JSON object and nothing after it")
	}
	return nil
}
