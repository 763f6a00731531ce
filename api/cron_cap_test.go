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
