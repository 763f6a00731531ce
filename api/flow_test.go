package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/client"
	"github.com/chronoq/chronoq/queue"
)

// flowLimitsView, flowOverrideView and flowKeyView are the flow control
// resources as a client reads them.
type flowLimitsView struct {
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	Strategy    string  `json:"strategy"`
}

type flowOverrideView struct {
	Key         string  `json:"key"`
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	Weight      int     `json:"weight"`
}

type flowKeyView struct {
	Key            string            `json:"key"`
	Pending        int64             `json:"pending"`
	InFlight       int64             `json:"in_flight"`
	Override       *flowOverrideView `json:"override"`
	PendingJobs    []string          `json:"pending_jobs"`
	ProcessingJobs []string          `json:"processing_jobs"`
}

// TestFlowLimits: GET, PUT and DELETE /v1/queues/{queue}/flow, as the
// queue's limits routes: zeros for a queue without, defaults filled on
// PUT, 404 on DELETE for a queue never used, 400s naming the field.
func TestFlowLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.do(t, http.MethodGet, "/v1/queues/fl/flow", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, flowLimitsView{Strategy: "queue"}, decodeAs[flowLimitsView](t, r))
	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/fl/flow", nil), http.StatusNotFound, "not_found", "")

	r = b.do(t, http.MethodPut, "/v1/queues/fl/flow", map[string]any{"max_in_flight": 2, "rate": 25})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	want := flowLimitsView{MaxInFlight: 2, Rate: 25, Burst: 3, Strategy: "queue"} // burst: a tenth of a second's worth
	require.Equal(t, want, decodeAs[flowLimitsView](t, r))
	r = b.do(t, http.MethodGet, "/v1/queues/fl/flow", nil)
	require.Equal(t, want, decodeAs[flowLimitsView](t, r))
	l, err := b.client.FlowLimits(b.ctx, "fl")
	require.NoError(t, err)
	require.Equal(t, queue.FlowLimits{MaxInFlight: 2, Rate: 25, Burst: 3, Strategy: queue.FlowQueue}, l)

	r = b.do(t, http.MethodPut, "/v1/queues/fl/flow", map[string]any{"max_in_flight": 1, "strategy": "cancel_in_progress"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, flowLimitsView{MaxInFlight: 1, Strategy: "cancel_in_progress"}, decodeAs[flowLimitsView](t, r))

	for _, tt := range []struct {
		body  any
		field string
	}{
		{map[string]any{"max_in_flight": -1}, "max_in_flight"},
		{map[string]any{"rate": -0.5}, "rate"},
		{map[string]any{"burst": 5}, "burst"}, // a burst needs a rate
		{map[string]any{"rate": 1, "burst": 1_000_001}, "burst"},
		{map[string]any{"strategy": "drop_oldest"}, "strategy"},
		{map[string]any{"strategy": ""}, "strategy"},
		{map[string]any{"max_in_flight": "2"}, "max_in_flight"},
		{map[string]any{"weight": 2}, "weight"}, // an override's field, not the queue's
	} {
		requireError(t, b.do(t, http.MethodPut, "/v1/queues/fl/flow", tt.body), http.StatusBadRequest, "invalid_argument", tt.field)
	}
	requireError(t, b.do(t, http.MethodPut, "/v1/queues/Bad/flow", map[string]any{}), http.StatusBadRequest, "invalid_argument", "queue")

	r = b.do(t, http.MethodDelete, "/v1/queues/fl/flow", nil)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodGet, "/v1/queues/fl/flow", nil)
	require.Equal(t, flowLimitsView{Strategy: "queue"}, decodeAs[flowLimitsView](t, r))
}

