package dispatch_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
)

// BenchmarkDispatchThroughput: b.N jobs enqueued into a push queue, pushed
// to a local no-op receiver; reports requests per second.
//
//	go test -run '^$' -bench DispatchThroughput -benchtime 20000x ./dispatch/
func BenchmarkDispatchThroughput(b *testing.B) {
	r := newRigB(b, 200)
	var got atomic.Int64
	done := make(chan struct{})
	n := int64(b.N)
	rc := newReceiverB(b, func(w http.ResponseWriter, _ *http.Request) {
		if got.Add(1) == n {
			close(done)
		}
	})
	r.push("bench", rc.URL, func(c *dispatch.QueueConfig) { c.Concurrency = 200 })
	jobs := make([]queue.NewJob, 0, queue.MaxBatch)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		jobs = append(jobs, queue.NewJob{Queue: "bench", Kind: "k", Payload: json.RawMessage(`{}`)})
		if len(jobs) == queue.MaxBatch || i == b.N-1 {
			_, err := r.c.EnqueueBatch(r.ctx, jobs)
			require.NoError(b, err)
			jobs = jobs[:0]
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d delivered", got.Load(), n)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkPushLateness: jobs scheduled 200 ms ahead, one at a time;
// reports the receiver's arrival less the due time (p50, p99, max) and
// counts early arrivals (there must be none).
//
//	go test -run '^$' -bench PushLateness -benchtime 200x ./dispatch/
func BenchmarkPushLateness(b *testing.B) {
	r := newRigB(b, 10)
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	rc := newReceiverB(b, func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		arrived[req.Header.Get(dispatch.HeaderJobID)] = time.Now()
		mu.Unlock()
	})
	r.push("late", rc.URL, nil)
	due := map[string]time.Time{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at := time.Now().Add(200 * time.Millisecond)
		e, err := r.c.Enqueue(r.ctx, queue.NewJob{Queue: "late", Kind: "k", RunAt: at})
		require.NoError(b, err)
		due[e.Job.ID] = at
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n == b.N || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var lates []time.Duration
	early := 0
	for id, d := range due {
		a, ok := arrived[id]
		require.True(b, ok, "job %s never arrived", id)
		if a.Before(d) {
			early++
		}
		lates = append(lates, a.Sub(d))
	}
	sort.Slice(lates, func(i, j int) bool { return lates[i] < lates[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lates[len(lates)/2]), "p50-ms")
	b.ReportMetric(ms(lates[len(lates)*99/100]), "p99-ms")
	b.ReportMetric(ms(lates[len(lates)-1]), "max-ms")
	b.ReportMetric(float64(early), "early")
}
