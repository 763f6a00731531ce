package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

func TestWorkerProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "w", "kind": "resize", "payload": map[string]any{"w": 10}})

	b.clock.Advance(1500 * time.Millisecond)
	r := b.do(t, http.MethodPost, "/v1/queues/w/claim", map[string]any{"max": 10, "visibility": "10s"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := r.object(t)["jobs"].([]any)
	require.Len(t, got, 1)
	claimed := got[0].(map[string]any)
	token, _ := claimed["token"].(string)
	require.NotEmpty(t, token)
	require.Equal(t, "processing", claimed["status"])
	require.Equal(t, float64(1), claimed["attempts"])
	require.Equal(t, float64(1), claimed["fence"], "the first claim's fencing number")
	requireSoonAfter(t, "2030-01-02T03:04:06.500Z", claimed["claimed_at"])
	requireSoonAfter(t, "2030-01-02T03:04:16.500Z", claimed["lease_until"])
	// The job as read has no token.
	r = b.do(t, http.MethodGet, "/v1/queues/w/jobs/"+j.ID, nil)
	require.NotContains(t, r.object(t), "token")

	t.Run("heartbeat", func(t *testing.T) {
		b.clock.Advance(time.Second)
		r := b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/heartbeat", map[string]any{"token": token, "extend": "1m"})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		hb := r.object(t)
		requireSoonAfter(t, "2030-01-02T03:05:07.500Z", hb["lease_until"])
		require.Equal(t, false, hb["cancel_requested"])
		require.Len(t, hb, 2)
		r = b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/heartbeat", map[string]any{"token": token})
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, hb["lease_until"], r.object(t)["lease_until"], "never shortened")
	})

	t.Run("stale token: 409 lease_lost, nothing changes", func(t *testing.T) {
		for _, op := range []string{"complete", "fail", "heartbeat"} {
			r := b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/"+op, map[string]any{"token": "not-the-token"})
			requireError(t, r, http.StatusConflict, "lease_lost", "")
		}
		got, err := b.client.Get(b.ctx, "w", j.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusProcessing, got.Status)
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, op := range []string{"complete", "fail", "heartbeat"} {
			path := "/v1/queues/w/jobs/" + j.ID + "/" + op
			requireError(t, b.do(t, http.MethodPost, path, `{}`), 400, "invalid_argument", "token")
			requireError(t, b.do(t, http.MethodPost, path, ``), 400, "invalid_argument", "")
			requireError(t, b.do(t, http.MethodPost, path, `{"token":"x","nope":1}`), 400, "invalid_argument", "nope")
			requireError(t, b.do(t, http.MethodPost, "/v1/queues/w/jobs/no.such/"+op, `{"token":"x"}`), 400, "invalid_argument", "id")
			requireError(t, b.do(t, http.MethodPost, "/v1/queues/w/jobs/nosuch/"+op, `{"token":"x"}`), 404, "not_found", "")
		}
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/heartbeat", `{"token":"x","extend":"1ms"}`), 400, "invalid_argument", "extend")
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/fail", `{"token":"x","retry_after":"-1s"}`), 400, "invalid_argument", "retry_after")
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/fail", `{"token":"x","retry_after":"1s","dead":true}`), 400, "invalid_argument", "retry_after")
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/complete", `{"token":"x","result":{`), 400, "invalid_argument", "")
	})

	t.Run("complete", func(t *testing.T) {
		b.clock.Advance(2 * time.Second)
		r := b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/complete", map[string]any{"token": token, "result": map[string]any{"ok": true}})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		done := decodeAs[jobView](t, r)
		require.Equal(t, "completed", done.Status)
		requireSoonAfter(t, "2030-01-02T03:04:09.500Z", done.CompletedAt)
		require.JSONEq(t, `{"ok":true}`, string(done.Result))
		// Completing again with the same token is idempotent (a retried
		// request); with another token it is not.
		r = b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/complete", map[string]any{"token": token})
		require.Equal(t, http.StatusOK, r.status)
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/w/jobs/"+j.ID+"/fail", map[string]any{"token": token}), 409, "lease_lost", "")
	})
}

