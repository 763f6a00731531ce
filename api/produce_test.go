package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/names"
)

const fakeNow = "2030-01-02T03:04:05.000Z" // testutil.FakeClock's instant

func TestEnqueueJobResource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{
		"queue": "mail", "kind": "email", "payload": map[string]any{"to": "a@example.com"}, "delay": "5m"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	got := r.object(t)
	asAnswered := r.object(t)
	id, _ := got["id"].(string)
	require.Len(t, id, names.IDLen)
	require.Equal(t, "/v1/queues/mail/jobs/"+id, r.header.Get("Location"))
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	// Exactly the Job resource of API.md. Its times are Redis's.
	requireSoonAfter(t, fakeNow, got["enqueued_at"])
	requireSoonAfter(t, "2030-01-02T03:09:05.000Z", got["run_at"], "a delay counts from Redis's now")
	got["enqueued_at"], got["run_at"] = fakeNow, "2030-01-02T03:09:05.000Z"
	require.Equal(t, map[string]any{
		"id":           id,
		"queue":        "mail",
		"kind":         "email",
		"payload":      map[string]any{"to": "a@example.com"},
		"status":       "scheduled",
		"attempts":     float64(0),
		"fence":        float64(0),
		"max_attempts": float64(3),
		"backoff":      map[string]any{"initial": "1s", "factor": float64(2), "max": "1h", "jitter": 0.2},
		"visibility":   "30s",
		"enqueued_at":  fakeNow,
		"run_at":       "2030-01-02T03:09:05.000Z",
		"claimed_at":   nil, "lease_until": nil, "completed_at": nil,
		"result": nil, "last_error": nil, "idempotency_key": nil, "labels": []any{},
	}, got)

	// The Location answers the same job.
	r = b.do(t, http.MethodGet, "/v1/queues/mail/jobs/"+id, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, asAnswered, r.object(t))
}

func TestEnqueueOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("defaults: queue default, payload {}, due now", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"kind": "k"})
		require.Equal(t, "default", j.Queue)
		require.JSONEq(t, `{}`, string(j.Payload))
		require.Equal(t, "pending", j.Status)
		requireSoonAfter(t, fakeNow, j.RunAt)
	})
	t.Run("run_at in the past means now", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"run_at": "2001-01-01T00:00:00Z"})
		require.Equal(t, "pending", j.Status)
		requireSoonAfter(t, fakeNow, j.RunAt)
	})
	t.Run("run_at ahead, any zone, shown as its millisecond", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"run_at": "2030-01-02T05:04:05.0001+01:00"})
		require.Equal(t, "scheduled", j.Status)
		require.Equal(t, "2030-01-02T04:04:05.000Z", *j.RunAt)
	})
	t.Run("every option", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "q.1", "kind": "a:b", "payload": []int{1, 2}, "delay": "1m30s",
			"max_attempts": 7, "backoff": map[string]any{"initial": "250ms", "factor": 3}, "visibility": "2m",
			"idempotency_key": "k-1", "result_ttl": "1h"})
		require.Equal(t, 7, j.MaxAttempts)
		require.Equal(t, "2m", j.Visibility)
		require.Equal(t, "k-1", *j.IdempotencyKey)
		requireSoonAfter(t, "2030-01-02T03:05:35.000Z", j.RunAt, "a delay counts from Redis's now")
		got, err := b.client.Get(b.ctx, "q.1", j.ID)
		require.NoError(t, err)
		require.Equal(t, 250*time.Millisecond, got.Backoff.Initial)
		require.Equal(t, 3.0, got.Backoff.Factor)
		require.Equal(t, time.Hour, got.Backoff.Max) // the default
		require.Equal(t, time.Hour, got.ResultTTL)
	})
	t.Run("null is a field left out", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"kind": "k", "queue": nil, "payload": nil, "run_at": nil, "delay": nil,
			"max_attempts": nil, "backoff": map[string]any{"initial": nil, "factor": nil, "max": nil, "jitter": nil},
			"visibility": nil, "idempotency_key": nil, "result_ttl": nil})
		require.Equal(t, "default", j.Queue)
		require.JSONEq(t, `{}`, string(j.Payload))
		require.Equal(t, 3, j.MaxAttempts)
		require.Equal(t, "30s", j.Visibility)
		require.Nil(t, j.IdempotencyKey)
		j = b.enqueue(t, map[string]any{"kind": "k", "backoff": nil})
		require.Equal(t, "pending", j.Status)
		r := b.do(t, http.MethodPost, "/v1/queues/default/claim", map[string]any{"wait": nil, "max": nil, "visibility": nil})
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.Len(t, decodeAs[jobsView](t, r).Jobs, 1)
	})
	t.Run("queue from the path", func(t *testing.T) {
		r := b.do(t, http.MethodPost, "/v1/queues/pathq/jobs", map[string]any{"kind": "k"})
		require.Equal(t, http.StatusCreated, r.status)
		require.Equal(t, "pathq", decodeAs[jobView](t, r).Queue)
		r = b.do(t, http.MethodPost, "/v1/queues/pathq/jobs", map[string]any{"kind": "k", "queue": "pathq"})
		require.Equal(t, http.StatusCreated, r.status)
		r = b.do(t, http.MethodPost, "/v1/queues/pathq/jobs", map[string]any{"kind": "k", "queue": "other"})
		requireError(t, r, http.StatusBadRequest, "invalid_argument", "queue")
		r = b.do(t, http.MethodPost, "/v1/queues/pathq/jobs", map[string]any{"kind": "k", "queue": ""})
		requireError(t, r, http.StatusBadRequest, "invalid_argument", "queue")
		r = b.do(t, http.MethodPost, "/v1/queues/Bad/jobs", map[string]any{"kind": "k"})
		requireError(t, r, http.StatusBadRequest, "invalid_argument", "queue")
	})
}

func TestEnqueueInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.queue.MaxPayloadBytes = 100 })
	for _, tt := range []struct {
		name   string
		body   string
		status int
		code   string
		field  string
	}{
		{"no kind", `{}`, 400, "invalid_argument", "kind"},
		{"bad kind", `{"kind":"no spaces"}`, 400, "invalid_argument", "kind"},
		{"bad queue", `{"kind":"k","queue":"{x}"}`, 400, "invalid_argument", "queue"},
		{"empty queue", `{"kind":"k","queue":""}`, 400, "invalid_argument", "queue"},
		{"unknown field", `{"kind":"k","dealy":"1s"}`, 400, "invalid_argument", "dealy"},
		{"a field name in another case", `{"kind":"k","Delay":"1s"}`, 400, "invalid_argument", "Delay"},
		{"a nested field name in another case", `{"kind":"k","backoff":{"Initial":"1s"}}`, 400, "invalid_argument", "backoff.Initial"},
		{"unknown nested field", `{"kind":"k","backoff":{"initail":"1s"}}`, 400, "invalid_argument", "backoff.initail"},
		{"kind not a string", `{"kind":5}`, 400, "invalid_argument", "kind"},
		{"max_attempts not an integer", `{"kind":"k","max_attempts":1.5}`, 400, "invalid_argument", "max_attempts"},
		{"max_attempts 0", `{"kind":"k","max_attempts":0}`, 400, "invalid_argument", "max_attempts"},
		{"max_attempts too many", `{"kind":"k","max_attempts":1001}`, 400, "invalid_argument", "max_attempts"},
		{"delay negative", `{"kind":"k","delay":"-1s"}`, 400, "invalid_argument", "delay"},
		{"delay a number", `{"kind":"k","delay":5}`, 400, "invalid_argument", "delay"},
		{"delay not a duration", `{"kind":"k","delay":"soon"}`, 400, "invalid_argument", "delay"},
		{"delay and run_at", `{"kind":"k","delay":"0s","run_at":"2030-01-01T00:00:00Z"}`, 400, "invalid_argument", "delay"},
		{"run_at not RFC 3339", `{"kind":"k","run_at":"tomorrow"}`, 400, "invalid_argument", "run_at"},
		{"run_at too far", `{"kind":"k","run_at":"2099-01-01T00:00:00Z"}`, 400, "invalid_argument", "run_at"},
		{"visibility 0", `{"kind":"k","visibility":"0s"}`, 400, "invalid_argument", "visibility"},
		{"visibility too long", `{"kind":"k","visibility":"25h"}`, 400, "invalid_argument", "visibility"},
		{"result_ttl negative", `{"kind":"k","result_ttl":"-1s"}`, 400, "invalid_argument", "result_ttl"},
		{"backoff factor", `{"kind":"k","backoff":{"factor":0.5}}`, 400, "invalid_argument", "backoff.factor"},
		{"backoff max below initial", `{"kind":"k","backoff":{"initial":"2h"}}`, 400, "invalid_argument", "backoff.max"},
		{"backoff jitter", `{"kind":"k","backoff":{"jitter":2}}`, 400, "invalid_argument", "backoff.jitter"},
		{"idempotency key with a control character", `{"kind":"k","idempotency_key":"a\u0000b"}`, 400, "invalid_argument", "idempotency_key"},
		{"payload over the cap", `{"kind":"k","payload":"` + strings.Repeat("x", 200) + `"}`, 413, "payload_too_large", "payload"},
		{"malformed", `{"kind":`, 400, "invalid_argument", ""},
		{"not JSON", `kind=k`, 400, "invalid_argument", ""},
		{"an array", `[{"kind":"k"}]`, 400, "invalid_argument", ""},
		{"two objects", `{"kind":"k"} {"kind":"k"}`, 400, "invalid_argument", ""},
		{"empty body", ``, 400, "invalid_argument", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do(t, http.MethodPost, "/v1/jobs", tt.body)
			requireError(t, r, tt.status, tt.code, tt.field)
		})
	}
	// Nothing of it was enqueued.
	qs, err := b.client.Queues(b.ctx)
	require.NoError(t, err)
	require.Empty(t, qs)
}

func TestEnqueueIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k", "idempotency_key": "order-1", "delay": "1m"})
	require.Equal(t, http.StatusCreated, first.status)
	id := decodeAs[jobView](t, first).ID

	// The same key in the body, or in the header: the first job, 200.
	for _, r := range []response{
		b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k", "idempotency_key": "order-1"}),
		b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k"}, "Idempotency-Key", "order-1"),
		b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k", "idempotency_key": "order-1"}, "Idempotency-Key", "order-1"),
	} {
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		require.Equal(t, id, decodeAs[jobView](t, r).ID)
		require.Equal(t, "/v1/queues/default/jobs/"+id, r.header.Get("Location"))
	}
	st, err := b.client.Stats(b.ctx, "default")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Scheduled)
	require.EqualValues(t, 1, st.EnqueuedTotal)

	// A header key alone makes a new job with that key.
	r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k"}, "Idempotency-Key", "order-2")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "order-2", *decodeAs[jobView](t, r).IdempotencyKey)

	r = b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k", "idempotency_key": "a"}, "Idempotency-Key", "b")
	requireError(t, r, http.StatusBadRequest, "invalid_argument", "idempotency_key")
}

func TestEnqueueBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("created", func(t *testing.T) {
		jobs := make([]map[string]any, 0, 1000)
		for i := range 1000 {
			jobs = append(jobs, map[string]any{"queue": fmt.Sprintf("b%d", i%3), "kind": "k", "payload": i})
		}
		r := b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs})
		require.Equal(t, http.StatusCreated, r.status, "body: %.300s", r.body)
		got := decodeAs[jobsView](t, r).Jobs
		require.Len(t, got, 1000)
		for i, j := range got {
			require.Equal(t, fmt.Sprintf("b%d", i%3), j.Queue)
			require.Equal(t, fmt.Sprint(i), string(j.Payload))
		}
		st, err := b.client.Stats(b.ctx, "b0")
		require.NoError(t, err)
		require.EqualValues(t, 334, st.Pending)
	})

	t.Run("one bad job: 400 naming it, nothing enqueued", func(t *testing.T) {
		for _, tt := range []struct {
			bad   any
			field string
		}{
			{map[string]any{"queue": "bad-batch"}, "jobs[2].kind"},
			{map[string]any{"kind": "k", "queue": "bad-batch", "delay": "x"}, "jobs[2].delay"},
			{map[string]any{"kind": "k", "queue": "bad-batch", "max_attempts": "3"}, "jobs[2].max_attempts"},
			{map[string]any{"kind": "k", "queue": "bad-batch", "extra": 1}, "jobs[2].extra"},
			{map[string]any{"kind": "k", "queue": "Bad"}, "jobs[2].queue"},
			{map[string]any{"kind": "k", "queue": ""}, "jobs[2].queue"},
			{"a string", "jobs[2]"},
		} {
			jobs := []any{map[string]any{"kind": "k", "queue": "bad-batch"}, map[string]any{"kind": "k", "queue": "bad-batch"}, tt.bad}
			r := b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs})
			requireError(t, r, http.StatusBadRequest, "invalid_argument", tt.field)
		}
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.False(t, slices.Contains(qs, "bad-batch"))
	})

	t.Run("size", func(t *testing.T) {
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[]}`), 400, "invalid_argument", "jobs")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{}`), 400, "invalid_argument", "jobs")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":{}}`), 400, "invalid_argument", "jobs")
		jobs := make([]map[string]any, 1001)
		for i := range jobs {
			jobs[i] = map[string]any{"kind": "k"}
		}
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs}), 400, "invalid_argument", "jobs")
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", `{"jobs":[{"kind":"k"}]}`, "Idempotency-Key", "x"),
			400, "invalid_argument", "idempotency_key")
	})

	t.Run("replays", func(t *testing.T) {
		body := map[string]any{"jobs": []map[string]any{
			{"kind": "k", "queue": "rb", "idempotency_key": "x"}, {"kind": "k", "queue": "rb", "idempotency_key": "y"}}}
		r := b.do(t, http.MethodPost, "/v1/jobs/batch", body)
		require.Equal(t, http.StatusCreated, r.status)
		first := decodeAs[jobsView](t, r).Jobs
		r = b.do(t, http.MethodPost, "/v1/jobs/batch", body)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		again := decodeAs[jobsView](t, r).Jobs
		require.Equal(t, first[0].ID, again[0].ID)
		require.Equal(t, first[1].ID, again[1].ID)
		// One new among replays: 201.
		body["jobs"] = append(body["jobs"].([]map[string]any), map[string]any{"kind": "k", "queue": "rb"})
		r = b.do(t, http.MethodPost, "/v1/jobs/batch", body)
		require.Equal(t, http.StatusCreated, r.status)
		require.Empty(t, r.header.Get("Idempotent-Replayed"))
		st, err := b.client.Stats(b.ctx, "rb")
		require.NoError(t, err)
		require.EqualValues(t, 3, st.Pending)
	})
}

func TestTooManyQueuesIsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.queue.MaxQueues = 1 })
	b.enqueue(t, map[string]any{"queue": "one"})
	r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k", "queue": "two"})
	requireError(t, r, http.StatusConflict, "conflict", "")
	qs, err := b.client.Queues(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"one"}, qs)
}

// TestConcurrentEnqueues: requests that arrive together (and are sent to
// Redis in batches) each get exactly their own answer.
func TestConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type answer struct {
		i int
		r response
	}
	const n = 60
	out := make(chan answer, n)
	for i := range n {
		go func() {
			body := map[string]any{"queue": "cc", "kind": fmt.Sprint("k", i)}
			switch i % 6 {
			case 1:
				body["kind"] = "bad kind"
			case 2:
				body["idempotency_key"] = "same"
			case 3:
				body["delay"] = "1m"
			}
			out <- answer{i, b.do(t, http.MethodPost, "/v1/jobs", body)}
		}()
	}
	created, replayed, ids := 0, 0, map[string]bool{}
	var sameID string
	for range n {
		a := <-out
		switch a.i % 6 {
		case 1:
			requireError(t, a.r, 400, "invalid_argument", "kind")
			continue
		case 2:
			j := decodeAs[jobView](t, a.r)
			if sameID == "" {
				sameID = j.ID
			}
			require.Equal(t, sameID, j.ID)
			if a.r.status == http.StatusOK {
				replayed++
				continue
			}
		}
		require.Equal(t, http.StatusCreated, a.r.status, "body: %s", a.r.body)
		j := decodeAs[jobView](t, a.r)
		if a.i%6 != 2 {
			require.Equal(t, fmt.Sprint("k", a.i), j.Kind)
		}
		require.False(t, ids[j.ID])
		ids[j.ID] = true
		created++
	}
	require.Equal(t, n/6*4+1, created) // 4 of 6 new, and the first "same"
	require.Equal(t, n/6-1, replayed)
	st, err := b.client.Stats(b.ctx, "cc")
	require.NoError(t, err)
	require.EqualValues(t, created, st.Pending+st.Scheduled)
}
