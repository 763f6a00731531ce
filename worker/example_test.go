package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

// A Mux sends each job to the handler of its kind, through its middleware.
func ExampleMux() {
	mux := worker.NewMux()
	mux.Use(worker.Recover)
	mux.HandleFunc("greet", func(_ context.Context, job *queue.Job) (json.RawMessage, error) {
		var p struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return nil, worker.SkipRetry(err) // bad input: retrying cannot help
		}
		return json.Marshal(map[string]string{"greeting": "hello, " + p.Name})
	})

	res, err := mux.Work(context.Background(), &queue.Job{Kind: "greet", Payload: json.RawMessage(`{"name":"Ada"}`)})
	fmt.Println(string(res), err)
	_, err = mux.Work(context.Background(), &queue.Job{Kind: "greet", Payload: json.RawMessage(`oops`)})
	fmt.Println(err)
	_, err = mux.Work(context.Background(), &queue.Job{Kind: "shout"})
	fmt.Println(err)
	// Output:
	// {"greeting":"hello, Ada"} <nil>
	// invalid character 'o' looking for beginning of value
	// worker: no handler for the job's kind "shout"
}

// A worker process: two queues, the first served first, and a graceful
// stop that gives running jobs 30 s to finish before handing them back.
// Run works until its context ends; a real process ends it on SIGINT or
// SIGTERM:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	err := w.Run(ctx)
//
// where this example ends it once its one job is done.
func Example_worker() {
	ctx := context.Background()
	// In a program: the address of your Redis, and no Namespace (the
	// default "chronoq"). Here: the test binary's redis-server, and keys of
	// the example's own.
	rdb := redis.NewClient(&redis.Options{Addr: testutil.ExampleRedisAddr()})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.ExampleNamespace("worker")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	sent := make(chan string, 1)
	mux := worker.NewMux()
	mux.Use(worker.Recover)
	mux.HandleFunc("email.send", func(_ context.Context, job *queue.Job) (json.RawMessage, error) {
		var p struct {
			To string `json:"to"`
		}
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return nil, worker.SkipRetry(err)
		}
		// ... send it, honouring the context ...
		sent <- p.To
		return json.RawMessage(`{"sent":true}`), nil
	})

	w, err := worker.New(worker.Config{Client: client, Handler: mux, Concurrency: 50, Priority: worker.Strict,
		Queues: []worker.QueueConfig{{Name: "critical"}, {Name: "default"}}, ShutdownTimeout: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()

	e, err := client.Enqueue(ctx, queue.NewJob{Queue: "critical", Kind: "email.send",
		Payload: json.RawMessage(`{"to":"ada@example.com"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent to", <-sent)

	stop() // SIGTERM, in a program
	if err := <-ran; err != nil {
		log.Print(err) // some jobs were handed back to pending
	}
	job, err := client.Get(ctx, "critical", e.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, string(job.Result))
	// Output:
	// sent to ada@example.com
	// completed {"sent":true}
}

// A handler that logs, reports its progress and attaches an artifact: all
// of it is in the store, fenced by the job's claim, before the job
// completes, and readable after (or live, over HTTP: GET
// /v1/queues/{queue}/jobs/{id}/stream).
func Example_logsProgressAndArtifacts() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testutil.ExampleRedisAddr()})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.ExampleNamespace("worker-logs")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	mux := worker.NewMux()
	mux.HandleFunc("report", func(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
		logger := worker.Logger(ctx) // or worker.Log(ctx), an io.Writer
		for i := 1; i <= 3; i++ {
			logger.Info("part done", "part", i)
			if err := worker.Progress(ctx, float64(i)*100/3, fmt.Sprintf("%d of 3", i)); err != nil {
				return nil, err
			}
		}
		if err := worker.Attach(ctx, "summary", map[string]int{"parts": 3}); err != nil {
			return nil, err
		}
		return nil, nil
	})
	done := make(chan struct{}, 1)
	w, err := worker.New(worker.Config{Client: client, Handler: mux, Queues: []worker.QueueConfig{{Name: "reports"}},
		OnOutcome: func(worker.Outcome) { done <- struct{}{} }})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	e, err := client.Enqueue(ctx, queue.NewJob{Queue: "reports", Kind: "report"})
	if err != nil {
		log.Fatal(err)
	}
	<-done
	stop()
	if err := <-ran; err != nil {
		log.Print(err)
	}

	job, err := client.Get(ctx, "reports", e.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Progress.Message, string(job.Artifacts))
	page, err := client.Logs(ctx, "reports", e.Job.ID, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range page.Lines {
		_, msg, _ := strings.Cut(l.Line, " level=INFO ")
		fmt.Println(l.Seq, msg)
	}
	// Output:
	// completed 3 of 3 {"summary":{"parts":3}}
	// 1 msg="part done" part=1
	// 2 msg="part done" part=2
	// 3 msg="part done" part=3
}
