package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

func withWorkflows(sc *setupConfig) { sc.workflows = true }

// wfView is the Workflow resource as a client reads it.
type wfView struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	OnFailure string  `json:"on_failure"`
	EndedAt   *string `json:"ended_at"`
	Nodes     []struct {
		Name      string   `json:"name"`
		DependsOn []string `json:"depends_on"`
		Queue     string   `json:"queue"`
		JobID     string   `json:"job_id"`
		Status    *string  `json:"status"`
		Attempts  int      `json:"attempts"`
		EndedAt   *string  `json:"ended_at"`
	} `json:"nodes"`
}

func (w wfView) status(name string) string {
	for _, n := range w.Nodes {
		if n.Name == name && n.Status != nil {
			return *n.Status
		}
	}
	return ""
}

// claimedNode is a claimed job with its workflow fields.
type claimedNode struct {
	ID       string `json:"id"`
	Token    string `json:"token"`
	Workflow struct {
		ID   string `json:"id"`
		Node string `json:"node"`
	} `json:"workflow"`
	Upstream map[string]struct {
		JobID     string          `json:"job_id"`
		Queue     string          `json:"queue"`
		Status    string          `json:"status"`
		Result    json.RawMessage `json:"result"`
		Artifacts json.RawMessage `json:"artifacts"`
		Error     string          `json:"error"`
	} `json:"upstream"`
}

func wfNode(name, q string, deps ...string) map[string]any {
	n := map[string]any{"name": name, "job": map[string]any{"queue": q, "kind": "step", "payload": map[string]any{"n": name}, "max_attempts": 1}}
	if len(deps) > 0 {
		n["depends_on"] = deps
	}
	return n
}

// claimNode claims the one job pending in q over HTTP.
func (b *testBundle) claimNode(t *testing.T, q string) claimedNode {
	t.Helper()
	r := b.do(t, http.MethodPost, "/v1/queues/"+q+"/claim", map[string]any{"max": 10})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	jobs := decodeAs[struct {
		Jobs []claimedNode `json:"jobs"`
	}](t, r).Jobs
	require.Len(t, jobs, 1, "body: %s", r.body)
	return jobs[0]
}

func (b *testBundle) completeNode(t *testing.T, q string, j claimedNode, result any) {
	t.Helper()
	r := b.do(t, http.MethodPost, "/v1/queues/"+q+"/jobs/"+j.ID+"/complete", map[string]any{"token": j.Token, "result": result})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	b.releaser.Pass(b.ctx)
}

