package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/queue"
)

// Flow control in the API (see queue.FlowLimits): a queue's limits for
// each flow key (/v1/queues/{q}/flow), keys' own limits
// (/flow/overrides/{key}), and the keys with work (/flow/keys).

// DefaultFlowKeysPage is how many keys GET /v1/queues/{q}/flow/keys and
// how many job ids of each kind GET .../flow/keys/{key} answer when the
// request names no limit.
const DefaultFlowKeysPage = 50

// flowLimitsJSON is a queue's flow limits in the API (queue.FlowLimits).
type flowLimitsJSON struct {
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	Strategy    string  `json:"strategy"`
}

func toFlowLimitsJSON(l queue.FlowLimits) flowLimitsJSON {
	return flowLimitsJSON{MaxInFlight: l.MaxInFlight, Rate: l.Rate, Burst: l.Burst, Strategy: string(l.Strategy)}
}

// flowLimitsRequest is the body of PUT /v1/queues/{q}/flow: a field left
// out is 0 (none), the strategy "queue".
type flowLimitsRequest struct {
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	Strategy    *string `json:"strategy"`
}

// flowOverrideJSON is one key's own limits (queue.FlowOverride).
type flowOverrideJSON struct {
	Key         string  `json:"key"`
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	Weight      int     `json:"weight"`
}

func toFlowOverrideJSON(o queue.FlowOverride) flowOverrideJSON {
	return flowOverrideJSON{Key: o.Key, MaxInFlight: o.MaxInFlight, Rate: o.Rate, Burst: o.Burst, Weight: o.Weight}
}

// flowOverrideRequest is the body of PUT .../flow/overrides/{key}; the
// key is the path's.
type flowOverrideRequest struct {
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	Weight      int     `json:"weight"`
}

type flowOverridesJSON struct {
	Overrides  []flowOverrideJSON `json:"overrides"`
	NextCursor string             `json:"next_cursor"`
}

// flowKeyJSON is one flow key's jobs now (queue.FlowKeyStats).
type flowKeyJSON struct {
	Key      string            `json:"key"`
	Pending  int64             `json:"pending"`
	InFlight int64             `json:"in_flight"`
	Override *flowOverrideJSON `json:"override,omitempty"`
}

func toFlowKeyJSON(st queue.FlowKeyStats) flowKeyJSON {
	out := flowKeyJSON{Key: st.Key, Pending: st.Pending, InFlight: st.InFlight}
	if st.Override != nil {
		o := toFlowOverrideJSON(*st.Override)
		out.Override = &o
	}
	return out
}

type flowKeysJSON struct {
	Keys  []flowKeyJSON `json:"keys"`
	Total int64         `json:"total"`
}

// flowKeyDetailJSON is GET .../flow/keys/{key}: the key's counts and the
// ids of its jobs.
type flowKeyDetailJSON struct {
	flowKeyJSON
	PendingJobs    []string `json:"pending_jobs"`
	ProcessingJobs []string `json:"processing_jobs"`
}

// pathFlowKey is the {key} of the path, validated. A key may hold a "/",
// sent as %2F: the router then matches the escaped path, and its
// parameter is unescaped here.
func pathFlowKey(c echo.Context) (string, error) {
	key := c.Param("key")
	if c.Request().URL.RawPath != "" {
		var err error
		if key, err = url.PathUnescape(key); err != nil {
			return "", invalidArg("key", "not a valid escaped path segment: %q", c.Param("key"))
		}
	}
	if err := queue.ValidateFlowKey(key); err != nil {
		return "", invalidArg("key", "want 1 to %d of [A-Za-z0-9._:/=+@-] (a \"/\" escaped as %%2F), got %q", queue.MaxFlowKeyBytes, key)
	}
	return key, nil
}

// intParam reads the integer query parameter name in [lo, hi], def when
// it is not given.
func intParam(c echo.Context, name string, def, lo, hi int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalidArg(name, "must be an integer in [%d, %d], got %q", lo, hi, v)
	}
	return n, nil
}

// getFlow: GET /v1/queues/{queue}/flow; zeros and strategy "queue" when
// it has none.
func (s *Server) getFlow(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	l, err := s.manage.FlowLimits(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toFlowLimitsJSON(l))
}

