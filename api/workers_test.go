package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
	goworker "github.com/chronoq/chronoq/worker"
)

type jobRefView struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
}

type workerView struct {
	ID         string       `json:"id"`
	Host       string       `json:"host"`
	Labels     []string     `json:"labels"`
	Queues     []string     `json:"queues"`
	Version    string       `json:"version"`
	StartedAt  string       `json:"started_at"`
	LastSeenAt string       `json:"last_seen_at"`
	ExpiresAt  string       `json:"expires_at"`
	Jobs       []jobRefView `json:"jobs"`
}

type workersView struct {
	Workers    []workerView `json:"workers"`
	NextCursor string       `json:"next_cursor"`
	Live       int          `json:"live"`
}

// workers lists the live workers (one page).
func (b *testBundle) workers(t *testing.T, query string) workersView {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/workers"+query, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	return decodeAs[workersView](t, r)
}

// worker reads live worker id.
func (b *testBundle) worker(t *testing.T, id string) workerView {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/workers/"+id, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	return decodeAs[workerView](t, r)
}

func TestWorkersHTTP(t *testing.T) {
	t.Parallel()
	testWorkersHTTP(t, setup(t))
}

func TestClusterWorkersHTTP(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	testWorkersHTTP(t, setup(t, func(sc *setupConfig) { sc.rdb = testutil.Cluster(t) }))
}

