package api_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// memCron is an in-memory CronStore over a real queue client: enough to
// test the routes; the cron package has the real one.
type memCron struct {
	client *queue.Client
	mu     sync.Mutex
	m      map[string]api.CronEntry
}

func (c *memCron) Put(_ context.Context, e api.CronEntry) (bool, error) {
	if strings.HasPrefix(e.Schedule, "bad") {
		return false, &queue.FieldError{Index: -1, Field: "schedule", Err: fmt.Errorf("%w: cannot parse %q", queue.ErrInvalid, e.Schedule)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, had := c.m[e.Name]
	e.NextRunAt = plumbing.Of(c.client).Clock().Now().Add(time.Minute).Truncate(time.Minute)
	c.m[e.Name] = e
	return !had, nil
}

func (c *memCron) Get(_ context.Context, name string) (api.CronEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[name]
	if !ok {
		return e, fmt.Errorf("%w: cron entry %s", queue.ErrNotFound, name)
	}
	return e, nil
}

func (c *memCron) ListPage(_ context.Context, o cron.ListOptions) (cron.Page, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []api.CronEntry
	for _, e := range c.m {
		if e.Name > o.Cursor {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b api.CronEntry) int { return strings.Compare(a.Name, b.Name) })
	p := cron.Page{Entries: out}
	if limit := cmp.Or(o.Limit, cron.DefaultListLimit); len(out) > limit {
		p.Entries, p.Next = out[:limit], out[limit-1].Name
	}
	return p, nil
}

func (c *memCron) Delete(ctx context.Context, name string) error {
	if _, err := c.Get(ctx, name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
	return nil
}

func (c *memCron) Trigger(ctx context.Context, name string) (*queue.Job, error) {
	e, err := c.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	res, err := c.client.Enqueue(ctx, queue.NewJob{Queue: e.Queue, Kind: e.Kind, Payload: e.Payload, MaxAttempts: e.MaxAttempts})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e.LastJobID, e.LastRunAt = res.Job.ID, res.Job.EnqueuedAt
	c.m[name] = e
	return res.Job, nil
}

// withCron serves the cron routes from a memCron.
func withCron(sc *setupConfig) { sc.api.Cron = &memCron{m: map[string]api.CronEntry{}} }

func setupCron(t testing.TB) *testBundle {
	t.Helper()
	var mc *memCron
	b := setup(t, func(sc *setupConfig) {
		withCron(sc)
		mc = sc.api.Cron.(*memCron)
	})
	mc.client = b.client
	return b
}

func TestCronRoutes(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	entry := map[string]any{"schedule": "*/5 * * * *", "timezone": "Europe/Berlin", "queue": "reports", "kind": "daily",
		"payload": map[string]any{"x": 1}, "max_attempts": 5, "missed": "once", "overlap": "skip"}
	r := b.do(t, http.MethodPut, "/v1/cron/nightly", entry)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, map[string]any{"name": "nightly", "schedule": "*/5 * * * *", "timezone": "Europe/Berlin",
		"queue": "reports", "kind": "daily", "payload": map[string]any{"x": float64(1)}, "max_attempts": float64(5),
		"missed": "once", "overlap": "skip", "paused": false, "next_run_at": "2030-01-02T03:05:00.000Z",
		"last_run_at": nil, "last_job_id": nil}, r.object(t))

	// Replaced: 200; defaults filled in, for fields left out or null.
	for _, body := range []map[string]any{
		{"schedule": "@every 30s", "kind": "daily"},
		{"schedule": "@every 30s", "kind": "daily", "timezone": nil, "queue": nil, "missed": nil, "overlap": nil,
			"payload": nil, "max_attempts": nil, "paused": nil},
	} {
		r = b.do(t, http.MethodPut, "/v1/cron/nightly", body)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		got := r.object(t)
		require.Equal(t, "UTC", got["timezone"])
		require.Equal(t, "default", got["queue"])
		require.Equal(t, "skip", got["missed"])
		require.Equal(t, "allow", got["overlap"])
		require.Equal(t, map[string]any{}, got["payload"])
		require.Equal(t, false, got["paused"])
		require.EqualValues(t, 3, got["max_attempts"], "what its jobs get")
	}

	r = b.do(t, http.MethodGet, "/v1/cron/nightly", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "@every 30s", r.object(t)["schedule"])

	r = b.do(t, http.MethodPost, "/v1/cron/nightly/trigger", nil)
	require.Equal(t, http.StatusCreated, r.status)
	job := decodeAs[jobView](t, r)
	require.Equal(t, "/v1/queues/default/jobs/"+job.ID, r.header.Get("Location"))
	require.Equal(t, "daily", job.Kind)

	r = b.do(t, http.MethodGet, "/v1/cron", nil)
	require.Equal(t, http.StatusOK, r.status)
	list := decodeAs[struct {
		Entries []map[string]any `json:"entries"`
	}](t, r).Entries
	require.Len(t, list, 1)
	require.Equal(t, job.ID, list[0]["last_job_id"])

	require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/cron/nightly", nil).status)
	requireError(t, b.do(t, http.MethodGet, "/v1/cron/nightly", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodDelete, "/v1/cron/nightly", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/cron/nightly/trigger", nil), 404, "not_found", "")
	r = b.do(t, http.MethodGet, "/v1/cron", nil)
	require.JSONEq(t, `{"entries":[],"next_cursor":""}`, string(r.body))
}

func TestCronInvalid(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	ok := func(over map[string]any) map[string]any {
		e := map[string]any{"schedule": "* * * * *", "kind": "k"}
		for k, v := range over {
			e[k] = v
		}
		return e
	}
	for _, tt := range []struct {
		name  string
		body  any
		field string
	}{
		{"Bad_Name", ok(nil), "name"},
		{"n", ok(map[string]any{"schedule": ""}), "schedule"},
		{"n", ok(map[string]any{"schedule": "bad spec"}), "schedule"},
		{"n", ok(map[string]any{"timezone": "Mars/Olympus"}), "timezone"},
		{"n", ok(map[string]any{"queue": "Q"}), "queue"},
		{"n", ok(map[string]any{"kind": ""}), "kind"},
		{"n", ok(map[string]any{"kind": "a b"}), "kind"},
		{"n", ok(map[string]any{"missed": "all"}), "missed"},
		{"n", ok(map[string]any{"overlap": "never"}), "overlap"},
		{"n", ok(map[string]any{"max_attempts": 0}), "max_attempts"},
		// Given but empty: a 400, as "queue":"" is for POST /v1/jobs; left
		// out (or null) is the default.
		{"n", ok(map[string]any{"queue": ""}), "queue"},
		{"n", ok(map[string]any{"timezone": ""}), "timezone"},
		{"n", ok(map[string]any{"missed": ""}), "missed"},
		{"n", ok(map[string]any{"overlap": ""}), "overlap"},
		{"n", ok(map[string]any{"paused": "yes"}), "paused"},
		{"n", ok(map[string]any{"name": "n"}), "name"}, // the name is the path's: unknown in the body
	} {
		requireError(t, b.do(t, http.MethodPut, "/v1/cron/"+tt.name, tt.body), 400, "invalid_argument", tt.field)
	}
	requireError(t, b.do(t, http.MethodGet, "/v1/cron/Bad_Name", nil), 400, "invalid_argument", "name")
	r := b.do(t, http.MethodGet, "/v1/cron", nil)
	require.JSONEq(t, `{"entries":[],"next_cursor":""}`, string(r.body))
}

// With the cron package's store: an entry whose payload is over the queue
// client's cap is refused when it is written, as POST /v1/jobs refuses
// such a job (413, field "payload"), rather than stored and dropped at
// every tick.
func TestCronStorePayloadOverCap(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) {
		sc.realCron = true
		sc.queue.MaxPayloadBytes = 100
	})
	big := map[string]any{"s": strings.Repeat("x", 100)}
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k", "payload": big}),
		http.StatusRequestEntityTooLarge, "payload_too_large", "payload")
	requireError(t, b.do(t, http.MethodPut, "/v1/cron/big", map[string]any{"schedule": "@every 1s", "kind": "k", "payload": big}),
		http.StatusRequestEntityTooLarge, "payload_too_large", "payload")
	requireError(t, b.do(t, http.MethodGet, "/v1/cron/big", nil), http.StatusNotFound, "not_found", "")

	r := b.do(t, http.MethodPut, "/v1/cron/small", map[string]any{"schedule": "@every 1s", "kind": "k", "payload": map[string]any{"s": "x"}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodGet, "/v1/cron", nil)
	require.Equal(t, http.StatusOK, r.status)
	list := decodeAs[struct {
		Entries []map[string]any `json:"entries"`
	}](t, r).Entries
	require.Len(t, list, 1)
	require.Equal(t, "small", list[0]["name"])
}
