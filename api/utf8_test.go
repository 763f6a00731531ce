package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
)

// bad is a byte that UTF-8 never holds.
const bad = "\xfe"

// requireNotUTF8 checks the answer to a body that is not valid UTF-8: a
// 400 naming the member that holds the bad byte and saying what is wrong.
func requireNotUTF8(t *testing.T, r response, field string) {
	t.Helper()
	e := requireError(t, r, http.StatusBadRequest, "invalid_argument", field)
	require.Contains(t, e.Message, "not valid UTF-8")
}

// TestInvalidUTF8Payloads: a payload that is not valid UTF-8 is refused
// at every way in (a job, a batch, a workflow's node, a cron entry), and
// nothing is enqueued.
func TestInvalidUTF8Payloads(t *testing.T) {
	t.Parallel()
	b := setup(t, withWorkflows, withCron)
	requireNotUTF8(t, b.do(t, http.MethodPost, "/v1/jobs", `{"queue":"u","kind":"k","payload":{"to":"a`+bad+`"}}`), "payload.to")
	requireNotUTF8(t, b.do(t, http.MethodPost, "/v1/queues/u/jobs", `{"kind":"k","payload":"`+bad+`"}`), "payload")
	requireNotUTF8(t, b.do(t, http.MethodPost, "/v1/jobs/batch",
		`{"jobs":[{"queue":"u","kind":"a"},{"queue":"u","kind":"b","payload":["`+bad+`"]}]}`), "jobs[1].payload[0]")
	requireNotUTF8(t, b.do(t, http.MethodPost, "/v1/workflows",
		`{"nodes":[{"name":"a","job":{"queue":"u","kind":"k","payload":{"x":"`+bad+`"}}}]}`), "nodes[0].job.payload.x")
	requireNotUTF8(t, b.do(t, http.MethodPut, "/v1/cron/nightly",
		`{"schedule":"@daily","job":{"queue":"u","kind":"k","payload":"`+bad+`"}}`), "job.payload")
	// A kind, a member name: any string of the body.
	requireNotUTF8(t, b.do(t, http.MethodPost, "/v1/jobs", `{"queue":"u","kind":"k`+bad+`"}`), "kind")
	st, err := b.client.Stats(b.ctx, "u")
	require.NoError(t, err)
	require.Zero(t, st.Pending+st.Scheduled, "nothing enqueued")
}

// TestInvalidUTF8Results: a result that is not valid UTF-8 is refused and
// the job stays claimed, its lease intact: a good result completes it.
func TestInvalidUTF8Results(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "u")
	base := "/v1/queues/u/jobs/" + j.ID
	requireNotUTF8(t, b.do(t, http.MethodPost, base+"/complete", `{"token":"`+j.Token+`","result":{"n":"`+bad+`"}}`), "result.n")
	requireNotUTF8(t, b.do(t, http.MethodPost, base+"/fail", `{"token":"`+j.Token+`","error":"boom `+bad+`"}`), "error")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, base+"/complete", `{"token":"`+j.Token+`","result":{"n":"é"}}`).status)
	got, err := b.client.Get(b.ctx, "u", j.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":"é"}`, string(got.Result))
}

// TestInvalidUTF8Artifacts: an artifact's value that is not valid UTF-8 is
// refused and not kept.
func TestInvalidUTF8Artifacts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "u")
	base := "/v1/queues/u/jobs/" + j.ID
	requireNotUTF8(t, b.do(t, http.MethodPut, base+"/artifacts/report", `{"token":"`+j.Token+`","value":{"rows":"`+bad+`"}}`), "value.rows")
	arts, err := b.client.Artifacts(b.ctx, "u", j.ID)
	require.NoError(t, err)
	require.NotContains(t, string(arts), "report")
}

// TestInvalidUTF8Logs: log lines (and a heartbeat's progress message)
// that are not valid UTF-8 are refused, not kept with U+FFFD in place of
// the bad bytes.
func TestInvalidUTF8Logs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "u")
	base := "/v1/queues/u/jobs/" + j.ID
	requireNotUTF8(t, b.do(t, http.MethodPost, base+"/logs", `{"token":"`+j.Token+`","lines":["ok","bad `+bad+`"]}`), "lines[1]")
	requireNotUTF8(t, b.do(t, http.MethodPost, base+"/heartbeat",
		`{"token":"`+j.Token+`","progress":{"percent":5,"message":"`+bad+`"}}`), "progress.message")
	page, err := b.client.Logs(b.ctx, "u", j.ID, 0, 10)
	require.NoError(t, err)
	require.Empty(t, page.Lines)
}

// TestInvalidUTF8EveryRoute: every route that reads a JSON body refuses
// one that is not valid UTF-8, before anything else is looked at.
func TestInvalidUTF8EveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, withWorkflows, withCron, withPush(dispatch.Guard{}))
	body := `{"x":"` + bad + `"}`
	for _, route := range []struct{ method, path string }{
		{http.MethodPost, "/v1/jobs"},
		{http.MethodPost, "/v1/jobs/batch"},
		{http.MethodPost, "/v1/queues/u/jobs"},
		{http.MethodPatch, "/v1/queues/u/jobs/01JDQ4ZJ8Y3K6V6W0M6R5T2B1C"},
		{http.MethodPost, "/v1/queues/u/dead/retry"},
		{http.MethodPost, "/v1/queues/u/claim"},
		{http.MethodPost, "/v1/queues/u/jobs/01JDQ4ZJ8Y3K6V6W0M6R5T2B1C/complete"},
		{http.MethodPost, "/v1/queues/u/jobs/01JDQ4ZJ8Y3K6V6W0M6R5T2B1C/fail"},
		{http.MethodPost, "/v1/queues/u/jobs/01JDQ4ZJ8Y3K6V6W0M6R5T2B1C/heartbeat"},
		{http.MethodPost, "/v1/queues/u/jobs/01JDQ4ZJ8Y3K6V6W0M6R5T2B1C/cancel"},
		{http.MethodPut, "/v1/queues/u/jobs/01JDQ4ZJ8Y3K6V6W0M6R5T2B1C/artifacts/a"},
		{http.MethodPost, "/v1/queues/u/jobs/01JDQ4ZJ8Y3K6V6W0M6R5T2B1C/logs"},
		{http.MethodPut, "/v1/queues/u/limits"},
		{http.MethodPut, "/v1/queues/u/config"},
		{http.MethodPut, "/v1/cron/nightly"},
		{http.MethodPost, "/v1/workflows"},
		{http.MethodPut, "/v1/workers/w1"},
	} {
		requireNotUTF8(t, b.do(t, route.method, route.path, body), "x")
	}
}
