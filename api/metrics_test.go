package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/stretchr/testify/require"
)

// scrape reads /metrics into "name{labels}" -> value.
func (b *testBundle) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	r := b.do(t, http.MethodGet, "/metrics", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.header.Get("Content-Type"), "text/plain")
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(r.body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "m", "delay": "2s"})
	b.enqueue(t, map[string]any{"queue": "m", "delay": "1h"})
	b.clock.Advance(2500 * time.Millisecond)
	_, _, err := b.client.Promote(b.ctx, "m", 0)
	require.NoError(t, err)
	b.srv.ObservePromote("m", 1)
	tok := b.claim(t, "m", 1)[0].Token // 500 ms late
	b.clock.Advance(3 * time.Second)
	r := b.do(t, http.MethodPost, "/v1/queues/m/jobs/"+j.ID+"/complete", map[string]any{"token": tok})
	require.Equal(t, http.StatusOK, r.status)
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/m/jobs/nosuch", nil), 404, "not_found", "")
	// Label values a client chooses are bounded: made-up methods and
	// unknown paths share one value each.
	requireError(t, b.do(t, "BREW", "/v1/jobs", nil), 405, "method_not_allowed", "")
	requireError(t, b.do(t, "MAKE", "/v1/jobs", nil), 405, "method_not_allowed", "")
	requireError(t, b.do(t, http.MethodGet, "/x/1", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, "/x/2", nil), 404, "not_found", "")

	m := b.scrape(t)
	for name, want := range map[string]float64{
		`chronoq_store_up`: 1,
		`chronoq_queue_jobs{queue="m",status="scheduled"}`:                                                    1,
		`chronoq_queue_jobs{queue="m",status="pending"}`:                                                      0,
		`chronoq_queue_jobs{queue="m",status="processing"}`:                                                   0,
		`chronoq_queue_jobs{queue="m",status="dead"}`:                                                         0,
		`chronoq_queue_paused{queue="m"}`:                                                                     0,
		`chronoq_jobs_total{outcome="enqueued",queue="m"}`:                                                    2,
		`chronoq_jobs_total{outcome="promoted",queue="m"}`:                                                    1,
		`chronoq_jobs_total{outcome="completed",queue="m"}`:                                                   1,
		`chronoq_job_lateness_seconds_count{queue="m"}`:                                                       1,
		`chronoq_job_lateness_seconds_sum{queue="m"}`:                                                         0.5,
		`chronoq_job_processing_seconds_count{queue="m"}`:                                                     1,
		`chronoq_job_processing_seconds_sum{queue="m"}`:                                                       3,
		`chronoq_promoter_batch_size_count{queue="m"}`:                                                        1,
		`chronoq_promoter_batch_size_sum{queue="m"}`:                                                          1,
		`chronoq_http_requests_total{code="201",method="POST",route="/v1/jobs"}`:                              2,
		`chronoq_http_requests_total{code="200",method="POST",route="/v1/queues/{queue}/claim"}`:              1,
		`chronoq_http_requests_total{code="200",method="POST",route="/v1/queues/{queue}/jobs/{id}/complete"}`: 1,
		`chronoq_http_requests_total{code="404",method="GET",route="/v1/queues/{queue}/jobs/{id}"}`:           1,
		`chronoq_http_request_duration_seconds_count{method="POST",route="/v1/jobs"}`:                         2,
	} {
		require.Contains(t, m, name)
		tolerance := 1e-9
		if strings.HasSuffix(name, `_seconds_sum{queue="m"}`) {
			tolerance = 0.5 // measured by Redis's clock, a little ahead of the fake one
		}
		require.InDelta(t, want, m[name], tolerance, name)
	}
	require.Contains(t, m, "go_goroutines")
}

func TestMetricsWithRedisDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, map[string]any{"queue": "m"})
	require.NoError(t, plumbing.Of(b.client).Redis().Close()) // every later command fails
	m := b.scrape(t)
	require.Equal(t, 0.0, m["chronoq_store_up"])
	require.NotContains(t, m, `chronoq_queue_paused{queue="m"}`)
}

// TestMetricsFlowKeys: chronoq_flow_keys counts a queue's keys with work,
// and chronoq_flow_key_jobs has series for its 10 keys with the most jobs
// only, however many keys there are: 15 keys, key i with i+1 jobs, one of
// each key claimed (the keys take turns), give series for k5 to k14, each
// with i pending and 1 in flight.
func TestMetricsFlowKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 15 {
		for range i + 1 {
			_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "fk", Kind: "k", FlowKey: fmt.Sprintf("k%d", i)})
			require.NoError(t, err)
		}
	}
	b.enqueue(t, map[string]any{"queue": "plain"}) // a queue without flow keys
	require.Len(t, b.claim(t, "fk", 15), 15)
	m := b.scrape(t)
	require.Equal(t, 15.0, m[`chronoq_flow_keys{queue="fk"}`])
	require.Contains(t, m, `chronoq_flow_keys{queue="plain"}`)
	require.Equal(t, 0.0, m[`chronoq_flow_keys{queue="plain"}`])
	series := map[string]float64{}
	for name, v := range m {
		if strings.HasPrefix(name, "chronoq_flow_key_jobs{") {
			series[name] = v
		}
	}
	require.Len(t, series, 2*10, "2 series (pending, in_flight) for each of the top 10 keys")
	for i := 5; i < 15; i++ {
		p := fmt.Sprintf(`chronoq_flow_key_jobs{key="k%d",queue="fk",state="pending"}`, i)
		f := fmt.Sprintf(`chronoq_flow_key_jobs{key="k%d",queue="fk",state="in_flight"}`, i)
		require.Contains(t, series, p)
		require.Contains(t, series, f)
		require.Equal(t, float64(i), series[p], p)
		require.Equal(t, 1.0, series[f], f)
	}
}
