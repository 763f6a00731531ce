package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

// chronoq's side: a queue.Client with its defaults, a worker.Worker (or,
// with -runtime loop, plain claim loops) and, where jobs are scheduled, a
// delayed.Promoter on a client of its own.

const (
	chronoqQueue = "bench"
	chronoqKind  = "bench"
	loopClaimers = 50                    // -runtime loop: goroutines claiming
	loopClaimMax = 32                    // -runtime loop: jobs per claim
	loopWait     = 50 * time.Millisecond // -runtime loop: blocking claim wait
)

// Runtimes for chronoq's consumer.
const (
	runtimeWorker = "worker" // package worker, concurrency 50
	runtimeLoop   = "loop"   // 50 goroutines: Claim(Max 32, Wait 50 ms) + CompleteMany
)

type chronoqSide struct {
	rdb *redis.Client
	c   *queue.Client
}

func openChronoq(addr string) (*chronoqSide, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := queue.NewClient(queue.Config{Redis: rdb})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &chronoqSide{rdb: rdb, c: c}, nil
}

func (s *chronoqSide) close() {
	_ = s.c.Close()
	_ = s.rdb.Close()
}

// send enqueues jobs [from, to) made by mk: one Enqueue call per job when
// single, else one EnqueueBatch.
func (s *chronoqSide) send(single bool, mk func(i int) queue.NewJob) sendFunc {
	return func(ctx context.Context, from, to int) error {
		if single {
			for i := from; i < to; i++ {
				if _, err := s.c.Enqueue(ctx, mk(i)); err != nil {
					return err
				}
			}
			return nil
		}
		batch := make([]queue.NewJob, 0, to-from)
		for i := from; i < to; i++ {
			batch = append(batch, mk(i))
		}
		_, err := s.c.EnqueueBatch(ctx, batch)
		return err
	}
}

func chronoqJob(payload []byte, runAt time.Time) queue.NewJob {
	return queue.NewJob{Queue: chronoqQueue, Kind: chronoqKind, Payload: json.RawMessage(payload), RunAt: runAt}
}

var errFailOnce = errors.New("bench: failing once on purpose")

// consume runs h on every job of the queue until stop is called; each
// completion (acknowledged by Redis) is reported to completed. A handler
// that answers d > 0 fails its attempt with a retry d from now.
// jobs bounds the claim loops of -runtime loop: the runs of all its jobs.
func (s *chronoqSide) consume(ctx context.Context, runtime string, jobs int, h handler, completed func(n int)) (stop func(), err error) {
	switch runtime {
	case runtimeWorker:
		return s.consumeWorker(ctx, h, completed)
	case runtimeLoop:
		return s.consumeLoop(ctx, jobs, h, completed)
	}
	return nil, fmt.Errorf("unknown -runtime %q", runtime)
}

func (s *chronoqSide) consumeWorker(ctx context.Context, h handler, completed func(n int)) (func(), error) {
	w, err := worker.New(worker.Config{
		Client:      s.c,
		Queues:      []worker.QueueConfig{{Name: chronoqQueue}},
		Concurrency: concurrency,
		Handler: worker.HandlerFunc(func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
			if d := h(j.Payload); d > 0 {
				return nil, worker.RetryAfter(d, errFailOnce)
			}
			return nil, nil
		}),
		OnOutcome: func(o worker.Outcome) {
			if o.Status == queue.StatusCompleted {
				completed(1)
			}
		},
		ShutdownTimeout: stopTimeout,
	})
	if err != nil {
		return nil, err
	}
	working := lifecycle.Start(ctx, w)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*stopTimeout)
		defer cancel()
		_ = working.Stop(sctx)
	}, nil
}

func (s *chronoqSide) consumeLoop(ctx context.Context, jobs int, h handler, completed func(n int)) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	// Each round claims at least one job (a job runs at most twice here)
	// or waits loopWait: this many rounds outlast the run.
	maxRounds := roundsUntil(ctx, loopWait) + 2*jobs
	var wg sync.WaitGroup
	for range loopClaimers {
		wg.Go(func() {
			acks := make([]queue.Ack, 0, loopClaimMax)
			for round := 0; round < maxRounds && ctx.Err() == nil; round++ {
				jobs, err := s.c.Claim(ctx, chronoqQueue, queue.ClaimOptions{Max: loopClaimMax, Wait: loopWait})
				if err != nil {
					if ctx.Err() == nil {
						logf("chronoq: claim: %v", err)
					}
					return
				}
				acks = acks[:0]
				for _, j := range jobs {
					if d := h(j.Payload); d > 0 {
						_, err := s.c.Fail(ctx, chronoqQueue, j.ID, j.Token,
							queue.FailOptions{Error: errFailOnce.Error(), RetryAt: time.Now().Add(d)})
						if err != nil && ctx.Err() == nil {
							logf("chronoq: fail: %v", err)
						}
						continue
					}
					acks = append(acks, queue.Ack{ID: j.ID, Token: j.Token})
				}
				if len(acks) == 0 {
					continue
				}
				_, errs, err := s.c.CompleteMany(ctx, chronoqQueue, acks)
				if err != nil {
					if ctx.Err() == nil {
						logf("chronoq: complete: %v", err)
					}
					return
				}
				n := 0
				for _, e := range errs {
					if e == nil {
						n++
					}
				}
				completed(n)
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}, nil
}

// promote starts a delayed.Promoter for the queue, an instance of its own
// (its own client and connections, as in `chronoq serve`) on a clock off
// the true time by skew (none when 0). chronoq decides what is due by
// Redis's clock, so the skew must not make a job early or later.
func promote(ctx context.Context, addr string, skew time.Duration) (stop func(), err error) {
	var clock clockwork.Clock
	if skew != 0 {
		clock = testutil.SkewedClock(skew)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := queue.NewClient(queue.Config{Redis: rdb, Clock: clock})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	side := &chronoqSide{rdb: rdb, c: c}
	p, err := delayed.NewPromoter(delayed.Config{Source: c.Source(), Queues: []string{chronoqQueue}, Clock: clock})
	if err != nil {
		side.close()
		return nil, err
	}
	promoting := lifecycle.Start(ctx, p)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		_ = promoting.Stop(sctx)
		side.close()
	}, nil
}

// completedTotal is the queue's count of completed jobs (from Stats).
func (s *chronoqSide) completedTotal() int {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	st, err := s.c.Stats(ctx, chronoqQueue)
	if err != nil {
		return 0
	}
	return int(st.CompletedTotal)
}