// testWorkersHTTP: an HTTP worker registers, claims, heartbeats, completes
// and fails with its worker_id, and the registry follows the jobs it
// holds; silent, it expires.
func testWorkersHTTP(t *testing.T, b *testBundle) {
	require.Empty(t, b.workers(t, "").Workers)
	r := b.do(t, http.MethodPut, "/v1/workers/http-1", map[string]any{"host": "box-1", "labels": []string{"gpu"},
		"queues": []string{"q1"}, "version": "py-1.0", "ttl": "30s"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	w := decodeAs[workerView](t, r)
	require.Equal(t, "http-1", w.ID)
	require.Equal(t, "box-1", w.Host)
	require.Equal(t, []string{"gpu"}, w.Labels)
	require.Equal(t, []string{"q1"}, w.Queues)
	require.Equal(t, "py-1.0", w.Version)
	require.Empty(t, w.Jobs)
	requireSoonAfter(t, b.clock.Now().Format(time.RFC3339Nano), w.StartedAt)
	requireSoonAfter(t, b.clock.Now().Add(30*time.Second).Format(time.RFC3339Nano), w.ExpiresAt)

	j1 := b.enqueue(t, map[string]any{"queue": "q1"})
	j2 := b.enqueue(t, map[string]any{"queue": "q2"})
	r = b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "http-1"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	c1 := decodeAs[jobsView](t, r).Jobs
	require.Len(t, c1, 1)
	b.clock.Advance(20 * time.Second)
	r = b.do(t, http.MethodPost, "/v1/queues/q2/claim", map[string]any{"worker_id": "http-1", "max": 5})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	c2 := decodeAs[jobsView](t, r).Jobs
	require.Len(t, c2, 1)

	w = b.worker(t, "http-1")
	require.Equal(t, []jobRefView{{"q1", j1.ID}, {"q2", j2.ID}}, w.Jobs)
	require.Equal(t, []string{"q1", "q2"}, w.Queues, "the registered queue, then the one it claimed from")
	requireSoonAfter(t, b.clock.Now().Format(time.RFC3339Nano), w.LastSeenAt)
	requireSoonAfter(t, b.clock.Now().Add(30*time.Second).Format(time.RFC3339Nano), w.ExpiresAt, "its own TTL kept")

	// A heartbeat keeps it alive and holding; a complete and a fail drop
	// their jobs.
	b.clock.Advance(20 * time.Second)
	r = b.do(t, http.MethodPost, "/v1/queues/q1/jobs/"+j1.ID+"/heartbeat", map[string]any{"token": c1[0].Token, "worker_id": "http-1"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	b.clock.Advance(20 * time.Second)
	r = b.do(t, http.MethodPost, "/v1/queues/q2/jobs/"+j2.ID+"/heartbeat", map[string]any{"token": c2[0].Token, "worker_id": "http-1"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Len(t, b.worker(t, "http-1").Jobs, 2)
	r = b.do(t, http.MethodPost, "/v1/queues/q1/jobs/"+j1.ID+"/complete", map[string]any{"token": c1[0].Token, "worker_id": "http-1"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, []jobRefView{{"q2", j2.ID}}, b.worker(t, "http-1").Jobs)
	r = b.do(t, http.MethodPost, "/v1/queues/q2/jobs/"+j2.ID+"/fail", map[string]any{"token": c2[0].Token, "worker_id": "http-1", "dead": true})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	w = b.worker(t, "http-1")
	require.Empty(t, w.Jobs)
	require.Equal(t, "box-1", w.Host, "the calls keep the registration")

	// Silent past its TTL: gone.
	b.clock.Advance(31 * time.Second)
	p := b.workers(t, "")
	require.Empty(t, p.Workers)
	require.Zero(t, p.Live)
	requireError(t, b.do(t, http.MethodGet, "/v1/workers/http-1", nil), http.StatusNotFound, "not_found", "")

	// A worker known only from its claims shows the labels they declare; a
	// registered one keeps its own (a claim's labels never replace them).
	r = b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "http-5", "labels": []string{"linux", "gpu"}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, []string{"gpu", "linux"}, b.worker(t, "http-5").Labels)
	r = b.do(t, http.MethodPut, "/v1/workers/http-6", map[string]any{"host": "box-3", "labels": []string{"arm64"}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "http-6", "labels": []string{"gpu"}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	w = b.worker(t, "http-6")
	require.Equal(t, []string{"arm64"}, w.Labels)
	require.Equal(t, "box-3", w.Host)
	// Labels a claim may not declare: refused before the registry hears of
	// the worker.
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "http-7", "labels": []string{"no spaces"}}),
		http.StatusBadRequest, "invalid_argument", "labels")
	requireError(t, b.do(t, http.MethodGet, "/v1/workers/http-7", nil), http.StatusNotFound, "not_found", "")
	for _, id := range []string{"http-5", "http-6"} {
		r = b.do(t, http.MethodDelete, "/v1/workers/"+id, nil)
		require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	}
	requireError(t, b.do(t, http.MethodDelete, "/v1/workers/http-1", nil), http.StatusNotFound, "not_found", "")

	// A claim alone registers a worker; DELETE deregisters it.
	r = b.do(t, http.MethodPost, "/v1/queues/q3/claim", map[string]any{"worker_id": "http-2"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	w = b.worker(t, "http-2")
	require.Equal(t, []string{"q3"}, w.Queues)
	require.Empty(t, w.Host)
	require.Equal(t, []string{}, w.Labels)
	requireSoonAfter(t, b.clock.Now().Add(registry.DefaultTTL).Format(time.RFC3339Nano), w.ExpiresAt)
	r = b.do(t, http.MethodDelete, "/v1/workers/http-2", nil)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	require.Empty(t, b.workers(t, "").Workers)
}

// An HTTP worker's held jobs reach the registry within a second of its
// calls (a reader on another instance sees them then), and at once in
// what this server answers.
func TestWorkersHeldJobsReachTheRegistryWithinASecond(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := registry.New(b.client, registry.Config{}) // as another instance reads it
	require.NoError(t, err)
	held := func() []registry.JobRef {
		w, err := other.Get(b.ctx, "w")
		require.NoError(t, err)
		return w.Jobs
	}
	j := b.enqueue(t, map[string]any{"queue": "q1"})
	r := b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "w"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	tok := decodeAs[jobsView](t, r).Jobs[0].Token
	require.Empty(t, held(), "registered before its claim; the job it holds not written yet")
	b.clock.Advance(time.Second)
	require.Eventually(t, func() bool { return slices.Equal(held(), []registry.JobRef{{Queue: "q1", ID: j.ID}}) },
		5*time.Second, time.Millisecond)

	r = b.do(t, http.MethodPost, "/v1/queues/q1/jobs/"+j.ID+"/complete", map[string]any{"token": tok, "worker_id": "w"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Len(t, held(), 1, "the complete's sighting waits")
	require.Empty(t, b.worker(t, "w").Jobs, "this server's answer writes it first")
	require.Empty(t, held())
}

// Server.Close writes the sightings the server still keeps: a worker's
// held jobs reach the registry without waiting for the gap.
func TestWorkersCloseWritesTheSightingsThatWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := registry.New(b.client, registry.Config{})
	require.NoError(t, err)
	j := b.enqueue(t, map[string]any{"queue": "q1"})
	r := b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "w"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	w, err := other.Get(b.ctx, "w")
	require.NoError(t, err)
	require.Empty(t, w.Jobs, "the claimed job's sighting waits for the gap")
	require.NoError(t, b.srv.Close(b.ctx))
	w, err = other.Get(b.ctx, "w")
	require.NoError(t, err)
	require.Equal(t, []registry.JobRef{{Queue: "q1", ID: j.ID}}, w.Jobs)
}

// A job reclaimed from a worker, then acked or heartbeated by it, answers
// lease_lost, and leaves the worker's list.
func TestWorkersLeaseLostDropsTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "q1"})
	r := b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "w", "visibility": "1s"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	tok := decodeAs[jobsView](t, r).Jobs[0].Token
	require.Len(t, b.worker(t, "w").Jobs, 1)
	b.clock.Advance(2 * time.Second)
	_, err := b.client.Reclaim(b.ctx, "q1")
	require.NoError(t, err)
	r = b.do(t, http.MethodPost, "/v1/queues/q1/jobs/"+j.ID+"/heartbeat", map[string]any{"token": tok, "worker_id": "w"})
	requireError(t, r, http.StatusConflict, "lease_lost", "")
	require.Empty(t, b.worker(t, "w").Jobs)
}

func TestWorkersPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		r := b.do(t, http.MethodPut, fmt.Sprintf("/v1/workers/w%d", i), nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	}
	var ids []string
	q := "?limit=2"
	for range 5 {
		p := b.workers(t, q)
		require.Equal(t, 5, p.Live)
		for _, w := range p.Workers {
			ids = append(ids, w.ID)
		}
		if p.NextCursor == "" {
			break
		}
		q = "?limit=2&cursor=" + p.NextCursor
	}
	require.Equal(t, []string{"w0", "w1", "w2", "w3", "w4"}, ids)
}

func TestWorkersBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, map[string]any{"queue": "q1"})
	for _, c := range []struct {
		method, path string
		body         any
		field        string
	}{
		{http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "not ok"}, "worker_id"},
		{http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": ""}, "worker_id"},
		{http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": strings.Repeat("a", registry.MaxIDBytes+1)}, "worker_id"},
		{http.MethodPost, "/v1/queues/q1/jobs/x/complete", map[string]any{"token": "t", "worker_id": "-x"}, "worker_id"},
		{http.MethodPost, "/v1/queues/q1/jobs/x/fail", map[string]any{"token": "t", "worker_id": "-x"}, "worker_id"},
		{http.MethodPost, "/v1/queues/q1/jobs/x/heartbeat", map[string]any{"token": "t", "worker_id": "-x"}, "worker_id"},
		{http.MethodPost, "/v1/queues/q1/jobs/x/cancel", map[string]any{"token": "t", "worker_id": "-x"}, "worker_id"},
		{http.MethodPut, "/v1/workers/-x", nil, "id"},
		{http.MethodGet, "/v1/workers/a%20b", nil, "id"},
		{http.MethodDelete, "/v1/workers/-x", nil, "id"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"labels": []string{"a b"}}, "labels[0]"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"labels": make([]string, registry.MaxLabels+1)}, "labels"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"queues": []string{"Q"}}, "queues[0]"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"host": strings.Repeat("h", registry.MaxHostBytes+1)}, "host"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"host": "a\u0000b"}, "host"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"version": strings.Repeat("v", registry.MaxVersionBytes+1)}, "version"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"ttl": "10ms"}, "ttl"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"ttl": "2h"}, "ttl"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"jobs": []map[string]any{{"queue": "q1", "id": "a b"}}}, "jobs[0].id"},
		{http.MethodPut, "/v1/workers/w", map[string]any{"nope": 1}, "nope"},
		{http.MethodGet, "/v1/workers?limit=0", nil, "limit"},
		{http.MethodGet, "/v1/workers?limit=1001", nil, "limit"},
		{http.MethodGet, "/v1/workers?cursor=a%20b", nil, "cursor"},
	} {
		requireError(t, b.do(t, c.method, c.path, c.body), http.StatusBadRequest, "invalid_argument", c.field)
	}
	require.Empty(t, b.workers(t, "").Workers, "nothing registered")
	require.Len(t, b.claim(t, "q1", 1), 1, "nothing claimed")
}

