package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/v1/queues", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"queues":[]}`, string(r.body))

	b.enqueue(t, map[string]any{"queue": "b"})
	b.enqueue(t, map[string]any{"queue": "a", "delay": "1m"})
	b.enqueue(t, map[string]any{"queue": "a"})
	b.clock.Advance(2 * time.Second)

	r = b.do(t, http.MethodGet, "/v1/queues", nil)
	require.Equal(t, http.StatusOK, r.status)
	// The ages and due times are Redis's, whose clock runs a little ahead
	// of the fake one: they are checked, then set to the fake clock's.
	var body map[string][]map[string]any
	require.NoError(t, json.Unmarshal(r.body, &body))
	for _, q := range body["queues"] {
		age, _ := q["oldest_pending_age_ms"].(float64)
		require.InDelta(t, 1500, age, 500, "pending for 2 s by the fake clock")
		q["oldest_pending_age_ms"] = 2000
	}
	requireSoonAfter(t, "2030-01-02T03:05:05.000Z", body["queues"][0]["next_run_at"])
	body["queues"][0]["next_run_at"] = "2030-01-02T03:05:05.000Z"
	normalized, err := json.Marshal(body)
	require.NoError(t, err)
	require.JSONEq(t, `{"queues":[
		{"name":"a","paused":false,"scheduled":1,"pending":1,"processing":0,"dead":0,
		 "completed_total":0,"failed_total":0,"retried_total":0,"reclaimed_total":0,"enqueued_total":2,
		 "promoted_total":0,"dead_total":0,"oldest_pending_age_ms":2000,"next_run_at":"2030-01-02T03:05:05.000Z"},
		{"name":"b","paused":false,"scheduled":0,"pending":1,"processing":0,"dead":0,
		 "completed_total":0,"failed_total":0,"retried_total":0,"reclaimed_total":0,"enqueued_total":1,
		 "promoted_total":0,"dead_total":0,"oldest_pending_age_ms":2000,"next_run_at":null}]}`, string(normalized))

	r = b.do(t, http.MethodGet, "/v1/queues/b", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "b", r.object(t)["name"])
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/never", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/NO", nil), 400, "invalid_argument", "queue")
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, map[string]any{"queue": "p"})
	r := b.do(t, http.MethodPost, "/v1/queues/p/pause", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, true, r.object(t)["paused"])
	require.Empty(t, b.claim(t, "p", 1))
	// Still accepting.
	b.enqueue(t, map[string]any{"queue": "p"})

	r = b.do(t, http.MethodPost, "/v1/queues/p/resume", `{}`)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, false, r.object(t)["paused"])
	require.Len(t, b.claim(t, "p", 5), 2)

	requireError(t, b.do(t, http.MethodPost, "/v1/queues/p/pause", `{"x":1}`), 400, "invalid_argument", "x")
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/P/resume", nil), 400, "invalid_argument", "queue")
}

func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/never", nil), 404, "not_found", "")
	b.enqueue(t, map[string]any{"queue": "d", "delay": "1h"})
	b.enqueue(t, map[string]any{"queue": "d"})
	held := b.claim(t, "d", 1)[0]
	gone := b.enqueue(t, map[string]any{"queue": "d"})

	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/d", nil), 409, "queue_busy", "")
	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/d?force=yes", nil), 400, "invalid_argument", "force")
	r := b.do(t, http.MethodDelete, "/v1/queues/d?force=true", nil)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	require.Empty(t, r.body)

	requireError(t, b.do(t, http.MethodGet, "/v1/queues/d", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/d/jobs/"+gone.ID, nil), 404, "not_found", "")
	r = b.do(t, http.MethodGet, "/v1/queues", nil)
	require.JSONEq(t, `{"queues":[]}`, string(r.body))
	// The worker of a job of the deleted queue: 404, never a 2xx or 5xx.
	r = b.do(t, http.MethodPost, "/v1/queues/d/jobs/"+held.ID+"/complete", map[string]any{"token": held.Token})
	requireError(t, r, 404, "not_found", "")
	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/d", nil), 404, "not_found", "")
}

func TestReclaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "r", "visibility": "1s"})
	old := b.claim(t, "r", 1)[0].Token

	r := b.do(t, http.MethodPost, "/v1/queues/r/reclaim", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"reclaimed":[]}`, string(r.body))

	b.clock.Advance(2 * time.Second)
	r = b.do(t, http.MethodPost, "/v1/queues/r/reclaim", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"reclaimed":["`+j.ID+`"]}`, string(r.body))

	// The old worker can change nothing any more.
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/r/jobs/"+j.ID+"/complete", map[string]any{"token": old}), 409, "lease_lost", "")
	require.Len(t, b.claim(t, "r", 1), 1)
}

func TestGetJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "g"})
	r := b.do(t, http.MethodGet, "/v1/queues/g/jobs/"+j.ID, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, j.ID, decodeAs[jobView](t, r).ID)
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/g/jobs/0192f3c4a1b27c9e8d1f0a3b4c5d6e7f", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/other/jobs/"+j.ID, nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/g/jobs/a.b", nil), 400, "invalid_argument", "id")
}