// TestFlowOverrides: PUT, DELETE .../flow/overrides/{key} and the
// listing by cursor; a key with a "/" travels escaped; bad keys, fields
// and limits are 400s naming them.
func TestFlowOverrides(t *testing.T) {
	t.Parallel()
	b := setup(t)

	requireError(t, b.do(t, http.MethodDelete, "/v1/queues/fo/flow/overrides/acme", nil), http.StatusNotFound, "not_found", "")

	r := b.do(t, http.MethodPut, "/v1/queues/fo/flow/overrides/acme", map[string]any{"max_in_flight": 5, "rate": 100})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, flowOverrideView{Key: "acme", MaxInFlight: 5, Rate: 100, Burst: 10, Weight: 1}, decodeAs[flowOverrideView](t, r))
	r = b.do(t, http.MethodPut, "/v1/queues/fo/flow/overrides/tenant%2F7", map[string]any{"weight": 4})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, flowOverrideView{Key: "tenant/7", Weight: 4}, decodeAs[flowOverrideView](t, r))

	// Every override, a page of one at a time (HSCAN's count is a hint:
	// bounded by the number of overrides, not by the count).
	got := map[string]flowOverrideView{}
	cursor := ""
	for range 10 {
		r = b.do(t, http.MethodGet, "/v1/queues/fo/flow/overrides?limit=1&cursor="+cursor, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		page := decodeAs[struct {
			Overrides  []flowOverrideView `json:"overrides"`
			NextCursor string             `json:"next_cursor"`
		}](t, r)
		for _, o := range page.Overrides {
			got[o.Key] = o
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Empty(t, cursor)
	require.Equal(t, map[string]flowOverrideView{
		"acme":     {Key: "acme", MaxInFlight: 5, Rate: 100, Burst: 10, Weight: 1},
		"tenant/7": {Key: "tenant/7", Weight: 4},
	}, got)

	r = b.do(t, http.MethodDelete, "/v1/queues/fo/flow/overrides/tenant%2F7", nil)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodDelete, "/v1/queues/fo/flow/overrides/never", nil) // no override: no error
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	os, _, err := b.client.FlowOverrides(b.ctx, "fo", "", 100)
	require.NoError(t, err)
	require.Equal(t, []queue.FlowOverride{{Key: "acme", MaxInFlight: 5, Rate: 100, Burst: 10, Weight: 1}}, os)

	for _, tt := range []struct {
		method, path string
		body         any
		field        string
	}{
		{http.MethodPut, "/v1/queues/fo/flow/overrides/a%20b", map[string]any{}, "key"},
		{http.MethodPut, "/v1/queues/fo/flow/overrides/" + strings.Repeat("k", 65), map[string]any{}, "key"},
		{http.MethodPut, "/v1/queues/fo/flow/overrides/acme", map[string]any{"weight": 101}, "weight"},
		{http.MethodPut, "/v1/queues/fo/flow/overrides/acme", map[string]any{"weight": -1}, "weight"},
		{http.MethodPut, "/v1/queues/fo/flow/overrides/acme", map[string]any{"max_in_flight": -1}, "max_in_flight"},
		{http.MethodPut, "/v1/queues/fo/flow/overrides/acme", map[string]any{"strategy": "queue"}, "strategy"},
		{http.MethodDelete, "/v1/queues/fo/flow/overrides/a%25b", nil, "key"},
		{http.MethodGet, "/v1/queues/fo/flow/overrides?limit=0", nil, "limit"},
		{http.MethodGet, "/v1/queues/fo/flow/overrides?limit=-3", nil, "limit"},
		{http.MethodGet, "/v1/queues/fo/flow/overrides?limit=1001", nil, "limit"},
		{http.MethodGet, "/v1/queues/fo/flow/overrides?cursor=zz", nil, "cursor"},
	} {
		requireError(t, b.do(t, tt.method, tt.path, tt.body), http.StatusBadRequest, "invalid_argument", tt.field)
	}
}

// TestFlowKeys: jobs enqueued with flow keys (single, into a queue's
// path, and a batch) read back with their flow_key, and the keys'
// listing and one key's jobs count them.
func TestFlowKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)

	one := b.enqueue(t, map[string]any{"queue": "fk", "flow_key": "acme"})
	r := b.do(t, http.MethodPost, "/v1/queues/fk/jobs", map[string]any{"kind": "k", "flow_key": "acme"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	two := decodeAs[map[string]any](t, r)
	require.Equal(t, "acme", two["flow_key"])
	r = b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
		{"queue": "fk", "kind": "k", "flow_key": "tenant/7"},
		{"queue": "fk", "kind": "k"},
	}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	batch := decodeAs[struct {
		Jobs []map[string]any `json:"jobs"`
	}](t, r).Jobs
	require.Equal(t, "tenant/7", batch[0]["flow_key"])
	require.NotContains(t, batch[1], "flow_key", "left out when the job has none")
	require.NotContains(t, batch[0], "debounced")

	// Read back: the job as stored, its record's flow field.
	j, err := b.client.Get(b.ctx, "fk", one.ID)
	require.NoError(t, err)
	require.Equal(t, "acme", j.FlowKey)
	r = b.do(t, http.MethodGet, "/v1/queues/fk/jobs/"+one.ID, nil)
	require.Equal(t, "acme", r.object(t)["flow_key"])
	j, err = b.client.Get(b.ctx, "fk", batch[0]["id"].(string))
	require.NoError(t, err)
	require.Equal(t, "tenant/7", j.FlowKey)

	r = b.do(t, http.MethodPut, "/v1/queues/fk/flow/overrides/acme", map[string]any{"weight": 3})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	// The listing and a key's jobs read the flow control's own keys,
	// which the claim script keeps: compare them with the queue
	// package's answers rather than with a count the engine decides.
	keys, total, err := b.client.FlowKeys(b.ctx, "fk", 0, 50)
	require.NoError(t, err)
	r = b.do(t, http.MethodGet, "/v1/queues/fk/flow/keys", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	page := decodeAs[struct {
		Keys  []flowKeyView `json:"keys"`
		Total int64         `json:"total"`
	}](t, r)
	require.Equal(t, total, page.Total)
	require.Len(t, page.Keys, len(keys))
	for i, k := range keys {
		require.Equal(t, k.Key, page.Keys[i].Key)
		require.Equal(t, k.Pending, page.Keys[i].Pending)
		require.Equal(t, k.InFlight, page.Keys[i].InFlight)
		require.Equal(t, k.Override != nil, page.Keys[i].Override != nil)
	}
	r = b.do(t, http.MethodGet, "/v1/queues/fk/flow/keys?offset=1000&limit=1000", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Empty(t, decodeAs[struct {
		Keys []flowKeyView `json:"keys"`
	}](t, r).Keys)

	st, err := b.client.FlowKey(b.ctx, "fk", "acme")
	require.NoError(t, err)
	pending, processing, err := b.client.FlowKeyJobs(b.ctx, "fk", "acme", 1)
	require.NoError(t, err)
	r = b.do(t, http.MethodGet, "/v1/queues/fk/flow/keys/acme?limit=1", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	k := decodeAs[flowKeyView](t, r)
	require.Equal(t, "acme", k.Key)
	require.Equal(t, st.Pending, k.Pending)
	require.Equal(t, st.InFlight, k.InFlight)
	require.Equal(t, &flowOverrideView{Key: "acme", Weight: 3}, k.Override)
	require.Equal(t, append([]string{}, pending...), k.PendingJobs)
	require.Equal(t, append([]string{}, processing...), k.ProcessingJobs)

	// A key nobody used: zeros, empty lists, no override.
	r = b.do(t, http.MethodGet, "/v1/queues/fk/flow/keys/nobody", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, flowKeyView{Key: "nobody", PendingJobs: []string{}, ProcessingJobs: []string{}}, decodeAs[flowKeyView](t, r))

	for _, tt := range []struct{ path, field string }{
		{"/v1/queues/fk/flow/keys?limit=0", "limit"},
		{"/v1/queues/fk/flow/keys?limit=1001", "limit"},
		{"/v1/queues/fk/flow/keys?limit=x", "limit"},
		{"/v1/queues/fk/flow/keys?offset=-1", "offset"},
		{"/v1/queues/fk/flow/keys/acme?limit=-1", "limit"},
		{"/v1/queues/fk/flow/keys/bad%20key", "key"},
	} {
		requireError(t, b.do(t, http.MethodGet, tt.path, nil), http.StatusBadRequest, "invalid_argument", tt.field)
	}
}

// TestFlowEnqueueRefused: an enqueue's flow_key and debounce are checked
// as the queue package checks them, each 400 naming its field (under
// jobs[i]. in a batch); nothing is enqueued.
func TestFlowEnqueueRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tt := range []struct {
		job   map[string]any
		field string
	}{
		{map[string]any{"flow_key": ""}, "flow_key"},
		{map[string]any{"flow_key": "a b"}, "flow_key"},
		{map[string]any{"flow_key": strings.Repeat("k", 65)}, "flow_key"},
		{map[string]any{"flow_key": 7}, "flow_key"},
		{map[string]any{"flow_key": "acme", "labels": []string{"gpu"}}, "flow_key"},
		{map[string]any{"debounce": map[string]any{"period": "5s"}}, "debounce"},
		{map[string]any{"flow_key": "acme", "debounce": map[string]any{}}, "debounce.period"},
		{map[string]any{"flow_key": "acme", "debounce": map[string]any{"period": "soon"}}, "debounce.period"},
		{map[string]any{"flow_key": "acme", "debounce": map[string]any{"period": "0s"}}, "debounce.period"},
		{map[string]any{"flow_key": "acme", "debounce": map[string]any{"period": "5s", "max_wait": "1s"}}, "debounce.max_wait"},
		{map[string]any{"flow_key": "acme", "debounce": map[string]any{"period": "5s", "wait": "1m"}}, "debounce.wait"},
		{map[string]any{"flow_key": "acme", "delay": "1s", "debounce": map[string]any{"period": "5s"}}, "debounce"},
		{map[string]any{"flow_key": "acme", "run_at": "2026-01-01T00:00:00Z", "debounce": map[string]any{"period": "5s"}}, "debounce"},
	} {
		t.Run(fmt.Sprint(tt.job), func(t *testing.T) {
			tt.job["queue"], tt.job["kind"] = "fr", "k"
			requireError(t, b.do(t, http.MethodPost, "/v1/jobs", tt.job), http.StatusBadRequest, "invalid_argument", tt.field)
			r := b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"queue": "fr", "kind": "k"}, tt.job}})
			requireError(t, r, http.StatusBadRequest, "invalid_argument", "jobs[1]."+tt.field)
		})
	}
	st, err := b.client.Stats(b.ctx, "fr")
	require.NoError(t, err)
	require.Zero(t, st.EnqueuedTotal)
}

