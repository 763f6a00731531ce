package api_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// TestRedisGoesAwayAndComesBack: while Redis is down every route that
// needs it answers 503 unavailable (never a 500, and the process lives on);
// once it is back the same server answers again, and no job it accepted
// before is lost.
func TestRedisGoesAwayAndComesBack(t *testing.T) {
	t.Parallel()
	rs := testutil.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	// Fail fast while Redis is away (as serve configures it).
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr(), DialerRetries: 1, MaxRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	b := setup(t, func(sc *setupConfig) { sc.rdb = rdb; sc.api.Logger = slog.Default() })

	var accepted []string
	for range 20 {
		accepted = append(accepted, b.enqueue(t, map[string]any{"queue": "o"}).ID)
	}
	accepted = append(accepted, b.enqueue(t, map[string]any{"queue": "o", "delay": "1h"}).ID)

	rs.Stop()
	for _, req := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/jobs", `{"queue":"o","kind":"k"}`},
		{http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"queue":"o","kind":"k"}]}`},
		{http.MethodGet, "/v1/queues", ``},
		{http.MethodGet, "/v1/queues/o", ``},
		{http.MethodGet, "/v1/queues/o/jobs/" + accepted[0], ``},
		{http.MethodPost, "/v1/queues/o/claim", `{"wait":"1s"}`},
		{http.MethodPost, "/v1/queues/o/pause", ``},
		{http.MethodPost, "/v1/queues/o/reclaim", ``},
		{http.MethodPost, "/v1/queues/o/jobs/" + accepted[0] + "/complete", `{"token":"t"}`},
		{http.MethodGet, "/v1/events?queue=o", ``},
		{http.MethodGet, "/readyz", ``},
	} {
		var body any
		if req.body != "" {
			body = req.body
		}
		r := b.do(t, req.method, req.path, body)
		requireError(t, r, http.StatusServiceUnavailable, "unavailable", "")
		require.Equal(t, "1", r.header.Get("Retry-After"))
	}
	// Bad input is still a 400, not a 503: it is checked before Redis.
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", `{"queue":"o"}`), 400, "invalid_argument", "kind")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", nil).status)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/status", nil).status, "the status reads nothing from Redis")
	require.Equal(t, 0.0, b.scrape(t)["chronoq_store_up"])

	rs.Restart()
	// go-redis, after failed dials, dials again in the background once a
	// second: the server is ready again within about that.
	require.Eventually(t, func() bool { return b.do(t, http.MethodGet, "/readyz", nil).status == http.StatusOK },
		15*time.Second, 50*time.Millisecond)
	accepted = append(accepted, b.enqueue(t, map[string]any{"queue": "o"}).ID)

	// Every job accepted, before and after, is there.
	for _, id := range accepted {
		r := b.do(t, http.MethodGet, "/v1/queues/o/jobs/"+id, nil)
		require.Equal(t, http.StatusOK, r.status, "job %s lost", id)
	}
	st, err := b.client.Stats(b.ctx, "o")
	require.NoError(t, err)
	require.EqualValues(t, 21, st.Pending)
	require.EqualValues(t, 1, st.Scheduled)
	require.False(t, st.Paused)
	require.Len(t, b.claim(t, "o", 100), 21)

	// The event stream works again too.
	s := b.openEvents(t, "?queue=o")
	j := b.enqueue(t, map[string]any{"queue": "o"})
	require.Equal(t, j.ID, s.event().data["id"])
}
