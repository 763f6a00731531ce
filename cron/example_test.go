package cron_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Recurring jobs: declare the entries at start-up, then run a scheduler in
// every instance. Each tick enqueues one job, with the idempotency key
// "cron:<name>:<tick in Unix ms>", however many instances run.
func ExampleScheduler() {
	ctx := context.Background()
	// In a program: the address of your Redis, and no Namespace (the
	// default "chronoq"). Here: the test binary's redis-server, and keys of
	// the example's own.
	rdb := redis.NewClient(&redis.Options{Addr: testutil.ExampleRedisAddr()})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.ExampleNamespace("cron")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	store := cron.NewStore(client)
	err = store.Register(ctx,
		cron.Entry{Name: "report", Schedule: "0 9 * * 1-5", Timezone: "Europe/Berlin", Queue: "reports", Kind: "report.daily"},
		cron.Entry{Name: "heartbeat", Schedule: "@every 1s", Queue: "ops", Kind: "ping"})
	if err != nil {
		log.Fatal(err)
	}
	entries, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Name, e.Schedule, e.Timezone, "->", e.Queue, e.Kind)
	}

	sched, err := cron.NewScheduler(cron.Config{Client: client})
	if err != nil {
		log.Fatal(err)
	}
	// Run ticks until its context ends: in a program, until shutdown.
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- sched.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			log.Print(err)
		}
	}()

	// The heartbeat's next tick, at the latest a second from now, as a
	// worker of the queue would see it.
	jobs, err := client.Claim(ctx, "ops", queue.ClaimOptions{Wait: 5 * time.Second})
	if err != nil || len(jobs) == 0 {
		log.Fatal("no tick: ", err)
	}
	fmt.Println(jobs[0].Kind, strings.HasPrefix(jobs[0].IdempotencyKey, "cron:heartbeat:"))
	// Output:
	// heartbeat @every 1s UTC -> ops ping
	// report 0 9 * * 1-5 Europe/Berlin -> reports report.daily
	// ping true
}