// A registry at its cap refuses a new worker: its PUT and its claim
// answer 409 conflict, and the claim takes nothing.
func TestWorkersCap(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.workers = &registry.Config{MaxWorkers: 1} })
	b.enqueue(t, map[string]any{"queue": "q1"})
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPut, "/v1/workers/a", nil).status)
	requireError(t, b.do(t, http.MethodPut, "/v1/workers/b", nil), http.StatusConflict, "conflict", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "b"}), http.StatusConflict, "conflict", "")
	require.Len(t, b.claim(t, "q1", 1), 1, "nothing claimed")
	r := b.do(t, http.MethodPost, "/v1/queues/q1/claim", map[string]any{"worker_id": "a"})
	require.Equal(t, http.StatusOK, r.status, "the registered one claims as ever: %s", r.body)
}

// The gauge counts the live workers, Go and HTTP, on Redis's clock.
func TestWorkersGauge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Zero(t, b.scrape(t)["chronoq_workers"])
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPut, "/v1/workers/http-1", map[string]any{"ttl": "10s"}).status)
	w, err := goworker.New(goworker.Config{Client: b.client, ID: "go-1", Queues: []goworker.QueueConfig{{Name: "q1"}},
		Handler: goworker.NewMux(), IdleWait: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	require.Eventually(t, func() bool { return b.scrape(t)["chronoq_workers"] == 2 }, 10*time.Second, 5*time.Millisecond)
	p := b.workers(t, "")
	require.Equal(t, "go-1", p.Workers[0].ID)
	host, _ := os.Hostname()
	require.Equal(t, host, p.Workers[0].Host)
	require.Equal(t, []string{"q1"}, p.Workers[0].Queues)
	b.clock.Advance(11 * time.Second) // the HTTP worker falls silent; the Go one refreshes at 20 s
	require.Equal(t, float64(1), b.scrape(t)["chronoq_workers"])
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop")
	}
	require.Zero(t, b.scrape(t)["chronoq_workers"], "a clean stop deregisters")
}
