package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// TestOnRedisCluster: the API over a Redis Cluster: produce, the worker
// protocol, stats, and events (sharded pub/sub), across queues on several
// nodes.
func TestOnRedisCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	b := setup(t, func(sc *setupConfig) { sc.rdb = testutil.Cluster(t) })
	qs := []string{"c0", "c1", "c2", "c3", "c4", "c5"}
	s := b.openEvents(t, "?queue="+qs[0]+","+qs[1]+","+qs[2]+","+qs[3]+","+qs[4]+","+qs[5])
	for _, q := range qs {
		j := b.enqueue(t, map[string]any{"queue": q})
		ev := s.event()
		require.Equal(t, "enqueued", ev.typ)
		require.Equal(t, j.ID, ev.data["id"])

		c := b.claim(t, q, 1)
		require.Len(t, c, 1)
		require.Equal(t, "claimed", s.event().typ)
		r := b.do(t, http.MethodPost, "/v1/queues/"+q+"/jobs/"+j.ID+"/complete", map[string]any{"token": c[0].Token})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, "completed", s.event().typ)
	}
	r := b.do(t, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
		{"kind": "k", "queue": "c0"}, {"kind": "k", "queue": "c3"}, {"kind": "k", "queue": "c5", "delay": "1m"}}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodGet, "/v1/queues", nil)
	require.Equal(t, http.StatusOK, r.status)
	got := decodeAs[struct {
		Queues []map[string]any `json:"queues"`
	}](t, r).Queues
	require.Len(t, got, 6)
	require.Equal(t, float64(1), got[0]["completed_total"])
	require.Equal(t, float64(1), got[0]["pending"])
	require.Equal(t, float64(1), got[5]["scheduled"])
	r = b.do(t, http.MethodGet, "/v1/queues/c5/jobs?status=scheduled", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, decodeAs[listView](t, r).Jobs, 1)
}
