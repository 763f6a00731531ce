package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
)

// A new cron entry past the store's cap is a 409 naming the cap; a
// replaced one is not refused.
func TestCronMaxEntries(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) {
		sc.realCron = true
		sc.cronOpts = []cron.StoreOption{cron.WithMaxEntries(2)}
	})
	entry := map[string]any{"schedule": "@hourly", "kind": "k"}
	for _, name := range []string{"a", "b"} {
		r := b.do(t, http.MethodPut, "/v1/cron/"+name, entry)
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	}
	r := b.do(t, http.MethodPut, "/v1/cron/c", entry)
	requireError(t, r, http.StatusConflict, "conflict", "")
	require.Contains(t, string(r.body), "cap of 2 entries")
	require.Contains(t, string(r.body), "--max-cron-entries")
	r = b.do(t, http.MethodPut, "/v1/cron/a", map[string]any{"schedule": "@daily", "kind": "k"})
	require.Equal(t, http.StatusOK, r.status, "replacing at the cap; body: %s", r.body)
}

// GET /v1/cron pages as the job lists do.
func TestCronListPages(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.realCron = true })
	for _, name := range []string{"c", "a", "b"} {
		r := b.do(t, http.MethodPut, "/v1/cron/"+name, map[string]any{"schedule": "@hourly", "kind": "k"})
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	}
	type page struct {
		Entries []struct {
			Name string `json:"name"`
		} `json:"entries"`
		NextCursor string `json:"next_cursor"`
	}
	var names []string
	path := "/v1/cron?limit=2"
	for range 3 {
		r := b.do(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		p := decodeAs[page](t, r)
		for _, e := range p.Entries {
			names = append(names, e.Name)
		}
		if p.NextCursor == "" {
			break
		}
		path = "/v1/cron?limit=2&cursor=" + p.NextCursor
	}
	require.Equal(t, []string{"a", "b", "c"}, names)
	r := b.do(t, http.MethodGet, "/v1/cron", nil)
	require.Len(t, decodeAs[page](t, r).Entries, 3, "default limit")
	requireError(t, b.do(t, http.MethodGet, "/v1/cron?limit=1001", nil), http.StatusBadRequest, "invalid_argument", "limit")
	requireError(t, b.do(t, http.MethodGet, "/v1/cron?limit=0", nil), http.StatusBadRequest, "invalid_argument", "limit")
	requireError(t, b.do(t, http.MethodGet, "/v1/cron?cursor=%7Bx%7D", nil), http.StatusBadRequest, "invalid_argument", "cursor")
}