// putFlow: PUT /v1/queues/{queue}/flow; sets them (creating the queue),
// answers them with their defaults filled.
func (s *Server) putFlow(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	var req flowLimitsRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	l := queue.FlowLimits{MaxInFlight: req.MaxInFlight, Rate: req.Rate, Burst: req.Burst}
	if req.Strategy != nil {
		if *req.Strategy == "" {
			return invalidArg("strategy", "must not be empty: leave strategy out for %q", queue.FlowQueue)
		}
		l.Strategy = queue.FlowStrategy(*req.Strategy)
	}
	if l, err = s.manage.SetFlowLimits(c.Request().Context(), q, l); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toFlowLimitsJSON(l))
}

// deleteFlow: DELETE /v1/queues/{queue}/flow; 204, or 404 for a queue
// never used (it makes none). Overrides are kept.
func (s *Server) deleteFlow(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	if err := s.manage.ClearFlowLimits(c.Request().Context(), q); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// listFlowOverrides: GET /v1/queues/{queue}/flow/overrides?cursor=&limit=.
func (s *Server) listFlowOverrides(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	limit, err := intParam(c, "limit", DefaultFlowKeysPage, 1, queue.MaxFlowKeysPage)
	if err != nil {
		return err
	}
	os, next, err := s.manage.FlowOverrides(c.Request().Context(), q, c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	out := flowOverridesJSON{Overrides: make([]flowOverrideJSON, len(os)), NextCursor: next}
	for i, o := range os {
		out.Overrides[i] = toFlowOverrideJSON(o)
	}
	return writeJSON(c, http.StatusOK, out)
}

// putFlowOverride: PUT /v1/queues/{queue}/flow/overrides/{key}; answers
// the override with its defaults filled (weight 1, the burst of a rate).
func (s *Server) putFlowOverride(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	key, err := pathFlowKey(c)
	if err != nil {
		return err
	}
	var req flowOverrideRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	o, err := s.manage.SetFlowOverride(c.Request().Context(), q, queue.FlowOverride{Key: key,
		MaxInFlight: req.MaxInFlight, Rate: req.Rate, Burst: req.Burst, Weight: req.Weight})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toFlowOverrideJSON(o))
}

// deleteFlowOverride: DELETE /v1/queues/{queue}/flow/overrides/{key};
// 204, whether the key had one or not; 404 for a queue never used.
func (s *Server) deleteFlowOverride(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	key, err := pathFlowKey(c)
	if err != nil {
		return err
	}
	if err := s.manage.DeleteFlowOverride(c.Request().Context(), q, key); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// listFlowKeys: GET /v1/queues/{queue}/flow/keys?offset=&limit=: the keys
// with jobs pending or processing, the most first.
func (s *Server) listFlowKeys(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	limit, err := intParam(c, "limit", DefaultFlowKeysPage, 1, queue.MaxFlowKeysPage)
	if err != nil {
		return err
	}
	offset, err := intParam(c, "offset", 0, 0, maxFlowKeysOffset)
	if err != nil {
		return err
	}
	keys, total, err := s.manage.FlowKeys(c.Request().Context(), q, offset, limit)
	if err != nil {
		return err
	}
	out := flowKeysJSON{Keys: make([]flowKeyJSON, len(keys)), Total: total}
	for i, k := range keys {
		out.Keys[i] = toFlowKeyJSON(k)
	}
	return writeJSON(c, http.StatusOK, out)
}

// maxFlowKeysOffset bounds ?offset of the key listing: an int on every
// platform, far past any count of keys.
const maxFlowKeysOffset = 1<<31 - 1

// getFlowKey: GET /v1/queues/{queue}/flow/keys/{key}?limit=: the key's
// counts, override, and the ids of its pending and processing jobs (at
// most limit of each, the first enqueued first).
func (s *Server) getFlowKey(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	key, err := pathFlowKey(c)
	if err != nil {
		return err
	}
	limit, err := intParam(c, "limit", DefaultFlowKeysPage, 1, queue.MaxFlowKeysPage)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	st, err := s.manage.FlowKey(ctx, q, key)
	if err != nil {
		return err
	}
	pending, processing, err := s.manage.FlowKeyJobs(ctx, q, key, limit)
	if err != nil {
		return err
	}
	out := flowKeyDetailJSON{flowKeyJSON: toFlowKeyJSON(st), PendingJobs: pending, ProcessingJobs: processing}
	if out.PendingJobs == nil {
		out.PendingJobs = []string{}
	}
	if out.ProcessingJobs == nil {
		out.ProcessingJobs = []string{}
	}
	return writeJSON(c, http.StatusOK, out)
}