// A server whose clock is minutes off Redis's: a fail's retry_after and a
// reschedule's delay count on Redis's clock, as an enqueue's delay does
// (made instants of the server's clock, they would be minutes off).
func TestDelaysOfASkewedServerCountOnRedisClock(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-5 * time.Minute, 5 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			rdb := testutil.Redis(t)
			b := setup(t, func(sc *setupConfig) { sc.rdb, sc.clock = rdb, testutil.SkewedClock(skew) })
			redisNow := func() time.Time { return testutil.RedisTime(t, rdb) }
			// due requires the job's run_at d after an instant in [from, to].
			due := func(r response, from, to time.Time, d time.Duration) {
				t.Helper()
				require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
				at, err := time.Parse(time.RFC3339Nano, *decodeAs[jobView](t, r).RunAt)
				require.NoError(t, err)
				testutil.RequireDueAfter(t, at, from, to, d)
			}
			j := b.enqueue(t, map[string]any{"queue": "sk"})
			tok := b.claim(t, "sk", 1)[0].Token
			from := redisNow()
			r := b.do(t, http.MethodPost, "/v1/queues/sk/jobs/"+j.ID+"/fail", map[string]any{"token": tok, "error": "e", "retry_after": "2s"})
			due(r, from, redisNow(), 2*time.Second)

			from = redisNow()
			r = b.do(t, http.MethodPatch, "/v1/queues/sk/jobs/"+j.ID, map[string]any{"delay": "1m"})
			due(r, from, redisNow(), time.Minute)
		})
	}
}

func TestFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, map[string]any{"queue": "f", "max_attempts": 3, "backoff": map[string]any{"initial": "10s", "jitter": 0}})

	tok := b.claim(t, "f", 1)[0].Token
	r := b.do(t, http.MethodPost, "/v1/queues/f/jobs/"+j.ID+"/fail", map[string]any{"token": tok, "error": "boom"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := decodeAs[jobView](t, r)
	require.Equal(t, "scheduled", got.Status)
	require.Equal(t, "boom", *got.LastError)
	requireSoonAfter(t, "2030-01-02T03:04:15.000Z", got.RunAt, "Redis's now + 10 s of backoff")

	// retry_after instead of the backoff.
	b.clock.Advance(10 * time.Second)
	_, _, err := b.client.Promote(b.ctx, "f", 0)
	require.NoError(t, err)
	tok = b.claim(t, "f", 1)[0].Token
	r = b.do(t, http.MethodPost, "/v1/queues/f/jobs/"+j.ID+"/fail", map[string]any{"token": tok, "error": "later", "retry_after": "1m"})
	require.Equal(t, http.StatusOK, r.status)
	requireSoonAfter(t, "2030-01-02T03:05:15.000Z", decodeAs[jobView](t, r).RunAt, "Redis's now + 1 m")

	// dead: true ends it whatever attempts are left.
	b.clock.Advance(time.Minute)
	_, _, err = b.client.Promote(b.ctx, "f", 0)
	require.NoError(t, err)
	tok = b.claim(t, "f", 1)[0].Token
	r = b.do(t, http.MethodPost, "/v1/queues/f/jobs/"+j.ID+"/fail", map[string]any{"token": tok, "error": "fatal", "dead": true})
	require.Equal(t, http.StatusOK, r.status)
	got = decodeAs[jobView](t, r)
	require.Equal(t, "dead", got.Status)
	require.Equal(t, 3, got.Attempts)
}

func TestClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("several at once, empty list when none", func(t *testing.T) {
		for range 3 {
			b.enqueue(t, map[string]any{"queue": "c"})
		}
		require.Len(t, b.claim(t, "c", 2), 2)
		require.Len(t, b.claim(t, "c", 2), 1)
		r := b.do(t, http.MethodPost, "/v1/queues/c/claim", nil)
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{"jobs":[]}`, string(r.body))
	})

	t.Run("invalid", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"wait":"31s"}`:            "wait",
			`{"wait":"-1s"}`:            "wait",
			`{"wait":5}`:                "wait",
			`{"max":0}`:                 "max",
			`{"max":1001}`:              "max",
			`{"visibility":"1ms"}`:      "visibility",
			`{"visibility":"1s","x":1}`: "x",
		} {
			requireError(t, b.do(t, http.MethodPost, "/v1/queues/c/claim", body), 400, "invalid_argument", field)
		}
		requireError(t, b.do(t, http.MethodPost, "/v1/queues/C/claim", nil), 400, "invalid_argument", "queue")
	})

	t.Run("long poll wakes on a new job", func(t *testing.T) {
		got := make(chan response, 1)
		go func() { got <- b.do(t, http.MethodPost, "/v1/queues/lp/claim", map[string]any{"wait": "20s"}) }()
		// Whether the claim is parked in BLMOVE yet or not, it gets this job.
		j := b.enqueue(t, map[string]any{"queue": "lp"})
		select {
		case r := <-got:
			require.Equal(t, http.StatusOK, r.status)
			jobs := decodeAs[jobsView](t, r).Jobs
			require.Len(t, jobs, 1)
			require.Equal(t, j.ID, jobs[0].ID)
		case <-time.After(15 * time.Second):
			t.Fatal("long poll did not wake")
		}
	})

	t.Run("long poll answers empty after wait", func(t *testing.T) {
		start := time.Now()
		r := b.do(t, http.MethodPost, "/v1/queues/empty/claim", map[string]any{"wait": "200ms"})
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, `{"jobs":[]}`, string(r.body))
		require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond) // Redis's BLMOVE timeout
	})

	t.Run("drain ends long polls", func(t *testing.T) {
		b := setup(t)
		got := make(chan response, 1)
		go func() { got <- b.do(t, http.MethodPost, "/v1/queues/d/claim", map[string]any{"wait": "30s"}) }()
		b.srv.Drain()
		select {
		case r := <-got:
			require.Equal(t, http.StatusOK, r.status)
			require.JSONEq(t, `{"jobs":[]}`, string(r.body))
		case <-time.After(10 * time.Second):
			t.Fatal("drain did not end the long poll")
		}
	})
}