func TestWorkflowsAPISingle(t *testing.T) {
	t.Parallel()
	workflowsAPI(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestWorkflowsAPICluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	workflowsAPI(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

func workflowsAPI(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	t.Run("DiamondOverHTTP", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withWorkflows, func(sc *setupConfig) { sc.rdb = newRDB(t) })
		r := b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{
			wfNode("fetch", "wf-a"), wfNode("left", "wf-b", "fetch"), wfNode("right", "wf-a", "fetch"), wfNode("join", "wf-b", "left", "right")}})
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		w := decodeAs[wfView](t, r)
		require.Equal(t, "/v1/workflows/"+w.ID, r.header.Get("Location"))
		require.Equal(t, "running", w.Status)
		require.Equal(t, "cancel", w.OnFailure)
		require.Equal(t, "pending", w.status("fetch"))
		require.Equal(t, "waiting", w.status("join"))

		// a waiting job reads as such, with its workflow
		var joinID string
		for _, n := range w.Nodes {
			if n.Name == "join" {
				joinID = n.JobID
			}
		}
		r = b.do(t, http.MethodGet, "/v1/queues/wf-b/jobs/"+joinID, nil)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "waiting", r.object(t)["status"])
		require.Equal(t, map[string]any{"id": w.ID, "node": "join"}, r.object(t)["workflow"])

		j := b.claimNode(t, "wf-a")
		require.Equal(t, "fetch", j.Workflow.Node)
		require.Equal(t, w.ID, j.Workflow.ID)
		require.Empty(t, j.Upstream)
		b.completeNode(t, "wf-a", j, map[string]any{"rows": 3})
		left, right := b.claimNode(t, "wf-b"), b.claimNode(t, "wf-a")
		require.Equal(t, "left", left.Workflow.Node)
		require.JSONEq(t, `{"rows":3}`, string(left.Upstream["fetch"].Result))
		require.Equal(t, "completed", left.Upstream["fetch"].Status)
		require.Equal(t, "wf-a", left.Upstream["fetch"].Queue)
		require.JSONEq(t, `null`, string(left.Upstream["fetch"].Artifacts))
		b.completeNode(t, "wf-b", left, "L")
		b.completeNode(t, "wf-a", right, "R")
		join := b.claimNode(t, "wf-b")
		require.JSONEq(t, `"L"`, string(join.Upstream["left"].Result))
		require.JSONEq(t, `"R"`, string(join.Upstream["right"].Result))
		b.completeNode(t, "wf-b", join, nil)

		r = b.do(t, http.MethodGet, "/v1/workflows/"+w.ID, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		w = decodeAs[wfView](t, r)
		require.Equal(t, "completed", w.Status)
		require.NotNil(t, w.EndedAt)
		for _, n := range w.Nodes {
			require.Equal(t, "completed", *n.Status)
			require.NotNil(t, n.EndedAt)
		}
		r = b.do(t, http.MethodGet, "/v1/workflows?limit=5", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		list := r.object(t)["workflows"].([]any)
		require.Len(t, list, 1)
		require.Equal(t, map[string]any{"completed": float64(4)}, list[0].(map[string]any)["counts"])
	})

	t.Run("RefusedGraphs", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withWorkflows, func(sc *setupConfig) { sc.rdb = newRDB(t) })
		post := func(body any) response { return b.do(t, http.MethodPost, "/v1/workflows", body) }
		e := requireError(t, post(map[string]any{"nodes": []any{wfNode("a", "q", "c"), wfNode("b", "q", "a"), wfNode("c", "q", "b")}}),
			400, "invalid_argument", "nodes")
		require.Contains(t, e.Message, "a -> b -> c -> a")
		big := make([]any, 1001)
		for i := range big {
			big[i] = wfNode(fmt.Sprintf("n%d", i), "q")
		}
		requireError(t, post(map[string]any{"nodes": big}), 400, "invalid_argument", "nodes")
		e = requireError(t, post(map[string]any{"nodes": []any{wfNode("a", "q"), wfNode("b", "q", "nope")}}), 400, "invalid_argument", "nodes[1].depends_on")
		require.Contains(t, e.Message, `"nope"`)
		requireError(t, post(map[string]any{"nodes": []any{wfNode("a", "q"), wfNode("a", "q")}}), 400, "invalid_argument", "nodes[1].name")
		requireError(t, post(map[string]any{"nodes": []any{wfNode("a", "q"), map[string]any{"name": "b", "job": map[string]any{"queue": "q"}}}}),
			400, "invalid_argument", "nodes[1].job.kind")
		requireError(t, post(map[string]any{"nodes": []any{map[string]any{"name": "b", "job": map[string]any{"kind": "k", "delay": "soon"}}}}),
			400, "invalid_argument", "nodes[0].job.delay")
		requireError(t, post(map[string]any{"nodes": []any{wfNode("a", "q")}, "on_failure": "shrug"}), 400, "invalid_argument", "on_failure")
		requireError(t, post(map[string]any{"nodes": []any{}}), 400, "invalid_argument", "nodes")
		requireError(t, post(`{"nodes":[{"name":"a","job":{"kind":"k"},"extra":1}]}`), 400, "invalid_argument", "nodes[0].extra")
		requireError(t, b.do(t, http.MethodGet, "/v1/workflows/"+strings.Repeat("0", 32), nil), 404, "not_found", "")
		requireError(t, b.do(t, http.MethodGet, "/v1/workflows?limit=0", nil), 400, "invalid_argument", "limit")
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Empty(t, qs, "nothing was written")
	})

	t.Run("FailureCancelRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withWorkflows, func(sc *setupConfig) { sc.rdb = newRDB(t) })
		r := b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{wfNode("a", "fr"), wfNode("b", "fr", "a"), wfNode("c", "fr", "b")}})
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		w := decodeAs[wfView](t, r)
		a := b.claimNode(t, "fr")
		r = b.do(t, http.MethodPost, "/v1/queues/fr/jobs/"+a.ID+"/fail", map[string]any{"token": a.Token, "error": "boom"})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		b.releaser.Pass(b.ctx)
		r = b.do(t, http.MethodGet, "/v1/workflows/"+w.ID, nil)
		w = decodeAs[wfView](t, r)
		require.Equal(t, "failed", w.Status)
		require.Equal(t, []string{"dead", "canceled", "canceled"}, []string{w.status("a"), w.status("b"), w.status("c")})
		requireError(t, b.do(t, http.MethodPost, "/v1/workflows/"+w.ID+"/cancel", nil), 409, "conflict", "")

		r = b.do(t, http.MethodPost, "/v1/workflows/"+w.ID+"/retry", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		w = decodeAs[wfView](t, r)
		require.Equal(t, "running", w.Status)
		require.Equal(t, []string{"pending", "waiting", "waiting"}, []string{w.status("a"), w.status("b"), w.status("c")})
		a = b.claimNode(t, "fr")
		b.completeNode(t, "fr", a, 1)

		r = b.do(t, http.MethodPost, "/v1/workflows/"+w.ID+"/cancel", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		w = decodeAs[wfView](t, r)
		require.Equal(t, "canceled", w.Status)
		require.Equal(t, []string{"completed", "canceled", "canceled"}, []string{w.status("a"), w.status("b"), w.status("c")})
		requireError(t, b.do(t, http.MethodPost, "/v1/workflows/"+strings.Repeat("1", 32)+"/retry", nil), 404, "not_found", "")
	})
}

// Without a workflow store the routes are not served, nor documented.
func TestWorkflowsRoutesNeedAStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireError(t, b.do(t, http.MethodGet, "/v1/workflows", nil), 404, "not_found", "")
	require.NotContains(t, string(b.srv.OpenAPI()), `"/v1/workflows"`)
}

func TestDependsOnAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, withWorkflows)
	parent := b.enqueue(t, map[string]any{"queue": "dp-a", "kind": "k"})
	r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "dp-b", "kind": "after",
		"depends_on": []any{map[string]any{"queue": "dp-a", "id": parent.ID}}, "on_failure": "continue"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	j := r.object(t)
	require.Equal(t, "waiting", j["status"])
	wfID := j["workflow"].(map[string]any)["id"].(string)

	// a second dependent of the same job
	r = b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "dp-c", "kind": "after",
		"depends_on": []any{map[string]any{"queue": "dp-a", "id": parent.ID}}, "on_failure": "continue"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	wfID2 := r.object(t)["workflow"].(map[string]any)["id"].(string)
	require.NotEqual(t, wfID, wfID2)
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "dp-b", "kind": "after",
		"depends_on": []any{map[string]any{"queue": "dp-a", "id": strings.Repeat("0", 32)}}}), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "after", "depends_on": []any{}}), 400, "invalid_argument", "depends_on")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "after",
		"depends_on": []any{map[string]any{"queue": "Bad", "id": "x"}}}), 400, "invalid_argument", "depends_on[0].queue")
	requireError(t, b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"kind": "k",
		"depends_on": []any{map[string]any{"queue": "dp-a", "id": parent.ID}}}}}), 400, "invalid_argument", "jobs[0].depends_on")

	p := b.claimNode(t, "dp-a")
	r = b.do(t, http.MethodPost, "/v1/queues/dp-a/jobs/"+p.ID+"/fail", map[string]any{"token": p.Token, "error": "boom", "dead": true})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	b.releaser.Pass(b.ctx)
	after := b.claimNode(t, "dp-b")
	require.Equal(t, wfID, after.Workflow.ID)
	require.Equal(t, "dead", after.Upstream[parent.ID].Status)
	require.Equal(t, "boom", after.Upstream[parent.ID].Error)
	after2 := b.claimNode(t, "dp-c")
	require.Equal(t, wfID2, after2.Workflow.ID)
	require.Equal(t, "dead", after2.Upstream[parent.ID].Status)
}

// A job enqueued after a workflow's node: the node runs its workflow's
// child and the job. A job has at most queue.MaxWatchers dependents: one
// more is a 409 naming the cap.
func TestDependsOnAPINodeAndCap(t *testing.T) {
	t.Parallel()
	b := setup(t, withWorkflows)
	r := b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{wfNode("a", "dn-a"), wfNode("b", "dn-b", "a")}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	w := decodeAs[wfView](t, r)
	dependOn := func(q string) response {
		return b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": q, "kind": "after",
			"depends_on": []any{map[string]any{"queue": "dn-a", "id": w.Nodes[0].JobID}}})
	}
	r = dependOn("dn-c")
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	a := b.claimNode(t, "dn-a")
	b.completeNode(t, "dn-a", a, map[string]any{"x": 1})
	b.releaser.Pass(b.ctx)
	for _, q := range []string{"dn-b", "dn-c"} {
		j := b.claimNode(t, q)
		require.JSONEq(t, `{"x":1}`, string(j.Upstream[map[string]string{"dn-b": "a", "dn-c": a.ID}[q]].Result), "in %s", q)
	}

	for range queue.MaxWatchers - 1 {
		require.Equal(t, http.StatusCreated, dependOn("dn-d").status)
	}
	e := requireError(t, dependOn("dn-d"), 409, "conflict", "")
	require.Contains(t, e.Message, fmt.Sprintf("has %d dependents already, the cap (queue.MaxWatchers)", queue.MaxWatchers))
}

// A workflow's events (enqueued waiting, ready, rearmed) are in the
// stream, each held to the document's EventMessage by the client.
func TestWorkflowEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, withWorkflows)
	s := b.openEvents(t, "?queue=ev")
	r := b.do(t, http.MethodPost, "/v1/workflows", map[string]any{"nodes": []any{wfNode("a", "ev"), wfNode("b", "ev", "a")}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	w := decodeAs[wfView](t, r)
	a := b.claimNode(t, "ev")
	r = b.do(t, http.MethodPost, "/v1/queues/ev/jobs/"+a.ID+"/fail", map[string]any{"token": a.Token, "error": "no"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	b.releaser.Pass(b.ctx)
	r = b.do(t, http.MethodPost, "/v1/workflows/"+w.ID+"/retry", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	a = b.claimNode(t, "ev")
	b.completeNode(t, "ev", a, nil)
	nodeB := w.Nodes[1].JobID
	seen := map[string]string{}
	for range 50 {
		e := s.event()
		seen[e.typ+"/"+e.data["status"].(string)] = e.data["id"].(string)
		if e.typ == "ready" && e.data["id"] == nodeB {
			break
		}
	}
	require.Contains(t, seen, "enqueued/waiting")
	require.Contains(t, seen, "ready/pending")
	require.Contains(t, seen, "rearmed/waiting")
	require.Contains(t, seen, "canceled/canceled")
	require.Equal(t, nodeB, seen["ready/pending"])
}
