package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/dispatch"
)

// HookStore keeps the event webhook subscriptions: the /v1/webhooks
// routes, registered only when [Config.Hooks] is set (*dispatch.Hooks is
// one). Errors: dispatch.ErrNoSubscription (404),
// dispatch.ErrTooManySubscribers (409), a *queue.FieldError naming a bad
// field (400).
type HookStore interface {
	Create(ctx context.Context, s dispatch.Subscription) (dispatch.Subscription, error)
	List(ctx context.Context) ([]dispatch.Subscription, error)
	Get(ctx context.Context, id string) (dispatch.Subscription, error)
	Update(ctx context.Context, id string, s dispatch.Subscription) (dispatch.Subscription, error)
	Delete(ctx context.Context, id string) error
	Backlogs(ctx context.Context, ids []string) (pending, dead []int64, err error)
	Dead(ctx context.Context, id string, limit int) ([]dispatch.DeadDelivery, error)
	Redrive(ctx context.Context, id string, ids []string) (int, error)
}

var _ HookStore = (*dispatch.Hooks)(nil)

// subscriptionRequest is the body of POST /v1/webhooks and PUT
// /v1/webhooks/{id}.
type subscriptionRequest struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Timeout *string           `json:"timeout"`
	Queues  []string          `json:"queues"`
	Kinds   []string          `json:"kinds"`
	Events  []string          `json:"events"`
	Secrets []string          `json:"secrets"`
}