// Concurrent completes of one queue go to Redis in batches (see
// completer); each request still gets its own job, or its own error.
func TestConcurrentCompletesEachGetTheirJob(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.queue.MaxPayloadBytes = 100 })
	const n = 24
	for i := range n {
		b.enqueue(t, map[string]any{"queue": "cc", "payload": i})
	}
	jobs := b.claim(t, "cc", n)
	require.Len(t, jobs, n)
	var wg sync.WaitGroup
	res := make([]response, n+1)
	for i, j := range jobs {
		wg.Go(func() {
			res[i] = b.do(t, http.MethodPost, "/v1/queues/cc/jobs/"+j.ID+"/complete",
				map[string]any{"token": j.Token, "result": map[string]any{"i": i}})
		})
	}
	wg.Go(func() { // a stale token among them: its own 409
		res[n] = b.do(t, http.MethodPost, "/v1/queues/cc/jobs/"+jobs[0].ID+"/complete", map[string]any{"token": "stale"})
	})
	var big response
	wg.Go(func() { // and a result over the cap: its own 413, the job left as it is
		big = b.do(t, http.MethodPost, "/v1/queues/cc/jobs/"+jobs[1].ID+"/complete",
			map[string]any{"token": jobs[1].Token, "result": strings.Repeat("x", 200)})
	})
	wg.Wait()
	requireError(t, big, 413, "payload_too_large", "result")
	for i, j := range jobs {
		require.Equal(t, http.StatusOK, res[i].status, "body: %s", res[i].body)
		got := decodeAs[jobView](t, res[i])
		require.Equal(t, j.ID, got.ID)
		require.Equal(t, "completed", got.Status)
		require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(got.Result))
		require.JSONEq(t, string(j.Payload), string(got.Payload))
	}
	requireError(t, res[n], 409, "lease_lost", "")
	r := b.do(t, http.MethodGet, "/v1/queues/cc", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, float64(n), r.object(t)["completed_total"])
}

