package worker_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/worker"
)

// A worker passes its labels on every claim: jobs that require labels run
// only on a worker that has them all, jobs without labels on any, and a
// job whose labels no running worker has waits, pending, for one that
// has them.
func TestLabelsRouteJobsToWorkersThatHaveThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	ranOn := map[string]string{} // job id -> worker
	done := make(chan string, 100)
	startAs := func(name string, labels ...string) {
		t.Helper()
		h := worker.HandlerFunc(func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
			mu.Lock()
			ranOn[j.ID] = name
			mu.Unlock()
			done <- j.ID
			return nil, nil
		})
		w, err := worker.New(worker.Config{Client: b.client, Handler: h, Queues: []worker.QueueConfig{{Name: "q1"}},
			Concurrency: 2, IdleWait: 50 * time.Millisecond, Labels: labels})
		require.NoError(t, err)
		run := lifecycle.Start(b.ctx, w)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = run.Stop(ctx)
		})
	}
	arm := b.enqueue(t, queue.NewJob{Labels: []string{"arch=arm64"}})
	startAs("gpu", "linux", "gpu")
	startAs("plain")
	gpuJobs, plainJobs := map[string]bool{}, map[string]bool{}
	for i := range 20 {
		if i%2 == 0 {
			gpuJobs[b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}}).ID] = true
		} else {
			plainJobs[b.enqueue(t, queue.NewJob{}).ID] = true
		}
	}
	for range 20 {
		id := recv(t, b.ctx, done)
		require.True(t, gpuJobs[id] || plainJobs[id], "only the jobs some worker can take run")
	}
	mu.Lock()
	for id := range gpuJobs {
		require.Equal(t, "gpu", ranOn[id], "a gpu job runs on the gpu worker only")
	}
	mu.Unlock()
	require.Equal(t, queue.StatusPending, b.get(t, "q1", arm.ID).Status, "no worker has arch=arm64: it waits")
	startAs("arm", "arch=arm64")
	require.Equal(t, arm.ID, recv(t, b.ctx, done), "the right worker takes it")
	mu.Lock()
	require.Equal(t, "arm", ranOn[arm.ID])
	mu.Unlock()
}

func TestLabelsAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := worker.New(worker.Config{Client: b.client, Handler: b.mux, Labels: []string{"no spaces"}})
	require.ErrorIs(t, err, queue.ErrInvalidLabels)
}
