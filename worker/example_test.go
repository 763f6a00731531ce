package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
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
// stop on SIGINT or SIGTERM that gives running jobs 30 s to finish before
// handing them back. (Not run: it needs a Redis server.)
func Example_worker() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	mux := worker.NewMux()
	mux.Use(worker.Logging(nil, nil), worker.Recover)
	mux.HandleFunc("email.send", func(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
		// ... send it, honouring ctx ...
		return nil, nil
	})

	w, err := worker.New(worker.Config{Client: client, Handler: mux, Concurrency: 50, Priority: worker.Strict,
		Queues: []worker.QueueConfig{{Name: "critical"}, {Name: "default"}}, ShutdownTimeout: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil { // until SIGINT or SIGTERM, then the graceful stop
		log.Print(err) // some jobs were handed back to pending
	}
}