// subscriptionJSON is a subscription as answered.
type subscriptionJSON struct {
	ID        string            `json:"id"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Timeout   string            `json:"timeout"`
	Queues    []string          `json:"queues"`
	Kinds     []string          `json:"kinds"`
	Events    []string          `json:"events"`
	Secrets   []string          `json:"secrets"`
	CreatedAt time.Time         `json:"created_at"`
	Pending   int64             `json:"pending"`
	Dead      int64             `json:"dead"`
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func toSubscriptionJSON(s dispatch.Subscription, pending, dead int64) subscriptionJSON {
	h := s.Headers
	if h == nil {
		h = map[string]string{}
	}
	return subscriptionJSON{ID: s.ID, URL: s.URL, Headers: h, Timeout: wire.Duration(s.Timeout), Queues: orEmpty(s.Queues),
		Kinds: orEmpty(s.Kinds), Events: orEmpty(s.Events), Secrets: orEmpty(s.Secrets), CreatedAt: s.CreatedAt.UTC(),
		Pending: pending, Dead: dead}
}

func hookErr(err error) error {
	switch {
	case errors.Is(err, dispatch.ErrNoSubscription):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error(), err: err}
	case errors.Is(err, dispatch.ErrTooManySubscribers):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error(), err: err}
	}
	return err
}

func (s *Server) hookRoutes() []route {
	return []route{
		{http.MethodPost, "/v1/webhooks", s.createSubscription, false},
		{http.MethodGet, "/v1/webhooks", s.listSubscriptions, false},
		{http.MethodGet, "/v1/webhooks/:id", s.getSubscription, false},
		{http.MethodPut, "/v1/webhooks/:id", s.updateSubscription, false},
		{http.MethodDelete, "/v1/webhooks/:id", s.deleteSubscription, false},
		{http.MethodGet, "/v1/webhooks/:id/dead", s.listDeadDeliveries, false},
		{http.MethodPost, "/v1/webhooks/:id/dead/retry", s.retryDeadDeliveries, false},
	}
}

func (s *Server) decodeSubscription(c echo.Context) (dispatch.Subscription, error) {
	var req subscriptionRequest
	if err := s.decode(c, &req, false); err != nil {
		return dispatch.Subscription{}, err
	}
	out := dispatch.Subscription{URL: req.URL, Headers: req.Headers, Queues: req.Queues, Kinds: req.Kinds,
		Events: req.Events, Secrets: req.Secrets}
	if req.Timeout != nil {
		d, err := parseDuration("timeout", *req.Timeout, dispatch.MinTimeout, dispatch.MaxHookTimeout)
		if err != nil {
			return out, err
		}
		out.Timeout = d
	}
	return out, nil
}

// answerSubscription writes sub, just read or written, with its backlog.
func (s *Server) answerSubscription(c echo.Context, status int, sub dispatch.Subscription) error {
	pending, dead, err := s.cfg.Hooks.Backlogs(c.Request().Context(), []string{sub.ID})
	if err != nil {
		return err
	}
	return writeJSON(c, status, toSubscriptionJSON(sub, pending[0], dead[0]))
}

// createSubscription: POST /v1/webhooks; 201 with the subscription and
// its secrets.
func (s *Server) createSubscription(c echo.Context) error {
	sub, err := s.decodeSubscription(c)
	if err != nil {
		return err
	}
	out, err := s.cfg.Hooks.Create(c.Request().Context(), sub)
	if err != nil {
		return hookErr(err)
	}
	return s.answerSubscription(c, http.StatusCreated, out)
}

// listSubscriptions: GET /v1/webhooks.
func (s *Server) listSubscriptions(c echo.Context) error {
	subs, err := s.cfg.Hooks.List(c.Request().Context())
	if err != nil {
		return err
	}
	ids := make([]string, len(subs))
	for i, sub := range subs {
		ids[i] = sub.ID
	}
	pending, dead, err := s.cfg.Hooks.Backlogs(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	out := make([]subscriptionJSON, len(subs))
	for i, sub := range subs {
		out[i] = toSubscriptionJSON(sub, pending[i], dead[i])
	}
	return writeJSON(c, http.StatusOK, map[string]any{"webhooks": out})
}

// getSubscription: GET /v1/webhooks/{id}.
func (s *Server) getSubscription(c echo.Context) error {
	sub, err := s.cfg.Hooks.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return hookErr(err)
	}
	return s.answerSubscription(c, http.StatusOK, sub)
}

// updateSubscription: PUT /v1/webhooks/{id}; secrets left out are kept.
func (s *Server) updateSubscription(c echo.Context) error {
	sub, err := s.decodeSubscription(c)
	if err != nil {
		return err
	}
	out, err := s.cfg.Hooks.Update(c.Request().Context(), c.Param("id"), sub)
	if err != nil {
		return hookErr(err)
	}
	return s.answerSubscription(c, http.StatusOK, out)
}

// deleteSubscription: DELETE /v1/webhooks/{id}; 204.
func (s *Server) deleteSubscription(c echo.Context) error {
	if err := s.cfg.Hooks.Delete(c.Request().Context(), c.Param("id")); err != nil {
		return hookErr(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// listDeadDeliveries: GET /v1/webhooks/{id}/dead?limit=N, the newest
// first.
func (s *Server) listDeadDeliveries(c echo.Context) error {
	limit := 100
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > dispatch.MaxHookDead {
			return invalidArg("limit", "must be an integer in [1, %d], got %q", dispatch.MaxHookDead, v)
		}
		limit = n
	}
	dl, err := s.cfg.Hooks.Dead(c.Request().Context(), c.Param("id"), limit)
	if err != nil {
		return hookErr(err)
	}
	return writeJSON(c, http.StatusOK, map[string]any{"deliveries": dl})
}

// retryDeadDeliveries: POST /v1/webhooks/{id}/dead/retry, body {"ids":
// [...]} (none or empty: every dead delivery); answers how many were
// moved.
func (s *Server) retryDeadDeliveries(c echo.Context) error {
	var req struct {
		IDs []string `json:"ids"`
	}
	if err := s.decode(c, &req, true); err != nil {
		return err
	}
	if len(req.IDs) > dispatch.MaxHookDead {
		return invalidArg("ids", "at most %d, got %d", dispatch.MaxHookDead, len(req.IDs))
	}
	n, err := s.cfg.Hooks.Redrive(c.Request().Context(), c.Param("id"), req.IDs)
	if err != nil {
		return hookErr(err)
	}
	return writeJSON(c, http.StatusOK, map[string]any{"retried": n})
}
