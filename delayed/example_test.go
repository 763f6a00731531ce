package delayed_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// A promoter over a queue client: a job enqueued with a delay is scheduled
// until the promoter moves it into its queue's pending list, the moment it
// is due. Run one promoter per process, or several: no job is promoted
// twice. (chronoq serve runs one.)
func ExamplePromoter() {
	ctx := context.Background()
	// In a program: the address of your Redis, and no Namespace (the
	// default "chronoq"). Here: the test binary's redis-server, and keys of
	// the example's own.
	rdb := redis.NewClient(&redis.Options{Addr: testutil.ExampleRedisAddr()})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.ExampleNamespace("promoter")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	promoted := make(chan int, 1)
	p, err := delayed.NewPromoter(delayed.Config{
		Source: client.Source(), // every queue the client knows; or Queues: []string{"emails"}
		OnPromote: func(_ string, moved int) {
			select {
			case promoted <- moved:
			default:
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Run promotes until its context ends: in a program, until shutdown.
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- p.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			log.Print(err)
		}
	}()

	e, err := client.Enqueue(ctx, queue.NewJob{Queue: "emails", Kind: "reminder", Delay: 50 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Job.Status)

	fmt.Println("promoted:", <-promoted)
	job, err := client.Get(ctx, "emails", e.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, "early:", time.Now().Before(job.RunAt))
	// Output:
	// scheduled
	// promoted: 1
	// pending early: false
}
