package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Worker labels over HTTP: a job's labels are kept and shown, a claim
// with labels receives only jobs it has every label of, and bad labels
// are a 400 naming the field (each exchange held to the OpenAPI
// document).
func TestLabels(t *testing.T) {
	t.Parallel()
	testLabels(t, setup(t))
}

// TestLabelsOnRedisCluster: the same over a Redis Cluster.
func TestLabelsOnRedisCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	testLabels(t, setup(t, func(sc *setupConfig) { sc.rdb = testutil.Cluster(t) }))
}

func testLabels(t *testing.T, b *testBundle) {
	claimWith := func(t *testing.T, q string, body map[string]any) []jobView {
		t.Helper()
		r := b.do(t, http.MethodPost, "/v1/queues/"+q+"/claim", body)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		return decodeAs[jobsView](t, r).Jobs
	}

	t.Run("matched as subsets", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "l", "labels": []string{"linux", "gpu", "gpu"}})
		r := b.do(t, http.MethodGet, "/v1/queues/l/jobs/"+j.ID, nil)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, []any{"gpu", "linux"}, r.object(t)["labels"], "sorted, without duplicates")
		plain := b.enqueue(t, map[string]any{"queue": "l"})
		got := claimWith(t, "l", map[string]any{"max": 10, "labels": []string{"gpu"}})
		require.Len(t, got, 1, "gpu alone: only the job without labels")
		require.Equal(t, plain.ID, got[0].ID)
		got = claimWith(t, "l", map[string]any{"max": 10, "labels": []string{"x86", "gpu", "linux"}})
		require.Len(t, got, 1)
		require.Equal(t, j.ID, got[0].ID)
		require.NotEmpty(t, got[0].Token)
		require.Empty(t, claimWith(t, "l", map[string]any{"max": 10}))
	})

	t.Run("unmatched jobs wait for the right claimer", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "u", "labels": []string{"arch=arm64"}})
		require.Empty(t, claimWith(t, "u", map[string]any{"max": 10}))
		require.Empty(t, claimWith(t, "u", map[string]any{"max": 10, "labels": nil}), "null is none")
		require.Empty(t, claimWith(t, "u", map[string]any{"max": 10, "labels": []string{"arch=amd64"}}))
		r := b.do(t, http.MethodGet, "/v1/queues/u", nil)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, float64(1), r.object(t)["pending"])
		got := claimWith(t, "u", map[string]any{"labels": []string{"arch=arm64"}})
		require.Len(t, got, 1)
		require.Equal(t, j.ID, got[0].ID)
	})

	t.Run("bad labels are a 400 naming the field", func(t *testing.T) {
		long := strings.Repeat("l", queue.MaxLabelBytes+1)
		many := make([]string, queue.MaxJobLabels+1)
		for i := range many {
			many[i] = fmt.Sprintf("l%d", i)
		}
		for _, body := range []map[string]any{
			{"kind": "k", "labels": []string{""}},
			{"kind": "k", "labels": []string{"a b"}},
			{"kind": "k", "labels": []string{"a,b"}},
			{"kind": "k", "labels": []string{long}},
			{"kind": "k", "labels": many},
			{"kind": "k", "labels": "gpu"},
			{"kind": "k", "labels": []int{1}},
		} {
			requireError(t, b.do(t, http.MethodPost, "/v1/jobs", body), 400, "invalid_argument", "labels")
		}
		r := b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
			{"kind": "k", "queue": "bad-labels"}, {"kind": "k", "queue": "bad-labels", "labels": []string{"é"}}}})
		requireError(t, r, 400, "invalid_argument", "jobs[1].labels")
		for _, body := range []string{`{"labels":["a|b"]}`, `{"labels":"gpu"}`, `{"labels":[""]}`} {
			requireError(t, b.do(t, http.MethodPost, "/v1/queues/c/claim", body), 400, "invalid_argument", "labels")
		}
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.NotContains(t, qs, "bad-labels", "nothing of the batch was enqueued")
	})

	t.Run("a new label set past the cap is a conflict", func(t *testing.T) {
		for i := range queue.MaxLabelSets {
			_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "cap", Kind: "k", Labels: []string{fmt.Sprintf("l%d", i)}})
			require.NoError(t, err)
		}
		e := requireError(t, b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"kind": "k", "queue": "cap", "labels": []string{"new"}}),
			409, "conflict", "labels")
		require.Contains(t, e.Message, "label sets")
		b.enqueue(t, map[string]any{"queue": "cap", "labels": []string{"l3"}}) // a set the queue has
	})
}
