package main

import (
	"context"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynq's side: an asynq.Client for enqueues (asynq has no batch enqueue
// and no pipelined one: one call, one script, per task) and an
// asynq.Server with Concurrency 50, otherwise its defaults unless a
// scenario says.

const (
	asynqType = "bench"
	// asynqProcessedKey is asynq's counter of processed tasks of the
	// "default" queue, raised by its done script after a handler returned.
	asynqProcessedKey = "asynq:{default}:processed"
	pollEvery         = time.Millisecond // reading that counter at the end of a run
)

type asynqSide struct {
	opt    asynq.RedisClientOpt
	client *asynq.Client
}

func openAsynq(addr string) *asynqSide {
	opt := asynq.RedisClientOpt{Addr: addr}
	return &asynqSide{opt: opt, client: asynq.NewClient(opt)}
}

func (s *asynqSide) close() { _ = s.client.Close() }

// send enqueues tasks [from, to), one Enqueue call each.
func (s *asynqSide) send(mk func(i int) (*asynq.Task, []asynq.Option)) sendFunc {
	return func(ctx context.Context, from, to int) error {
		for i := from; i < to; i++ {
			t, opts := mk(i)
			if _, err := s.client.EnqueueContext(ctx, t, opts...); err != nil {
				return err
			}
		}
		return nil
	}
}

// serverConfig is what a scenario changes in asynq.Config.
type serverConfig struct {
	delayedCheck time.Duration // DelayedTaskCheckInterval; 0: asynq's default (5 s)
	retryDelay   time.Duration // RetryDelayFunc's constant answer; 0: asynq's default backoff
}

// serve starts an asynq.Server running h; a handler answer d > 0 fails the
// attempt (the retry delay is RetryDelayFunc's, set by cfg).
func (s *asynqSide) serve(cfg serverConfig, h handler) (stop func(), err error) {
	c := asynq.Config{Concurrency: concurrency, LogLevel: asynq.WarnLevel,
		DelayedTaskCheckInterval: cfg.delayedCheck, ShutdownTimeout: stopTimeout}
	if d := cfg.retryDelay; d > 0 {
		c.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return d }
	}
	srv := asynq.NewServer(s.opt, c)
	err = srv.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		if h(t.Payload()) > 0 {
			return errFailOnce
		}
		return nil
	}))
	if err != nil {
		return nil, err
	}
	return srv.Shutdown, nil
}

// waitProcessed polls asynq's processed counter until it reaches want (the
// handlers have all returned before this is called; asynq writes "done"
// after its handler returns) and answers when it did.
func waitProcessed(ctx context.Context, rdb *redis.Client, want int) (time.Time, bool) {
	for range roundsUntil(ctx, pollEvery) {
		n, _ := rdb.Get(ctx, asynqProcessedKey).Int()
		if n >= want {
			return time.Now(), true
		}
		select {
		case <-ctx.Done():
			return time.Now(), false
		case <-time.After(pollEvery):
		}
	}
	return time.Now(), false
}

// processed reads asynq's processed counter.
func processed(rdb *redis.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	n, _ := rdb.Get(ctx, asynqProcessedKey).Int()
	return n
}
