package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The HTTP service over a queue client, served and shut down the way
// chronoq serve does it (which also runs a promoter, a reclaimer and the
// cron scheduler beside it): long polls and event streams end at once on
// Shutdown, through Drain.
func ExampleNew() {
	ctx := context.Background()
	// In a program: the address of your Redis, and no Namespace (the
	// default "chronoq"). Here: the test binary's redis-server, and keys of
	// the example's own.
	rdb := redis.NewClient(&redis.Options{Addr: testutil.ExampleRedisAddr()})
	defer rdb.Close()
	client, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.ExampleNamespace("api")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	srv, err := api.New(api.Config{Store: client, Token: "secret"})
	if err != nil {
		log.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Drain)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // in a program: "127.0.0.1:8080", say
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	base := "http://" + ln.Addr().String()

	call := func(method, path, token, body string) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		var out struct {
			Kind    string `json:"kind"`
			Status  string `json:"status"`
			Pending *int   `json:"pending"`
			Error   *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.Unmarshal(b, &out); err != nil {
			log.Fatal(err)
		}
		switch {
		case out.Error != nil:
			fmt.Println(res.StatusCode, out.Error.Code)
		case out.Pending != nil:
			fmt.Println(res.StatusCode, "pending:", *out.Pending)
		default:
			fmt.Println(res.StatusCode, out.Kind, out.Status)
		}
	}
	call(http.MethodPost, "/v1/jobs", "secret", `{"queue":"emails","kind":"welcome","payload":{"to":"ada@example.com"}}`)
	call(http.MethodPost, "/v1/jobs", "secret", `{"queue":"emails","kind":"reminder","delay":"1h"}`)
	call(http.MethodGet, "/v1/queues/emails", "secret", "")
	call(http.MethodGet, "/v1/queues/emails", "", "")

	shutdown, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil {
		log.Print(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
	}
	// Output:
	// 201 welcome pending
	// 201 reminder scheduled
	// 200 pending: 1
	// 401 unauthenticated
}