// TestFlowDebounceAnswer: an enqueue with a debounce is answered as any
// other, with no debounced field, unless the engine folded it into its
// key's waiting job; then its answer is that job, 200, debounced true.
// Which the engine does is its own to test (queue's suites): this test
// holds the answer to what the engine reported, in both forms.
func TestFlowDebounceAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	job := map[string]any{"queue": "fd", "kind": "k", "flow_key": "acme", "debounce": map[string]any{"period": "1h", "max_wait": "2h"}}
	for i := range 2 {
		job["payload"] = map[string]any{"n": i}
		r := b.do(t, http.MethodPost, "/v1/jobs", job)
		require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.status, "body: %s", r.body)
		got := r.object(t)
		require.Equal(t, "acme", got["flow_key"])
		if r.status == http.StatusOK {
			require.Equal(t, true, got["debounced"])
		} else {
			require.NotContains(t, got, "debounced")
		}
	}
}

// TestFlowGeneratedClient: the client generated from the document calls
// every flow route unchanged, and enqueues with a flow key.
func TestFlowGeneratedClient(t *testing.T) {
	t.Parallel()
	const token = "flow-token"
	b := setup(t, withToken(token))
	c, err := client.NewClientWithResponses(b.http.URL, client.WithHTTPClient(b.http.Client()),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	require.NoError(t, err)
	ctx := b.ctx
	const q = "fgen"

	strategy := client.FlowLimitsRequestStrategyCancelNewest
	put, err := c.PutFlowLimitsWithResponse(ctx, q, client.FlowLimitsRequest{MaxInFlight: ptr(3), Strategy: &strategy})
	require.NoError(t, err)
	require.NotNil(t, put.JSON200, "%d %s", put.StatusCode(), put.Body)
	require.Equal(t, 3, put.JSON200.MaxInFlight)
	require.Equal(t, client.FlowLimitsStrategyCancelNewest, put.JSON200.Strategy)
	get, err := c.GetFlowLimitsWithResponse(ctx, q)
	require.NoError(t, err)
	require.Equal(t, put.JSON200, get.JSON200)

	ov, err := c.PutFlowOverrideWithResponse(ctx, q, "tenant/9", client.FlowOverrideRequest{Weight: ptr(2), Rate: ptr(float32(4))})
	require.NoError(t, err)
	require.NotNil(t, ov.JSON200, "%d %s", ov.StatusCode(), ov.Body)
	require.Equal(t, "tenant/9", ov.JSON200.Key)
	require.Equal(t, 2, ov.JSON200.Weight)
	list, err := c.ListFlowOverridesWithResponse(ctx, q, &client.ListFlowOverridesParams{Limit: ptr(10)})
	require.NoError(t, err)
	require.NotNil(t, list.JSON200, "%d %s", list.StatusCode(), list.Body)
	require.Len(t, list.JSON200.Overrides, 1)

	e, err := c.EnqueueIntoWithResponse(ctx, q, nil, client.NewJob{Kind: "k", FlowKey: ptr("tenant/9")})
	require.NoError(t, err)
	require.NotNil(t, e.JSON201, "%d %s", e.StatusCode(), e.Body)
	require.Equal(t, "tenant/9", *e.JSON201.FlowKey)

	keys, err := c.ListFlowKeysWithResponse(ctx, q, &client.ListFlowKeysParams{Limit: ptr(5), Offset: ptr(0)})
	require.NoError(t, err)
	require.NotNil(t, keys.JSON200, "%d %s", keys.StatusCode(), keys.Body)
	key, err := c.GetFlowKeyWithResponse(ctx, q, "tenant/9", &client.GetFlowKeyParams{Limit: ptr(5)})
	require.NoError(t, err)
	require.NotNil(t, key.JSON200, "%d %s", key.StatusCode(), key.Body)
	require.Equal(t, "tenant/9", key.JSON200.Key)
	require.NotNil(t, key.JSON200.Override)

	del, err := c.DeleteFlowOverrideWithResponse(ctx, q, "tenant/9")
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, del.StatusCode(), "%s", del.Body)
	dl, err := c.DeleteFlowLimitsWithResponse(ctx, q)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, dl.StatusCode(), "%s", dl.Body)
}

