package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/chronoq/chronoq/internal/plumbing"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// TestLongPollLoad: 2,000 long polls at once on one server (its own
// redis-server, on loopback) share one blocked Redis connection, the
// queue's wake hub. With Redis up none answers 5xx, each answers within
// its wait and loadSlack, a job enqueued meanwhile reaches a waiter within
// a second, an enqueue and a GET stay under a second, and Redis sees a
// handful of connections, not one a poll.
//
// loadSlack is 1 s without the race detector (make test-load runs the
// test so, alone); under -race on two cores writing 2,000 answers at
// once takes longer, and the bound is raceLoadSlack (race_test.go).
func TestLongPollLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 long polls of 8 s")
	}
	const (
		polls = 2000
		wait  = loadWait
	)
	testutil.NeedRedisServer(t, "its own redis-server, whose clients it counts (CLIENT LIST)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testutil.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close(); _ = admin.Close() })
	b := setup(t, func(sc *setupConfig) { sc.rdb, sc.clock = rdb, clockwork.NewRealClock() })

	// The queue exists, empty.
	r := b.do(t, http.MethodPost, "/v1/jobs", map[string]any{"queue": "q", "kind": "k"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodPost, "/v1/queues/q/claim", map[string]any{})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: polls + 10}, Timeout: wait + time.Minute}
	t.Cleanup(hc.CloseIdleConnections)
	post := func(path, body string) (int, []byte, time.Duration) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.http.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, []byte(err.Error()), 0
		}
		req.Header.Set("Content-Type", "application/json")
		// From when the request is written: not the client's own dialing
		// of 2,000 connections at once.
		var t0 atomic.Int64
		t0.Store(time.Now().UnixNano())
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { t0.Store(time.Now().UnixNano()) }}))
		res, err := hc.Do(req)
		if err != nil {
			return 0, []byte(err.Error()), time.Since(time.Unix(0, t0.Load()))
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		return res.StatusCode, data, time.Since(time.Unix(0, t0.Load()))
	}

	type answer struct {
		status  int
		body    []byte
		took    time.Duration
		jobs    int
		endedAt time.Time
	}
	answers := make([]answer, polls)
	var ended atomic.Int64
	var wg sync.WaitGroup
	for i := range polls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, took := post("/v1/queues/q/claim", fmt.Sprintf(`{"wait":%q}`, wait))
			a := answer{status: status, body: body, took: took, endedAt: time.Now()}
			var v struct {
				Jobs []json.RawMessage `json:"jobs"`
			}
			if status == http.StatusOK && json.Unmarshal(body, &v) == nil {
				a.jobs = len(v.Jobs)
			}
			answers[i] = a
			ended.Add(1)
		}()
	}
	started := time.Now()
	require.Eventually(t, func() bool { return plumbing.Of(b.client).Waiters() == polls || ended.Load() > 0 }, wait-2*time.Second,
		10*time.Millisecond, "every poll waits")
	require.Zero(t, ended.Load(), "no poll ended before all waited")
	t.Logf("every poll waits after %s", time.Since(started))

	// Redis sees the hub's one blocked connection, and few others.
	list, err := admin.ClientList(ctx).Result()
	require.NoError(t, err)
	var clients, blocked int
	for line := range strings.SplitSeq(strings.TrimSpace(list), "\n") {
		clients++
		for f := range strings.FieldsSeq(line) {
			if flags, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(flags, "b") {
				blocked++
			}
		}
	}
	require.LessOrEqual(t, blocked, 2, "blocked Redis clients:\n%s", list)
	require.Less(t, clients, polls/10, "Redis connections:\n%s", list)

	// A GET and an enqueue stay fast, and the job reaches a waiter within
	// a second of the enqueue.
	t0 := time.Now()
	r = b.do(t, http.MethodGet, "/v1/queues/q", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Less(t, time.Since(t0), time.Second, "a GET among the polls")
	status, body, took := post("/v1/jobs", `{"queue":"q","kind":"k"}`)
	require.Equal(t, http.StatusCreated, status, "body: %s", body)
	require.Less(t, took, time.Second, "an enqueue among the polls")
	enqueued := time.Now()

	wg.Wait()
	tooks := make([]time.Duration, len(answers))
	for i, a := range answers {
		tooks[i] = a.took
	}
	slices.Sort(tooks)
	t.Logf("answered after: min %s, median %s, p99 %s, max %s", tooks[0], tooks[len(tooks)/2], tooks[len(tooks)*99/100], tooks[len(tooks)-1])
	var got int
	for i, a := range answers {
		require.Equal(t, http.StatusOK, a.status, "poll %d after %s: %s", i, a.took, bytes.TrimSpace(a.body))
		require.LessOrEqual(t, a.took, wait+loadSlack, "poll %d", i)
		if a.jobs > 0 {
			got += a.jobs
			require.Less(t, a.endedAt.Sub(enqueued), time.Second, "the job reached a waiter")
		}
	}
	require.Equal(t, 1, got, "one poll got the job")
}
