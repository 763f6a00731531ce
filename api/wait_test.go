package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// waitFor sends a request that waits (?wait) in the background and answers
// its response once the server's store counts it waiting (the bundle's
// client has no other waiter).
func (b *testBundle) waitFor(t *testing.T, method, path string, body any) <-chan response {
	t.Helper()
	got := make(chan response, 1)
	go func() { got <- b.do(t, method, path, body) }()
	require.Eventually(t, func() bool { return plumbing.Of(b.client).JobWaiters() == 1 }, 10*time.Second, time.Millisecond,
		"the request waits")
	return got
}

// claimJob claims the one pending job of q through the store.
func (b *testBundle) claimJob(t *testing.T, q string) *queue.Job {
	t.Helper()
	js, err := b.client.Claim(b.ctx, q, queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, js, 1)
	return js[0]
}

func TestGetJobWaitsForItsEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The fake clock does not move by itself: these waits end by the job.
	t.Run("Completed", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "w1"})
		got := b.waitFor(t, http.MethodGet, "/v1/queues/w1/jobs/"+j.ID+"?wait=30s", nil)
		c := b.claimJob(t, "w1")
		require.NoError(t, b.client.Complete(b.ctx, "w1", c.ID, c.Token, queue.CompleteOptions{Result: json.RawMessage(`{"sum":3}`)}))
		r := <-got
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		v := decodeAs[jobView](t, r)
		require.Equal(t, "completed", v.Status)
		require.JSONEq(t, `{"sum":3}`, string(v.Result))
	})
	t.Run("DeadAfterARetry", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "w2", "max_attempts": 2})
		got := b.waitFor(t, http.MethodGet, "/v1/queues/w2/jobs/"+j.ID+"?wait=30s", nil)
		c := b.claimJob(t, "w2")
		res, err := b.client.Fail(b.ctx, "w2", c.ID, c.Token, queue.FailOptions{Error: "first", RetryAt: b.clock.Now()})
		require.NoError(t, err)
		require.NotEqual(t, queue.StatusDead, res.Status, "retried")
		c = b.claimJob(t, "w2") // the wait goes on through the retry
		_, err = b.client.Fail(b.ctx, "w2", c.ID, c.Token, queue.FailOptions{Error: "second"})
		require.NoError(t, err)
		r := <-got
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		v := decodeAs[jobView](t, r)
		require.Equal(t, "dead", v.Status)
		require.Equal(t, 2, v.Attempts, "answered at its end, not at the retry")
		require.Equal(t, "second", *v.LastError)
	})
	t.Run("Canceled", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "w3"})
		got := b.waitFor(t, http.MethodGet, "/v1/queues/w3/jobs/"+j.ID+"?wait=30s", nil)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodDelete, "/v1/queues/w3/jobs/"+j.ID, nil).status)
		r := <-got
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, "canceled", decodeAs[jobView](t, r).Status)
	})
	t.Run("TheWaitRunsOut", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "w4"})
		got := b.waitFor(t, http.MethodGet, "/v1/queues/w4/jobs/"+j.ID+"?wait=10s", nil)
		b.clock.Advance(10 * time.Second)
		r := <-got
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		v := decodeAs[jobView](t, r)
		require.Equal(t, j.ID, v.ID)
		require.Equal(t, "pending", v.Status, "the job as it is")
	})
	t.Run("AnEndedJobAtOnce", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "w5"})
		c := b.claimJob(t, "w5")
		require.NoError(t, b.client.Complete(b.ctx, "w5", c.ID, c.Token, queue.CompleteOptions{}))
		r := b.do(t, http.MethodGet, "/v1/queues/w5/jobs/"+j.ID+"?wait=30s", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, "completed", decodeAs[jobView](t, r).Status)
	})
	t.Run("Errors", func(t *testing.T) {
		j := b.enqueue(t, map[string]any{"queue": "w6"})
		requireError(t, b.do(t, http.MethodGet, "/v1/queues/w6/jobs/0192f3c4a1b27c9e8d1f0a3b4c5d6e7f?wait=30s", nil),
			404, "not_found", "")
		for _, bad := range []string{"soon", "31s", "-1s", "10"} {
			e := requireError(t, b.do(t, http.MethodGet, "/v1/queues/w6/jobs/"+j.ID+"?wait="+bad, nil), 400, "invalid_argument", "wait")
			require.Contains(t, e.Message, bad)
		}
		requireError(t, b.do(t, http.MethodGet, "/v1/queues/w6/jobs/"+j.ID+"?wait=1s&wait=2s", nil), 400, "invalid_argument", "wait")
		r := b.do(t, http.MethodGet, "/v1/queues/w6/jobs/"+j.ID+"?wait=0s", nil)
		require.Equal(t, http.StatusOK, r.status, "wait 0: no wait")
		require.Equal(t, "pending", decodeAs[jobView](t, r).Status)
	})
	require.Zero(t, plumbing.Of(b.client).JobWaiters())
}

func TestEnqueueWaitsForTheJobsEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("Completed", func(t *testing.T) {
		got := b.waitFor(t, http.MethodPost, "/v1/jobs?wait=30s", map[string]any{"queue": "e1", "kind": "add"})
		c := b.claimJob(t, "e1")
		require.NoError(t, b.client.Complete(b.ctx, "e1", c.ID, c.Token, queue.CompleteOptions{Result: json.RawMessage(`[1,2]`)}))
		r := <-got
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		require.Equal(t, "/v1/queues/e1/jobs/"+c.ID, r.header.Get("Location"))
		v := decodeAs[jobView](t, r)
		require.Equal(t, "completed", v.Status)
		require.JSONEq(t, `[1,2]`, string(v.Result))
	})
	t.Run("IntoTheQueueOfThePathUntilTheWaitRunsOut", func(t *testing.T) {
		got := b.waitFor(t, http.MethodPost, "/v1/queues/e2/jobs?wait=2s", map[string]any{"kind": "add"})
		b.clock.Advance(2 * time.Second)
		r := <-got
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		require.Equal(t, "pending", decodeAs[jobView](t, r).Status)
	})
	t.Run("ABadWaitEnqueuesNothing", func(t *testing.T) {
		requireError(t, b.do(t, http.MethodPost, "/v1/jobs?wait=1h", map[string]any{"queue": "e3", "kind": "add"}),
			400, "invalid_argument", "wait")
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/e3/jobs?wait=x", map[string]any{"kind": "add"}),
			400, "invalid_argument", "wait")
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.NotContains(t, qs, "e3", "no job, no queue")
	})
	require.Zero(t, plumbing.Of(b.client).JobWaiters())
}

// A job with depends_on waits for its parent, and its enqueue's wait goes
// on through that, to the job's own end.
func TestEnqueueAfterWaitsForTheJobsEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, withWorkflows)
	parent := b.enqueue(t, map[string]any{"queue": "p"})
	got := b.waitFor(t, http.MethodPost, "/v1/jobs?wait=30s", map[string]any{"queue": "c", "kind": "child",
		"depends_on": []map[string]string{{"queue": "p", "id": parent.ID}}})
	pc := b.claimJob(t, "p")
	require.NoError(t, b.client.Complete(b.ctx, "p", pc.ID, pc.Token, queue.CompleteOptions{}))
	var cc *queue.Job
	require.Eventually(t, func() bool {
		b.releaser.Pass(b.ctx)
		js, err := b.client.Claim(b.ctx, "c", queue.ClaimOptions{})
		require.NoError(t, err)
		if len(js) == 1 {
			cc = js[0]
		}
		return cc != nil
	}, 10*time.Second, 5*time.Millisecond, "the child is released")
	require.NoError(t, b.client.Complete(b.ctx, "c", cc.ID, cc.Token, queue.CompleteOptions{Result: json.RawMessage(`"done"`)}))
	r := <-got
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	v := decodeAs[jobView](t, r)
	require.Equal(t, cc.ID, v.ID)
	require.Equal(t, "completed", v.Status)
	require.JSONEq(t, `"done"`, string(v.Result))
}

// A server that drains answers its waits with the job as it is.
func TestDrainEndsTheWaits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "d"})
	got := b.waitFor(t, http.MethodGet, "/v1/queues/d/jobs/"+j.ID+"?wait=30s", nil)
	b.srv.Drain()
	r := <-got
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "pending", decodeAs[jobView](t, r).Status)
}

// Config.MaxWaits caps the requests waiting for a job's end: past it a
// wait is a 503 before anything is done (an enqueue enqueues nothing),
// while requests without a wait go on; a wait that ended gives its place
// back.
func TestWaitsAreCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.api.MaxWaits = 1 })
	j := b.enqueue(t, map[string]any{"queue": "cap"})
	held := b.waitFor(t, http.MethodGet, "/v1/queues/cap/jobs/"+j.ID+"?wait=30s", nil)

	r := b.do(t, http.MethodGet, "/v1/queues/cap/jobs/"+j.ID+"?wait=1s", nil)
	e := requireError(t, r, http.StatusServiceUnavailable, "unavailable", "")
	require.Contains(t, e.Message, "too many requests wait for a job's end (1)")
	r = b.do(t, http.MethodPost, "/v1/jobs?wait=1s", map[string]any{"queue": "cap", "kind": "test"})
	requireError(t, r, http.StatusServiceUnavailable, "unavailable", "")
	st, err := b.client.Stats(b.ctx, "cap")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Pending, "the refused enqueue enqueued nothing")
	r = b.do(t, http.MethodGet, "/v1/queues/cap/jobs/"+j.ID, nil) // no wait: no place taken
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodGet, "/v1/queues/cap/jobs/"+j.ID+"?wait=0s", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	c := b.claimJob(t, "cap")
	require.NoError(t, b.client.Complete(b.ctx, "cap", c.ID, c.Token, queue.CompleteOptions{}))
	require.Equal(t, http.StatusOK, (<-held).status)
	// Its place is back: an enqueue that waits is taken, and answers the
	// job as it is when its wait runs out (the fake clock moves it).
	got := b.waitFor(t, http.MethodPost, "/v1/jobs?wait=1s", map[string]any{"queue": "cap", "kind": "test"})
	b.clock.Advance(time.Second)
	r = <-got
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "pending", decodeAs[jobView](t, r).Status)
}
