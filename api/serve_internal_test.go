package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/queue"
)

// stubProducer answers every enqueue at once with a job of its own, so
// that BenchmarkServeEnqueue measures the server's part of a request only.
type stubProducer struct {
	Store // nil: any other method panics
	job   queue.Job
}

func (p *stubProducer) Enqueue(_ context.Context, nj queue.NewJob) (queue.Enqueued, error) {
	j := p.job
	j.Queue, j.Kind, j.Payload = nj.Queue, nj.Kind, nj.Payload
	return queue.Enqueued{Job: &j}, nil
}

func (p *stubProducer) EnqueueBatch(ctx context.Context, njs []queue.NewJob) ([]queue.Enqueued, error) {
	res := make([]queue.Enqueued, len(njs))
	for i, nj := range njs {
		res[i], _ = p.Enqueue(ctx, nj)
	}
	return res, nil
}

// BenchmarkServeEnqueue is one POST /v1/jobs through the server's handler
// in process, against a store that answers at once: the server's CPU and
// allocations per request, without the network and Redis.
//
//	go test -run '^$' -bench ServeEnqueue -benchmem ./api/
func BenchmarkServeEnqueue(b *testing.B) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	store := &stubProducer{job: queue.Job{ID: "01JDQ4ZJ8Y3K6V6W0M6R5T2B1C", Status: queue.StatusPending, MaxAttempts: 25,
		Backoff: queue.DefaultBackoff, Visibility: 30 * time.Second, EnqueuedAt: now, RunAt: now}}
	srv, err := New(Config{Store: store, Logger: slog.New(slog.DiscardHandler), DisableCoalescing: true,
		Clock: clockwork.NewRealClock(), Ready: func(context.Context) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	body := `{"queue":"bench","kind":"email","payload":{"to":"a@example.com","n":1}}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequestWithContext(b.Context(), http.MethodPost, "http://localhost/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
