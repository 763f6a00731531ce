package api

import (
	"encoding/json"
	"github.com/chronoq/chronoq/internal/names"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
)

// A running job's artifacts and log, over HTTP: the worker writes them
// with its claim token, anyone reads them. The caps are the queue
// package's (queue.MaxArtifacts, queue.MaxLogLines, ...).

type artifactRequest struct {
	Token string          `json:"token"`
	Value json.RawMessage `json:"value"`
}

// artifactsJSON is the answer of the artifact routes: {"artifacts":{...}}.
type artifactsJSON struct {
	Artifacts json.RawMessage `json:"artifacts"`
}

// putArtifact: PUT /v1/queues/{queue}/jobs/{id}/artifacts/{name}
// {"token","value"}: sets one artifact of a claimed job (replacing one of
// that name), answers the job's artifacts.
func (s *Server) putArtifact(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if !names.ArtifactNameOK(name) {
		return invalidArg("name", "artifact names are 1 to %d of [A-Za-z0-9._-], got %q", queue.MaxArtifactNameBytes, name)
	}
	var req artifactRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	if req.Token == "" {
		return invalidArg("token", "token is required: the claim's token")
	}
	if len(req.Value) == 0 {
		return invalidArg("value", "value is required: any JSON")
	}
	ctx := c.Request().Context()
	if err := s.outputs.AttachArtifacts(ctx, q, id, req.Token, map[string]json.RawMessage{name: req.Value}); err != nil {
		return err
	}
	arts, err := s.outputs.Artifacts(ctx, q, id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, artifactsJSON{arts})
}

// getArtifacts: GET /v1/queues/{queue}/jobs/{id}/artifacts:
// {"artifacts":{name: value}} ({} when it has none).
func (s *Server) getArtifacts(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	arts, err := s.outputs.Artifacts(c.Request().Context(), q, id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, artifactsJSON{arts})
}

type logsRequest struct {
	Token string   `json:"token"`
	Lines []string `json:"lines"`
}

type logAppendJSON struct {
	Added     int   `json:"added"`
	Last      int64 `json:"last"`
	Truncated bool  `json:"truncated"`
}

// appendLogs: POST /v1/queues/{queue}/jobs/{id}/logs {"token","lines"}:
// appends 1 to queue.MaxLogBatch lines to a claimed job's log; answers
// {"added","last","truncated"} (lines past the log's cap are dropped).
func (s *Server) appendLogs(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	var req logsRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	if req.Token == "" {
		return invalidArg("token", "token is required: the claim's token")
	}
	if len(req.Lines) == 0 || len(req.Lines) > queue.MaxLogBatch {
		return invalidArg("lines", "give 1 to %d lines, got %d", queue.MaxLogBatch, len(req.Lines))
	}
	a, err := s.outputs.AppendLog(c.Request().Context(), q, id, req.Token, req.Lines)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, logAppendJSON{Added: a.Added, Last: a.Last, Truncated: a.Truncated})
}

type logLineJSON struct {
	Seq  int64   `json:"seq"`
	At   *string `json:"at"`
	Line string  `json:"line"`
}

type logPageJSON struct {
	Lines     []logLineJSON `json:"lines"`
	Next      int64         `json:"next"`
	Total     int64         `json:"total"`
	Truncated bool          `json:"truncated"`
}

func toLogLineJSON(l queue.LogLine) logLineJSON {
	return logLineJSON{Seq: l.Seq, At: wire.Time(l.At), Line: l.Line}
}

// getLogs: GET /v1/queues/{queue}/jobs/{id}/logs?after=<seq>&limit=<n>:
// {"lines":[{"seq","at","line"}],"next","total","truncated"}; next is the
// after of the next page.
func (s *Server) getLogs(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	after, err := seqParam(c, "after")
	if err != nil {
		return err
	}
	limit := queue.DefaultLogPage
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > queue.MaxLogPage {
			return invalidArg("limit", "must be an integer in [1, %d], got %q", queue.MaxLogPage, v)
		}
		limit = n
	}
	page, err := s.outputs.Logs(c.Request().Context(), q, id, after, limit)
	if err != nil {
		return err
	}
	out := logPageJSON{Lines: make([]logLineJSON, len(page.Lines)), Next: page.Next, Total: page.Total, Truncated: page.Truncated}
	for i, l := range page.Lines {
		out.Lines[i] = toLogLineJSON(l)
	}
	return writeJSON(c, http.StatusOK, out)
}

// seqParam reads a log seq from the query (0 when left out).
func seqParam(c echo.Context, name string) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalidArg(name, "must be a log seq, an integer from 0, got %q", v)
	}
	return n, nil
}