// TestFlowWorkflowNode: a workflow node's job takes a flow_key, which
// its job keeps (written by wfadd.lua, read back from the record) while
// waiting for its parents and once released; a node's job and a job with
// depends_on take no debounce.
func TestFlowWorkflowNode(t *testing.T) {
	t.Parallel()
	b := setup(t, withWorkflows)
	a, c := wfNode("a", "fw"), wfNode("c", "fw", "a")
	a["job"].(map[string]any)["flow_key"] = "acme"
	c["job"].(map[string]any)["flow_key"] = "tenant/7"
	r := b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{a, c}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	wf := decodeAs[wfView](t, r)
	require.Len(t, wf.Nodes, 2)
	want := map[string]string{"a": "acme", "c": "tenant/7"}
	for _, n := range wf.Nodes {
		r = b.do(t, http.MethodGet, "/v1/queues/fw/jobs/"+n.JobID, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, want[n.Name], r.object(t)["flow_key"], "node %s", n.Name)
		j, err := b.client.Get(b.ctx, "fw", n.JobID)
		require.NoError(t, err)
		require.Equal(t, want[n.Name], j.FlowKey)
	}
	// A node without one has none.
	r = b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{wfNode("x", "fw")}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodGet, "/v1/queues/fw/jobs/"+decodeAs[wfView](t, r).Nodes[0].JobID, nil)
	require.NotContains(t, r.object(t), "flow_key")

	bad := wfNode("a", "fw")
	bad["job"].(map[string]any)["flow_key"] = "acme"
	bad["job"].(map[string]any)["debounce"] = map[string]any{"period": "5s"}
	requireError(t, b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{bad}}),
		http.StatusBadRequest, "invalid_argument", "nodes[0].job.debounce")
	bad["job"].(map[string]any)["flow_key"] = "a b"
	delete(bad["job"].(map[string]any), "debounce")
	requireError(t, b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{bad}}),
		http.StatusBadRequest, "invalid_argument", "nodes[0].job.flow_key")

	parent := b.enqueue(t, map[string]any{"queue": "fw"})
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "fw", "kind": "k", "flow_key": "acme",
		"debounce": map[string]any{"period": "5s"}, "depends_on": []map[string]any{{"queue": "fw", "id": parent.ID}}}),
		http.StatusBadRequest, "invalid_argument", "debounce")
	r = b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "fw", "kind": "k", "flow_key": "acme",
		"depends_on": []map[string]any{{"queue": "fw", "id": parent.ID}}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	after := r.object(t)
	r = b.do(t, http.MethodGet, "/v1/queues/fw/jobs/"+after["id"].(string), nil)
	require.Equal(t, "acme", r.object(t)["flow_key"], "a job with depends_on keeps its flow key")
}

