package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/chronoq/chronoq/queue"
)

// Kinds are the demo's job kinds.
var Kinds = []string{"email", "webhook", "thumbnail", "invoice"}

// Limits and defaults of [Batch].
const (
	MaxBatch           = queue.MaxBatch
	MaxBatchDelay      = time.Hour
	DefaultBatchCount  = 20
	DefaultVisibility  = 5 * time.Second // short, so a hung job comes back soon
	DefaultMaxAttempts = 3
)

// Batch is a batch of demo jobs to enqueue.
type Batch struct {
	// Count is the number of jobs, 1 to MaxBatch. Defaults to 20.
	Count int
	// Kinds are the kinds to cycle through, a subset of [Kinds]. Defaults
	// to all of them.
	Kinds []string
	// Delay puts the first job this far in the future, 0 to 1 h.
	// Defaults to 0 (due now).
	Delay time.Duration
	// Spread spreads the jobs' run-at times evenly over this long after
	// Delay, 0 to 1 h ("over the next minute": 1m). Defaults to 0.
	Spread time.Duration
	// MaxAttempts of each job, 1 to queue.MaxAttemptsLimit. Defaults to 3.
	MaxAttempts int
	// Visibility is each job's lease, queue.MinVisibility to 1 h. Defaults
	// to 5 s, so that a hung job is reclaimable soon.
	Visibility time.Duration
}

func (b *Batch) normalize() error {
	b.Count = cmp.Or(b.Count, DefaultBatchCount)
	if len(b.Kinds) == 0 {
		b.Kinds = Kinds
	}
	b.MaxAttempts = cmp.Or(b.MaxAttempts, DefaultMaxAttempts)
	b.Visibility = cmp.Or(b.Visibility, DefaultVisibility)
	switch {
	case b.Count < 1 || b.Count > MaxBatch:
		return fieldError{"count", fmt.Sprintf("must be in [1, %d], got %d", MaxBatch, b.Count)}
	case b.Delay < 0 || b.Delay > MaxBatchDelay:
		return fieldError{"delay", fmt.Sprintf("must be in [0s, %s], got %s", MaxBatchDelay, b.Delay)}
	case b.Spread < 0 || b.Spread > MaxBatchDelay:
		return fieldError{"spread", fmt.Sprintf("must be in [0s, %s], got %s", MaxBatchDelay, b.Spread)}
	case b.MaxAttempts < 1 || b.MaxAttempts > queue.MaxAttemptsLimit:
		return fieldError{"max_attempts", fmt.Sprintf("must be in [1, %d], got %d", queue.MaxAttemptsLimit, b.MaxAttempts)}
	case b.Visibility < queue.MinVisibility || b.Visibility > time.Hour:
		return fieldError{"visibility", fmt.Sprintf("must be in [%s, 1h], got %s", queue.MinVisibility, b.Visibility)}
	}
	for _, k := range b.Kinds {
		if !slices.Contains(Kinds, k) {
			return fieldError{"kinds", fmt.Sprintf("unknown kind %q: the demo's kinds are %v", k, Kinds)}
		}
	}
	return nil
}

// Enqueue enqueues b in one batch on the demo's queue and answers the jobs.
func (p *Pool) Enqueue(ctx context.Context, b Batch) ([]*queue.Job, error) {
	if err := b.normalize(); err != nil {
		return nil, err
	}
	now := p.clock.Now()
	p.mu.Lock()
	seq := p.rng.IntN(100000)
	p.mu.Unlock()
	njs := make([]queue.NewJob, b.Count)
	for i := range njs {
		kind := b.Kinds[i%len(b.Kinds)]
		at := b.Delay
		if b.Spread > 0 {
			at += b.Spread * time.Duration(i) / time.Duration(b.Count)
		}
		nj := queue.NewJob{Queue: p.cfg.Queue, Kind: kind, Payload: payload(kind, seq+i),
			MaxAttempts: b.MaxAttempts, Visibility: b.Visibility}
		if at > 0 {
			nj.RunAt = now.Add(at)
		}
		njs[i] = nj
	}
	enq, err := p.cfg.Client.EnqueueBatch(ctx, njs)
	if err != nil {
		return nil, err
	}
	jobs := make([]*queue.Job, len(enq))
	for i, e := range enq {
		jobs[i] = e.Job
	}
	return jobs, nil
}

// payload is a plausible payload of the kind, number n.
func payload(kind string, n int) json.RawMessage {
	var v any
	switch kind {
	case "email":
		v = map[string]any{"to": fmt.Sprintf("user%d@example.com", n), "template": "welcome"}
	case "webhook":
		v = map[string]any{"url": fmt.Sprintf("https://hooks.example.com/t/%d", n), "event": "order.paid"}
	case "thumbnail":
		v = map[string]any{"image": fmt.Sprintf("uploads/img_%05d.jpg", n), "size": "256x256"}
	default:
		v = map[string]any{"customer": fmt.Sprintf("cus_%05d", n), "amount_cents": 1000 + n%9000}
	}
	data, _ := json.Marshal(v)
	return data
}
