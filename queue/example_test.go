package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The path of a job through the store, by hand: enqueue it, claim it (with
// a token and a lease), complete it with that token. A worker
// (package worker) or an HTTP worker does the claiming and completing in a
// real program.
func Example() {
	ctx := context.Background()
	// In a program: the address of your Redis, and no Namespace (the
	// default "chronoq"). Here: the test binary's redis-server, and keys of
	// the example's own.
	rdb := redis.NewClient(&redis.Options{Addr: testutil.ExampleRedisAddr()})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.ExampleNamespace("queue")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	e, err := client.Enqueue(ctx, queue.NewJob{Queue: "emails", Kind: "welcome",
		Payload: json.RawMessage(`{"to":"ada@example.com"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued:", e.Job.Status)

	jobs, err := client.Claim(ctx, "emails", queue.ClaimOptions{Max: 10})
	if err != nil {
		log.Fatal(err)
	}
	job := jobs[0]
	fmt.Println("claimed:", job.Kind, string(job.Payload), job.Status, "attempt", job.Attempts)

	// ... send the email ...
	if err := client.Complete(ctx, "emails", job.ID, job.Token, queue.CompleteOptions{Result: json.RawMessage(`{"sent":true}`)}); err != nil {
		log.Fatal(err)
	}
	done, err := client.Get(ctx, "emails", job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("now:", done.Status, string(done.Result))

	// A stale token (a worker whose lease lapsed) changes nothing.
	err = client.Complete(ctx, "emails", job.ID, "stale", queue.CompleteOptions{})
	fmt.Println("stale token:", errors.Is(err, queue.ErrLeaseLost))
	// Output:
	// enqueued: pending
	// claimed: welcome {"to":"ada@example.com"} processing attempt 1
	// now: completed {"sent":true}
	// stale token: true
}

// Enqueue a job now, later, or once: a job with a delay (or a RunAt) is
// scheduled until a promoter, or a claim, finds it due; an idempotency key
// makes a repeat answer the first job instead of enqueueing another.
func ExampleClient_Enqueue() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testutil.ExampleRedisAddr()})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.ExampleNamespace("enqueue")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	now, err := client.Enqueue(ctx, queue.NewJob{Queue: "emails", Kind: "welcome",
		Payload: json.RawMessage(`{"to":"ada@example.com"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(now.Job.Kind, now.Job.Status)

	later, err := client.Enqueue(ctx, queue.NewJob{Queue: "emails", Kind: "reminder",
		Delay: 24 * time.Hour, MaxAttempts: 5})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(later.Job.Kind, later.Job.Status, later.Job.RunAt.Sub(later.Job.EnqueuedAt))

	for range 2 { // a retried request, say
		once, err := client.Enqueue(ctx, queue.NewJob{Queue: "billing", Kind: "invoice",
			IdempotencyKey: "order-42"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(once.Job.Kind, once.Job.Status, "replayed:", once.Replayed)
	}

	_, err = client.Enqueue(ctx, queue.NewJob{Queue: "emails"}) // no kind
	fmt.Println(err)
	// Output:
	// welcome pending
	// reminder scheduled 24h0m0s
	// invoice pending replayed: false
	// invoice pending replayed: true
	// kind: invalid kind "": want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$
}
