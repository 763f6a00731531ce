package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

// keyFlights counts, per flow key, the jobs under way at once and the most.
type keyFlights struct {
	mu        sync.Mutex
	now, most map[string]int
	done      int
}

func (k *keyFlights) begin(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.now[key]++
	k.most[key] = max(k.most[key], k.now[key])
}

func (k *keyFlights) end(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.now[key]--
	k.done++
}

// Two dispatchers and a pull worker on one queue whose flow keys may
// each have 2 jobs in flight (one key 4, by its override): the receiver
// and the worker together never see more of a key at once, although
// each would run 50; and every job is done.
func TestFlowLimitsAcrossDispatchersAndWorkers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	f := &keyFlights{now: map[string]int{}, most: map[string]int{}}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct{ Key string }
		_ = json.Unmarshal(body, &p)
		f.begin(p.Key)
		defer f.end(p.Key)
		time.Sleep(5 * time.Millisecond)
	}))
	t.Cleanup(rc.Close)
	_, err = dispatch.NewStore(c, loopback).Put(ctx, "flow", dispatch.QueueConfig{Target: dispatch.Target{URL: rc.URL}, Concurrency: 50})
	require.NoError(t, err)
	_, err = c.SetFlowLimits(ctx, "flow", queue.FlowLimits{MaxInFlight: 2})
	require.NoError(t, err)
	_, err = c.SetFlowOverride(ctx, "flow", queue.FlowOverride{Key: "k0", MaxInFlight: 4})
	require.NoError(t, err)
	instances(t, ns, 2)
	w, err := worker.New(worker.Config{Client: c, Queues: []worker.QueueConfig{{Name: "flow"}}, Concurrency: 20,
		Handler: worker.HandlerFunc(func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
			f.begin(j.FlowKey)
			defer f.end(j.FlowKey)
			time.Sleep(5 * time.Millisecond)
			return nil, nil
		})})
	require.NoError(t, err)
	wh := lifecycle.Start(context.Background(), w)
	t.Cleanup(func() { _ = wh.Stop(context.Background()) })

	const keys, each = 5, 40
	jobs := make([]queue.NewJob, 0, keys*each)
	for i := range keys * each {
		key := fmt.Sprintf("k%d", i%keys)
		jobs = append(jobs, queue.NewJob{Queue: "flow", Kind: "k", FlowKey: key, Payload: json.RawMessage(`{"key":"` + key + `"}`)})
	}
	_, err = c.EnqueueBatch(ctx, jobs)
	require.NoError(t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		f.mu.Lock()
		done := f.done
		f.mu.Unlock()
		if done >= keys*each {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d done", done, keys*each)
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range keys {
		key := fmt.Sprintf("k%d", i)
		limit := 2
		if key == "k0" {
			limit = 4
		}
		require.LessOrEqual(t, f.most[key], limit, "most of %s in flight at once", key)
	}
	require.Greater(t, f.most["k0"], 2, "the override raises the key's limit: it is used, not only respected")
}