// TestFlowCron: a cron entry's jobs take a flow_key, kept with the entry
// and given to each job; a debounce, an empty or a bad key are 400s.
func TestFlowCron(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.realCron = true })
	r := b.do(t, http.MethodPut, "/v1/cron/fc", map[string]any{"schedule": "@hourly", "queue": "fcq", "kind": "k", "flow_key": "tenant/7"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "tenant/7", r.object(t)["flow_key"])
	r = b.do(t, http.MethodGet, "/v1/cron/fc", nil)
	require.Equal(t, "tenant/7", r.object(t)["flow_key"])
	r = b.do(t, http.MethodPost, "/v1/cron/fc/trigger", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "tenant/7", r.object(t)["flow_key"])

	r = b.do(t, http.MethodPut, "/v1/cron/fc", map[string]any{"schedule": "@hourly", "queue": "fcq", "kind": "k"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, r.object(t), "flow_key", "replaced without one")

	for _, tt := range []struct {
		extra map[string]any
		field string
	}{
		{map[string]any{"flow_key": ""}, "flow_key"},
		{map[string]any{"flow_key": "a b"}, "flow_key"},
		{map[string]any{"flow_key": "acme", "debounce": map[string]any{"period": "5s"}}, "debounce"},
	} {
		body := map[string]any{"schedule": "@hourly", "queue": "fcq", "kind": "k"}
		for k, v := range tt.extra {
			body[k] = v
		}
		requireError(t, b.do(t, http.MethodPut, "/v1/cron/fc", body), http.StatusBadRequest, "invalid_argument", tt.field)
	}
}
