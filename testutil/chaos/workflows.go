package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/chronoq/chronoq/internal/plumbing"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/workflow"
)

// diamond is the graph of the workflow scenario: a, then b and c, then d.
var diamond = []struct {
	name string
	deps []string
}{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"a"}}, {"d", []string{"b", "c"}}}

// produceWorkflows is RunProducer's workflow mode: each try enqueues a
// diamond whose four jobs are numbered s..s+3 (their payloads carry their
// numbers, as any job's), in the queues in turn, with on_failure
// "continue" (a node that dies is a failure of its own; its descendants
// still run). Each job's try is recorded before the enqueue and its
// acknowledgement after it: a job is acknowledged when its workflow's
// enqueue answered. The serve instances' releasers move the diamonds on.
func produceWorkflows(ctx context.Context, cfg ProducerConfig, led *Ledger, client *queue.Client) error {
	wf, err := workflow.New(workflow.Config{Queue: client})
	if err != nil {
		return err
	}
	var seq, acked, failed atomic.Int64
	maxTries := int64(2*cfg.Jobs + 1000)
	interval := cfg.Over / time.Duration(max(cfg.Jobs, 1))
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		failOnce sync.Once
		fatal    error
	)
	fail := func(err error) {
		failOnce.Do(func() { fatal = err })
		cancel()
	}
	n := int64(len(diamond))
	var wg sync.WaitGroup
	for range max(cfg.Concurrency, 1) {
		wg.Go(func() {
			for ctx.Err() == nil && acked.Load() < int64(cfg.Jobs) {
				first := seq.Add(n) - n + 1
				if first > maxTries {
					return
				}
				if d := time.Until(start.Add(time.Duration(acked.Load()) * interval)); d > 0 && !sleep(ctx, d) {
					return
				}
				spec := workflow.Spec{OnFailure: workflow.PolicyContinue}
				for i, nd := range diamond {
					s := first + int64(i)
					p := Payload{Seq: s, WorkMs: WorkMs(cfg.Seed, s)}
					body, _ := json.Marshal(p)
					nj := queue.NewJob{Queue: cfg.Queues[int(s)%len(cfg.Queues)], Kind: JobKind, Visibility: cfg.Visibility,
						MaxAttempts: cfg.MaxAttempts, Payload: body}
					spec.Nodes = append(spec.Nodes, workflow.Node{Name: nd.name, DependsOn: nd.deps, Job: nj})
					if err := led.RecordAttempt(Attempt{Seq: s, Queue: nj.Queue, T: time.Now().UnixNano()}); err != nil {
						fail(err)
						return
					}
				}
				t0 := time.Now()
				ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
				w, err := wf.Enqueue(ectx, spec)
				ecancel()
				if err != nil {
					failed.Add(1)
					if lerr := led.CountError("producer", Classify(err), err.Error()); lerr != nil {
						fail(lerr)
						return
					}
					sleep(ctx, 100*time.Millisecond)
					continue
				}
				for i, nd := range w.Nodes {
					a := Ack{Seq: first + int64(i), ID: nd.JobID, Queue: nd.Queue, Due: t0.UnixNano(), T: time.Now().UnixNano()}
					if err := led.RecordAck(a); err != nil {
						fail(err)
						return
					}
				}
				acked.Add(n)
			}
		})
	}
	wg.Wait()
	if fatal != nil {
		return fatal
	}
	fmt.Fprintf(os.Stderr, "chaos producer: %d jobs of workflows acknowledged, %d workflow enqueues failed, %s\n",
		acked.Load(), failed.Load(), time.Since(start).Round(time.Millisecond))
	if acked.Load() < int64(cfg.Jobs) {
		return fmt.Errorf("chaos producer: only %d of %d jobs of workflows acknowledged", acked.Load(), cfg.Jobs)
	}
	return nil
}

// outboxesLeft answers how many of queues have outbox entries no
// releaser has handled yet (a workflow that may still release jobs).
func outboxesLeft(ctx context.Context, rdb redis.UniversalClient, ns string, queues []string) (int, error) {
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, DisableEvents: true})
	if err != nil {
		return 0, fmt.Errorf("chaos: %w", err)
	}
	defer func() { _ = c.Close() }()
	has, err := plumbing.Of(c).OutboxQueues(ctx, queues)
	return len(has), err
}