// Concurrent failures of one queue go to Redis in batches (see failer);
// each request still gets its own job as its failure left it, or its own
// error, coalesced or sent alone, and a repeated request answers the job
// again.
func TestConcurrentFailsEachGetTheirJob(t *testing.T) {
	t.Parallel()
	for _, alone := range []bool{false, true} {
		b := setup(t, func(sc *setupConfig) { sc.api.DisableCoalescing = alone })
		const n = 24
		for i := range n {
			b.enqueue(t, map[string]any{"queue": "cf", "payload": i, "max_attempts": 3})
		}
		jobs := b.claim(t, "cf", n)
		require.Len(t, jobs, n)
		body := func(i int, tok string) map[string]any {
			if i%2 == 0 {
				return map[string]any{"token": tok, "error": fmt.Sprintf("boom %d", i), "retry_after": "1m"}
			}
			return map[string]any{"token": tok, "error": fmt.Sprintf("boom %d", i), "dead": true}
		}
		var wg sync.WaitGroup
		res := make([]response, n+1)
		for i, j := range jobs {
			wg.Go(func() { res[i] = b.do(t, http.MethodPost, "/v1/queues/cf/jobs/"+j.ID+"/fail", body(i, j.Token)) })
		}
		wg.Go(func() { // a stale token among them: its own 409
			res[n] = b.do(t, http.MethodPost, "/v1/queues/cf/jobs/"+jobs[0].ID+"/fail", map[string]any{"token": "stale", "error": "x"})
		})
		wg.Wait()
		for i, j := range jobs {
			require.Equal(t, http.StatusOK, res[i].status, "body: %s", res[i].body)
			got := decodeAs[jobView](t, res[i])
			require.Equal(t, j.ID, got.ID)
			require.Equal(t, map[bool]string{true: "scheduled", false: "dead"}[i%2 == 0], got.Status)
			require.Equal(t, fmt.Sprintf("boom %d", i), *got.LastError)
			require.JSONEq(t, string(j.Payload), string(got.Payload))
			require.Equal(t, 1, got.Attempts)
			if i < 2 { // the same request again: the same job, nothing recorded twice
				again := b.do(t, http.MethodPost, "/v1/queues/cf/jobs/"+j.ID+"/fail", body(i, j.Token))
				require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
				require.JSONEq(t, string(res[i].body), string(again.body))
			}
		}
		requireError(t, res[n], 409, "lease_lost", "")
		r := b.do(t, http.MethodGet, "/v1/queues/cf", nil)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, float64(n), r.object(t)["failed_total"])
	}
}

// A server whose engine keeps no finished job answers a complete 204, the
// first and a repeated one, coalesced or not.
func TestCompleteAnswersNoContentWhenNothingIsKept(t *testing.T) {
	t.Parallel()
	for _, alone := range []bool{false, true} {
		b := setup(t, func(sc *setupConfig) { sc.queue.Retention = -1; sc.api.DisableCoalescing = alone })
		j := b.running(t, "gone")
		for range 2 {
			r := b.do(t, http.MethodPost, "/v1/queues/gone/jobs/"+j.ID+"/complete", map[string]any{"token": j.Token})
			require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
		}
		requireError(t, b.do(t, http.MethodGet, "/v1/queues/gone/jobs/"+j.ID, nil), 404, "not_found", "")
	}
}

// Concurrent claims of one queue go to Redis in batches (see claimer);
// each job goes to one request, and each request gets at most its max.
func TestConcurrentClaimsShareTheJobsOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const jobs, claims = 10, 16
	for i := range jobs {
		b.enqueue(t, map[string]any{"queue": "share", "payload": i})
	}
	var wg sync.WaitGroup
	got := make([][]jobView, claims)
	for i := range claims {
		wg.Go(func() { got[i] = b.claim(t, "share", 1) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, js := range got {
		require.LessOrEqual(t, len(js), 1)
		for _, j := range js {
			require.False(t, seen[j.ID], "job %s claimed twice", j.ID)
			seen[j.ID] = true
			require.Equal(t, "processing", j.Status)
			require.NotEmpty(t, j.Token)
		}
	}
	require.Len(t, seen, jobs)
}

// A failure whose job is no longer kept answers 204: a job whose
// cancellation was requested ends canceled, which a server that keeps no
// finished jobs deletes at once; the first request and a repeated one,
// coalesced or not.
func TestFailAnswersNoContentWhenNothingIsKept(t *testing.T) {
	t.Parallel()
	for _, alone := range []bool{false, true} {
		b := setup(t, func(sc *setupConfig) { sc.queue.Retention = -1; sc.api.DisableCoalescing = alone })
		j := b.running(t, "gone")
		_, err := b.client.Cancel(b.ctx, "gone", j.ID) // running: a cancel request
		require.NoError(t, err)
		for range 2 {
			r := b.do(t, http.MethodPost, "/v1/queues/gone/jobs/"+j.ID+"/fail", map[string]any{"token": j.Token, "error": "x"})
			require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
		}
		requireError(t, b.do(t, http.MethodGet, "/v1/queues/gone/jobs/"+j.ID, nil), 404, "not_found", "")
	}
}
