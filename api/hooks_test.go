package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
)

func withHooks(g dispatch.Guard) func(*setupConfig) {
	return func(sc *setupConfig) { sc.hooks = &g }
}

// POST, GET, PUT and DELETE /v1/webhooks: a subscription's life, its
// secrets kept or rotated, its filters answered canonical.
func TestWebhookRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, withHooks(dispatch.Guard{}))

	r := b.do(t, http.MethodGet, "/v1/webhooks", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Empty(t, r.object(t)["webhooks"])

	r = b.do(t, http.MethodPost, "/v1/webhooks", map[string]any{"url": "https://example.com/events",
		"queues": []string{"b", "a", "b"}, "events": []string{"job.dead"}, "timeout": "5s", "headers": map[string]string{"X-Team": "a"}})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	sub := r.object(t)
	id := sub["id"].(string)
	require.Len(t, id, 16)
	require.Equal(t, []any{"a", "b"}, sub["queues"])
	require.Equal(t, []any{}, sub["kinds"])
	require.Equal(t, []any{"job.dead"}, sub["events"])
	require.Equal(t, "5s", sub["timeout"])
	require.EqualValues(t, 0, sub["pending"])
	secrets := sub["secrets"].([]any)
	require.Len(t, secrets, 1)
	require.True(t, strings.HasPrefix(secrets[0].(string), "whsec_"))

	r = b.do(t, http.MethodGet, "/v1/webhooks/"+id, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, sub, r.object(t))

	// An update without secrets keeps them; with two, both sign.
	r = b.do(t, http.MethodPut, "/v1/webhooks/"+id, map[string]any{"url": "https://example.com/v2"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, secrets, r.object(t)["secrets"])
	require.Equal(t, []any{}, r.object(t)["queues"], "the filters are replaced: every queue")
	require.Equal(t, "10s", r.object(t)["timeout"])
	next := dispatch.NewSecret()
	r = b.do(t, http.MethodPut, "/v1/webhooks/"+id, map[string]any{"url": "https://example.com/v2", "secrets": []any{secrets[0], next}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, []any{secrets[0], next}, r.object(t)["secrets"])

	r = b.do(t, http.MethodGet, "/v1/webhooks", nil)
	list := r.object(t)["webhooks"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, "https://example.com/v2", list[0].(map[string]any)["url"])

	r = b.do(t, http.MethodGet, "/v1/webhooks/"+id+"/dead", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Empty(t, r.object(t)["deliveries"])
	r = b.do(t, http.MethodPost, "/v1/webhooks/"+id+"/dead/retry", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.EqualValues(t, 0, r.object(t)["retried"])

	r = b.do(t, http.MethodDelete, "/v1/webhooks/"+id, nil)
	require.Equal(t, http.StatusNoContent, r.status)
	for _, p := range []string{"", "/dead"} {
		requireError(t, b.do(t, http.MethodGet, "/v1/webhooks/"+id+p, nil), http.StatusNotFound, "not_found", "")
	}
	requireError(t, b.do(t, http.MethodDelete, "/v1/webhooks/"+id, nil), http.StatusNotFound, "not_found", "")
	requireError(t, b.do(t, http.MethodPut, "/v1/webhooks/"+id, map[string]any{"url": "https://example.com/"}),
		http.StatusNotFound, "not_found", "")
}

// Bad input is a 400 naming the field, with a JSON error; the cap of
// subscriptions is a 409.
func TestWebhookBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, withHooks(dispatch.Guard{}))
	ok := "https://example.com/e"
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "url"},
		{map[string]any{"url": "http://127.0.0.1/"}, "url"},
		{map[string]any{"url": "http://169.254.169.254/latest"}, "url"},
		{map[string]any{"url": ok, "events": []string{"job.finished"}}, "events[0]"},
		{map[string]any{"url": ok, "queues": []string{"Not A Queue"}}, "queues[0]"},
		{map[string]any{"url": ok, "timeout": "2m"}, "timeout"},
		{map[string]any{"url": ok, "timeout": "soon"}, "timeout"},
		{map[string]any{"url": ok, "secrets": []string{"nope"}}, "secrets[0]"},
		{map[string]any{"url": ok, "headers": map[string]string{"Content-Type": "text/plain"}}, "headers"},
		{map[string]any{"url": ok, "colour": "red"}, "colour"},
	} {
		r := b.do(t, http.MethodPost, "/v1/webhooks", c.body)
		requireError(t, r, http.StatusBadRequest, "invalid_argument", c.field)
	}
	requireError(t, b.do(t, http.MethodPost, "/v1/webhooks", "[]"), http.StatusBadRequest, "invalid_argument", "")

	r := b.do(t, http.MethodPost, "/v1/webhooks", map[string]any{"url": ok})
	require.Equal(t, http.StatusCreated, r.status)
	id := r.object(t)["id"].(string)
	requireError(t, b.do(t, http.MethodGet, "/v1/webhooks/"+id+"/dead?limit=0", nil), http.StatusBadRequest, "invalid_argument", "limit")
	requireError(t, b.do(t, http.MethodPost, "/v1/webhooks/"+id+"/dead/retry", map[string]any{"ids": "all"}),
		http.StatusBadRequest, "invalid_argument", "ids")
	requireError(t, b.do(t, http.MethodGet, "/v1/webhooks/nope", nil), http.StatusNotFound, "not_found", "")

	for range dispatch.MaxSubscriptions - 1 {
		r := b.do(t, http.MethodPost, "/v1/webhooks", map[string]any{"url": ok, "queues": []string{"q"}})
		require.Equal(t, http.StatusCreated, r.status, string(r.body))
	}
	requireError(t, b.do(t, http.MethodPost, "/v1/webhooks", map[string]any{"url": ok}), http.StatusConflict, "conflict", "")
}
