package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type listView struct {
	Jobs       []jobView `json:"jobs"`
	NextCursor string    `json:"next_cursor"`
}

// kill makes a dead job of kind in q.
func (b *testBundle) kill(t *testing.T, q, kind string) jobView {
	t.Helper()
	j := b.enqueue(t, map[string]any{"queue": q, "kind": kind, "max_attempts": 1})
	var tok string
	for _, c := range b.claim(t, q, 1000) {
		if c.ID == j.ID {
			tok = c.Token
		}
	}
	require.NotEmpty(t, tok)
	r := b.do(t, http.MethodPost, "/v1/queues/"+q+"/jobs/"+j.ID+"/fail", map[string]any{"token": tok, "error": "boom"})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "dead", decodeAs[jobView](t, r).Status)
	return j
}

func TestListJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for range 5 {
		ids = append(ids, b.enqueue(t, map[string]any{"queue": "l"}).ID)
	}
	b.enqueue(t, map[string]any{"queue": "l", "delay": "1m"})

	var got []string
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5)
		r := b.do(t, http.MethodGet, "/v1/queues/l/jobs?status=pending&limit=2&cursor="+cursor, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		l := decodeAs[listView](t, r)
		require.LessOrEqual(t, len(l.Jobs), 2)
		for _, j := range l.Jobs {
			require.Equal(t, "pending", j.Status)
			got = append(got, j.ID)
		}
		if l.NextCursor == "" {
			break
		}
		cursor = l.NextCursor
	}
	require.Equal(t, ids, got) // next to be claimed first

	r := b.do(t, http.MethodGet, "/v1/queues/l/jobs?status=scheduled", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, decodeAs[listView](t, r).Jobs, 1)
	r = b.do(t, http.MethodGet, "/v1/queues/none/jobs?status=dead", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"jobs":[],"next_cursor":""}`, string(r.body))

	for query, field := range map[string]string{
		"":                              "status",
		"?status=canceled":              "status",
		"?status=nope":                  "status",
		"?status=pending&limit=0":       "limit",
		"?status=pending&limit=1001":    "limit",
		"?status=pending&limit=ten":     "limit",
		"?status=pending&cursor=%7Bbad": "cursor",
	} {
		requireError(t, b.do(t, http.MethodGet, "/v1/queues/l/jobs"+query, nil), 400, "invalid_argument", field)
	}
}

func TestRescheduleJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "rs", "delay": "1h"})
	path := "/v1/queues/rs/jobs/" + j.ID

	r := b.do(t, http.MethodPatch, path, map[string]any{"delay": "10m"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := decodeAs[jobView](t, r)
	require.Equal(t, j.ID, got.ID)
	require.Equal(t, "scheduled", got.Status)
	requireSoonAfter(t, "2030-01-02T03:14:05.000Z", got.RunAt, "Redis's now + 10 m")

	r = b.do(t, http.MethodPatch, path, map[string]any{"run_at": "2000-01-01T00:00:00Z"}) // past: now
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "pending", decodeAs[jobView](t, r).Status)

	requireError(t, b.do(t, http.MethodPatch, path, `{}`), 400, "invalid_argument", "run_at")
	requireError(t, b.do(t, http.MethodPatch, path, `{"delay":"1s","run_at":"2031-01-01T00:00:00Z"}`), 400, "invalid_argument", "delay")
	requireError(t, b.do(t, http.MethodPatch, path, `{"delay":"-1s"}`), 400, "invalid_argument", "delay")
	requireError(t, b.do(t, http.MethodPatch, path, `{"run_at":"x"}`), 400, "invalid_argument", "run_at")
	requireError(t, b.do(t, http.MethodPatch, path, `{"priority":1}`), 400, "invalid_argument", "priority")
	requireError(t, b.do(t, http.MethodPatch, "/v1/queues/rs/jobs/nosuch", `{"delay":"1s"}`), 404, "not_found", "")

	b.claim(t, "rs", 1)
	requireError(t, b.do(t, http.MethodPatch, path, `{"delay":"1s"}`), 409, "conflict", "")
}

func TestCancelJob(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("scheduled or pending: canceled", func(t *testing.T) {
		for _, delay := range []string{"0s", "1h"} {
			j := b.enqueue(t, map[string]any{"queue": "cx", "delay": delay})
			r := b.do(t, http.MethodDelete, "/v1/queues/cx/jobs/"+j.ID, nil)
			require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
			require.Equal(t, "canceled", decodeAs[jobView](t, r).Status)
		}
		require.Empty(t, b.claim(t, "cx", 10))
	})

	t.Run("processing: a cancel request the worker sees", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "cp"})
		tok := b.claim(t, "cp", 1)[0].Token
		r := b.do(t, http.MethodDelete, "/v1/queues/cp/jobs/"+j.ID, nil)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "processing", decodeAs[jobView](t, r).Status)

		r = b.do(t, http.MethodPost, "/v1/queues/cp/jobs/"+j.ID+"/heartbeat", map[string]any{"token": tok})
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, true, r.object(t)["cancel_requested"])

		requireError(t, b.do(t, http.MethodPost, "/v1/queues/cp/jobs/"+j.ID+"/cancel", map[string]any{"token": "stale"}), 409, "lease_lost", "")
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/cp/jobs/"+j.ID+"/cancel", `{}`), 400, "invalid_argument", "token")
		r = b.do(t, http.MethodPost, "/v1/queues/cp/jobs/"+j.ID+"/cancel", map[string]any{"token": tok})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, "canceled", decodeAs[jobView](t, r).Status)
	})

	t.Run("dead or completed: deleted", func(t *testing.T) {
		j := b.kill(t, "cd", "k")
		r := b.do(t, http.MethodDelete, "/v1/queues/cd/jobs/"+j.ID, nil)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "dead", decodeAs[jobView](t, r).Status)
		requireError(t, b.do(t, http.MethodGet, "/v1/queues/cd/jobs/"+j.ID, nil), 404, "not_found", "")
		requireError(t, b.do(t, http.MethodDelete, "/v1/queues/cd/jobs/"+j.ID, nil), 404, "not_found", "")
	})
}

func TestRetryJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := b.kill(t, "rt", "k")
	r := b.do(t, http.MethodPost, "/v1/queues/rt/jobs/"+dead.ID+"/retry", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := decodeAs[jobView](t, r)
	require.Equal(t, "pending", got.Status)
	require.Equal(t, 0, got.Attempts)

	sched := b.enqueue(t, map[string]any{"queue": "rt", "delay": "1h"})
	r = b.do(t, http.MethodPost, "/v1/queues/rt/jobs/"+sched.ID+"/retry", `{}`)
	require.Equal(t, http.StatusOK, r.status)
	pending := decodeAs[jobView](t, r)
	require.Equal(t, "pending", pending.Status)

	// A pending job is answered as it is: a retried request (its answer
	// lost) is harmless, and nothing changes, not even its place in line.
	r = b.do(t, http.MethodPost, "/v1/queues/rt/jobs/"+sched.ID+"/retry", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, pending, decodeAs[jobView](t, r))
	r = b.do(t, http.MethodPost, "/v1/queues/rt/jobs/"+dead.ID+"/retry", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, got, decodeAs[jobView](t, r))
	q, err := b.client.Stats(b.ctx, "rt")
	require.NoError(t, err)
	require.EqualValues(t, 2, q.Pending)

	b.claim(t, "rt", 10)
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/rt/jobs/"+sched.ID+"/retry", nil), 409, "conflict", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/rt/jobs/nosuch/retry", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/rt/jobs/"+sched.ID+"/retry", `{"now":true}`), 400, "invalid_argument", "now")
}

func TestDeadSet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.kill(t, "ds", "a")
	}
	for range 2 {
		b.kill(t, "ds", "b")
	}
	b.clock.Advance(time.Second)

	r := b.do(t, http.MethodPost, "/v1/queues/ds/dead/retry", map[string]any{"kind": "a"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.JSONEq(t, `{"requeued":3}`, string(r.body))
	r = b.do(t, http.MethodGet, "/v1/queues/ds", nil)
	require.Equal(t, float64(3), r.object(t)["pending"])
	require.Equal(t, float64(2), r.object(t)["dead"])

	r = b.do(t, http.MethodDelete, "/v1/queues/ds/dead?kind=a", nil)
	require.JSONEq(t, `{"deleted":0}`, string(r.body))
	r = b.do(t, http.MethodDelete, "/v1/queues/ds/dead", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"deleted":2}`, string(r.body))
	r = b.do(t, http.MethodPost, "/v1/queues/ds/dead/retry", nil)
	require.JSONEq(t, `{"requeued":0}`, string(r.body))

	requireError(t, b.do(t, http.MethodPost, "/v1/queues/ds/dead/retry", `{"kind":"a b"}`), 400, "invalid_argument", "kind")
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/ds/dead/retry", `{"kinds":["a"]}`), 400, "invalid_argument", "kinds")
	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/ds/dead?kind=a%20b", nil), 400, "invalid_argument", "kind")
}
