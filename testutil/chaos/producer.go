package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/queue"
)

// ProducerConfig configures the producer process.
type ProducerConfig struct {
	Redis     Target   `json:"redis"`
	Ledger    string   `json:"ledger"`
	Prefix    string   `json:"prefix"`
	Namespace string   `json:"ns"`
	Queues    []string `json:"queues"`
	// Jobs is the number of acknowledged enqueues to reach.
	Jobs int `json:"jobs"`
	// Over is the time the enqueues are spread over.
	Over time.Duration `json:"over"`
	// MaxDelay: half the jobs are delayed uniformly in [0, MaxDelay).
	MaxDelay time.Duration `json:"max_delay"`
	// PoisonEvery: one job in PoisonEvery is poison.
	PoisonEvery int           `json:"poison_every"`
	Visibility  time.Duration `json:"visibility"`
	// MaxAttempts of ordinary and of poison jobs.
	MaxAttempts       int    `json:"max_attempts"`
	PoisonMaxAttempts int    `json:"poison_max_attempts"`
	Concurrency       int    `json:"concurrency"`
	Seed              uint64 `json:"seed"`
	// Workflows: each try enqueues a workflow, a diamond of four jobs
	// (see produceWorkflows), not one job.
	Workflows bool `json:"workflows"`
	// FlowKeys: each job carries the flow key FlowKeyOf(seq, FlowKeys);
	// 0 none.
	FlowKeys int `json:"flow_keys,omitempty"`
}

// PoisonBackoff is the retry policy of poison jobs: short, so that they
// spend their attempts and die within the run.
var PoisonBackoff = queue.Backoff{Initial: 200 * time.Millisecond, Factor: 2, Max: time.Second}

// WorkMs draws how long the handler of job seq works: mostly a few ms,
// some a few hundred, a few longer than the visibility timeout (their
// leases live on heartbeats).
func WorkMs(seed uint64, seq int64) int64 {
	r := rand.New(rand.NewPCG(seed, uint64(seq)))
	switch x := r.Float64(); {
	case x < 0.80:
		return 2 + r.Int64N(18)
	case x < 0.98:
		return 50 + r.Int64N(250)
	default:
		return 1000 + r.Int64N(1500)
	}
}

// RunProducer enqueues cfg.Jobs jobs, one Enqueue call each, paced over
// cfg.Over, recording each try before it is made and each acknowledgement
// after it. A failed enqueue is not retried under the same sequence number:
// the next try is a new job (the failed one may exist anyway: its reply may
// be what was lost). Bounded: at most 2·Jobs+1000 tries and 3·Over+60 s.
func RunProducer(ctx context.Context, cfg ProducerConfig) error {
	led := OpenLedger(cfg.Ledger, cfg.Prefix)
	defer led.Close()
	rdb := cfg.Redis.Client()
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: cfg.Namespace, DefaultVisibility: cfg.Visibility})
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*cfg.Over+60*time.Second)
	defer cancel()
	if cfg.Workflows {
		return produceWorkflows(ctx, cfg, led, client)
	}
	var seq, acked, failed atomic.Int64
	maxTries := int64(2*cfg.Jobs + 1000)
	interval := cfg.Over / time.Duration(max(cfg.Jobs, 1))
	start := time.Now()
	// fail ends every enqueuer on the ledger's first error: the run cannot
	// count without it. The first error is the one returned.
	var (
		failOnce sync.Once
		fatal    error
	)
	fail := func(err error) {
		failOnce.Do(func() { fatal = err })
		cancel()
	}
	var wg sync.WaitGroup
	for g := range max(cfg.Concurrency, 1) {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(g)+1<<32))
			for ctx.Err() == nil && acked.Load() < int64(cfg.Jobs) {
				s := seq.Add(1)
				if s > maxTries {
					return
				}
				if d := time.Until(start.Add(time.Duration(acked.Load()) * interval)); d > 0 && !sleep(ctx, d) {
					return
				}
				p := Payload{Seq: s, WorkMs: WorkMs(cfg.Seed, s), Poison: cfg.PoisonEvery > 0 && s%int64(cfg.PoisonEvery) == 0}
				nj := queue.NewJob{Queue: cfg.Queues[int(s)%len(cfg.Queues)], Kind: JobKind, Visibility: cfg.Visibility,
					MaxAttempts: cfg.MaxAttempts}
				if cfg.FlowKeys > 0 {
					nj.FlowKey = FlowKeyOf(s, cfg.FlowKeys)
				}
				if p.Poison {
					p.WorkMs = 5
					nj.MaxAttempts, nj.Backoff = cfg.PoisonMaxAttempts, &PoisonBackoff
				}
				if cfg.MaxDelay > 0 && rng.IntN(2) == 0 {
					nj.Delay = time.Duration(rng.Int64N(int64(cfg.MaxDelay)))
				}
				nj.Payload, _ = json.Marshal(p)
				if err := led.RecordAttempt(Attempt{Seq: s, Queue: nj.Queue, Poison: p.Poison, DelayMs: nj.Delay.Milliseconds(), T: time.Now().UnixNano()}); err != nil {
					fail(err)
					return
				}
				ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
				out, err := client.Enqueue(ectx, nj)
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
				if err := led.RecordAck(Ack{Seq: s, ID: out.Job.ID, Queue: nj.Queue, Due: out.Job.RunAt.UnixNano(), T: time.Now().UnixNano()}); err != nil {
					fail(err)
					return
				}
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	if fatal != nil {
		return fatal
	}
	fmt.Fprintf(os.Stderr, "chaos producer: %d acknowledged, %d failed, %d tries, %s\n",
		acked.Load(), failed.Load(), min(seq.Load(), maxTries), time.Since(start).Round(time.Millisecond))
	if acked.Load() < int64(cfg.Jobs) {
		return fmt.Errorf("chaos producer: only %d of %d enqueues acknowledged", acked.Load(), cfg.Jobs)
	}
	return nil
}
