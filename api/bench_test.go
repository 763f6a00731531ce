package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
)

// benchServer is a redis-server of the benchmark's own, a queue client on
// it and the API server on a loopback listener, all closed at cleanup.
func benchServer(b *testing.B) (*queue.Client, *redis.Client, *httptest.Server) {
	b.Helper()
	rs := testutil.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr(), PoolSize: 128})
	b.Cleanup(func() { _ = rdb.Close() })
	client, err := queue.NewClient(queue.Config{Redis: rdb})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	// a registry, as chronoq serve has: the workers that name themselves
	// are recorded in it
	workers, err := registry.New(client, registry.Config{})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: client, Workers: workers, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	return client, rdb, hs
}

// BenchmarkHTTPEnqueue measures the HTTP produce path end to end: clients
// in parallel over a real loopback listener with keep-alive, the server,
// and a redis-server of its own, all on this machine. It reports
// requests/s and jobs/s.
//
//	go test -run '^$' -bench HTTPEnqueue -benchtime 5s ./api/
func BenchmarkHTTPEnqueue(b *testing.B) {
	_, rdb, hs := benchServer(b)
	addr := strings.TrimPrefix(hs.URL, "http://")

	run := func(b *testing.B, body []byte, jobsPerRequest int) {
		if err := rdb.FlushAll(b.Context()).Err(); err != nil { // a dedicated server: keep memory flat
			b.Fatal(err)
		}
		path := "/v1/jobs"
		if jobsPerRequest > 1 {
			path = "/v1/jobs/batch"
		}
		req := rawRequest(addr, path, string(body)) // rendered once
		redisCPU0, procCPU0 := redisCPU(b, rdb), processCPU()
		b.ResetTimer()
		start := time.Now()
		eachClient(b, addr, func(c *rawConn, pb *testing.PB) error {
			for pb.Next() {
				if err := c.post(req, http.StatusCreated); err != nil {
					return err
				}
			}
			return nil
		})
		elapsed := time.Since(start).Seconds()
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed, "requests/s")
		b.ReportMetric(float64(b.N*jobsPerRequest)/elapsed, "jobs/s")
		// CPU per job, which the other work on a shared machine changes
		// less than the rates: Redis's, and this process's (server and
		// clients).
		jobs := float64(b.N * jobsPerRequest)
		b.ReportMetric((redisCPU(b, rdb)-redisCPU0).Seconds()*1e6/jobs, "redis-cpu-µs/job")
		b.ReportMetric((processCPU()-procCPU0).Seconds()*1e6/jobs, "proc-cpu-µs/job")
	}

	b.Run("single", func(b *testing.B) {
		run(b, []byte(`{"queue":"bench","kind":"email","payload":{"to":"a@example.com","n":1}}`), 1)
	})
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			jobs := make([]string, n)
			for i := range jobs {
				jobs[i] = fmt.Sprintf(`{"queue":"bench","kind":"email","payload":{"to":"a@example.com","n":%d}}`, i)
			}
			run(b, []byte(`{"jobs":[`+strings.Join(jobs, ",")+`]}`), n)
		})
	}
}

// BenchmarkHTTPWork measures the path of a worker that speaks HTTP only,
// one job a call: jobs are pending, and 32 × GOMAXPROCS clients, each on
// a keep-alive connection of its own, claim one (POST
// /v1/queues/{queue}/claim, max 1) and end it: complete it (POST
// .../jobs/{id}/complete, sub-benchmark complete), which answers the
// completed job, or fail it with a retry an hour later (POST .../fail,
// sub-benchmark fail), which answers the job scheduled again. In
// sub-benchmark named, the clients complete their jobs as 8 workers of 8
// connections each that name themselves in every call (worker_id), as
// the example workers do: the registry records each claim's jobs and
// each complete. An op is a job claimed and ended: two requests. It
// reports jobs/s and Redis's and this process's CPU a job.
//
//	go test -run '^$' -bench HTTPWork -benchtime 20000x ./api/
func BenchmarkHTTPWork(b *testing.B) {
	for _, end := range []struct {
		name, path, status string
		named              bool
		body               func(token string) string
	}{
		{"complete", "complete", "completed", false, func(token string) string { return `{"token":"` + token + `"` }},
		{"fail", "fail", "scheduled", false, func(token string) string {
			return `{"token":"` + token + `","error":"smtp: 421 try again","retry_after":"1h"`
		}},
		{"named", "complete", "completed", true, func(token string) string { return `{"token":"` + token + `"` }},
	} {
		b.Run(end.name, func(b *testing.B) { httpWork(b, end.path, end.status, end.named, end.body) })
	}
}

// httpWork is BenchmarkHTTPWork ending each job with a POST to
// .../jobs/{id}/<path>, of body(token) and the worker's id when named and
// a closing brace, that answers the job in status.
func httpWork(b *testing.B, path, status string, named bool, body func(token string) string) {
	client, rdb, hs := benchServer(b)
	addr := strings.TrimPrefix(hs.URL, "http://")
	const q = "work"
	ctx := b.Context()
	for left := b.N; left > 0; left -= queue.MaxBatch {
		batch := make([]queue.NewJob, min(left, queue.MaxBatch))
		for i := range batch {
			batch[i] = queue.NewJob{Queue: q, Kind: "email", Payload: json.RawMessage(`{"to":"a@example.com"}`)}
		}
		if _, err := client.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	var clients atomic.Int64
	redisCPU0, procCPU0 := redisCPU(b, rdb), processCPU()
	b.ResetTimer()
	start := time.Now()
	eachClient(b, addr, func(c *rawConn, pb *testing.PB) error {
		claimReq, who := rawRequest(addr, "/v1/queues/"+q+"/claim", `{"max":1}`), ""
		if named {
			who = fmt.Sprintf(`,"worker_id":"w%d"`, clients.Add(1)%8)
			claimReq = rawRequest(addr, "/v1/queues/"+q+"/claim", `{"max":1`+who+`}`)
		}
		var claimed struct {
			Jobs []struct {
				ID    string `json:"id"`
				Token string `json:"token"`
			} `json:"jobs"`
		}
		var done struct {
			Status string `json:"status"`
		}
		for pb.Next() {
			err := c.post(claimReq, http.StatusOK)
			if err == nil {
				err = json.Unmarshal(c.answer.Bytes(), &claimed)
			}
			if err == nil && len(claimed.Jobs) != 1 {
				err = fmt.Errorf("claimed %d jobs, want 1", len(claimed.Jobs))
			}
			if err != nil {
				return err
			}
			j := claimed.Jobs[0]
			err = c.post(rawRequest(addr, "/v1/queues/"+q+"/jobs/"+j.ID+"/"+path, body(j.Token)+who+"}"), http.StatusOK)
			if err == nil {
				err = json.Unmarshal(c.answer.Bytes(), &done)
			}
			if err == nil && done.Status != status {
				err = fmt.Errorf("%s answered status %q", path, done.Status)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed, "jobs/s")
	b.ReportMetric((redisCPU(b, rdb)-redisCPU0).Seconds()*1e6/float64(b.N), "redis-cpu-µs/job")
	b.ReportMetric((processCPU()-procCPU0).Seconds()*1e6/float64(b.N), "proc-cpu-µs/job")
	b.ReportMetric(0, "ns/op")
}

// rawRequest renders a POST of a JSON body to path: the benchmarks'
// clients are plain HTTP/1.1 over keep-alive connections, so that the
// measure is the server's, not net/http's client's.
func rawRequest(addr, path, body string) []byte {
	return fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, addr, len(body), body)
}

// rawConn is a benchmark's client: a keep-alive connection, its reader,
// and the body of the last answer.
type rawConn struct {
	conn   net.Conn
	br     *bufio.Reader
	answer bytes.Buffer
}

// post sends req and reads its answer; an error unless its status is want.
func (c *rawConn) post(req []byte, want int) error {
	if _, err := c.conn.Write(req); err != nil {
		return err
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	c.answer.Reset()
	_, err = c.answer.ReadFrom(res.Body)
	_ = res.Body.Close()
	if err == nil && res.StatusCode != want {
		err = fmt.Errorf("status %d: %s", res.StatusCode, c.answer.Bytes())
	}
	return err
}

// eachClient runs loop in 32 × GOMAXPROCS clients, each on a connection
// of its own, sharing b.N ops out through pb; an error ends its client's
// loop and fails b.
func eachClient(b *testing.B, addr string, loop func(c *rawConn, pb *testing.PB) error) {
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close()
		if err := loop(&rawConn{conn: conn, br: bufio.NewReaderSize(conn, 64<<10)}, pb); err != nil {
			b.Error(err)
		}
	})
}

// BenchmarkHTTPLateness measures how late scheduled jobs reach a worker
// that speaks HTTP only, the black-box view: 1,000 jobs due evenly over
// one second from 500 ms on, enqueued with run_at in batches over HTTP;
// 8 HTTP clients long-poll POST /v1/queues/{queue}/claim (max 16, wait
// 1 s) and complete what they get; a delayed.Promoter runs on the
// server's client, as in `chronoq serve`. Lateness is the time the claim's
// answer was read less the run_at asked for (whole milliseconds, as HTTP
// takes them).
//
//	go test -run '^$' -bench HTTPLateness -benchtime 1x ./api/
func BenchmarkHTTPLateness(b *testing.B) {
	const (
		jobs     = 1000
		spread   = time.Second
		lead     = 500 * time.Millisecond
		claimers = 8
		q        = "late"
	)
	client, _, hs := benchServer(b)
	addr := strings.TrimPrefix(hs.URL, "http://")
	// Each client is a raw keep-alive connection (rawConn), as in
	// BenchmarkHTTPWork: the clients run in this process, beside the
	// server, and net/http's client would make most of its garbage, so
	// its collections would stall the server as a client elsewhere cannot.
	dial := func(ctx context.Context) (*rawConn, error) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		deadline, _ := ctx.Deadline()
		if err := conn.SetDeadline(deadline); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return &rawConn{conn: conn, br: bufio.NewReaderSize(conn, 64<<10)}, nil
	}
	claimReq := rawRequest(addr, "/v1/queues/"+q+"/claim", `{"wait":"1s","max":16}`)
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var wg sync.WaitGroup
		var conns []*rawConn
		// abort ends the run's goroutines (the promoter, the claimers,
		// whose long polls the closed connections end), then fails.
		abort := func(err error) {
			cancel()
			for _, c := range conns {
				_ = c.conn.Close()
			}
			wg.Wait()
			b.Fatal(err)
		}
		for range claimers + 1 { // and the producer, the last
			c, err := dial(ctx)
			if err != nil {
				abort(err)
			}
			conns = append(conns, c)
		}
		p, err := delayed.NewPromoter(delayed.Config{Source: client.Source(), Queues: []string{q}})
		if err != nil {
			abort(err)
		}
		promoting := lifecycle.Start(ctx, p)
		base := time.Now().Add(lead).Truncate(time.Millisecond)
		asked := make([]time.Time, jobs)
		for i := range asked {
			asked[i] = base.Add((spread * time.Duration(i) / jobs).Truncate(time.Millisecond))
		}
		lateness := make([]time.Duration, jobs)
		var got atomic.Int64
		for _, c := range conns[:claimers] {
			wg.Go(func() {
				var res struct {
					Jobs []struct {
						ID      string          `json:"id"`
						Token   string          `json:"token"`
						Payload json.RawMessage `json:"payload"`
					} `json:"jobs"`
				}
				for got.Load() < jobs && ctx.Err() == nil {
					err := c.post(claimReq, http.StatusOK)
					now := time.Now()
					if err == nil {
						res.Jobs = res.Jobs[:0]
						err = json.Unmarshal(c.answer.Bytes(), &res)
					}
					if err != nil {
						if ctx.Err() == nil { // not an abort's closed connection
							b.Error(err)
						}
						return
					}
					for _, j := range res.Jobs {
						i, err := strconv.Atoi(string(j.Payload))
						if err != nil || i < 0 || i >= jobs {
							b.Errorf("payload %q", j.Payload)
							return
						}
						lateness[i] = now.Sub(asked[i])
					}
					for _, j := range res.Jobs {
						if err := c.post(rawRequest(addr, "/v1/queues/"+q+"/jobs/"+j.ID+"/complete", `{"token":"`+j.Token+`"}`), http.StatusOK); err != nil {
							if ctx.Err() == nil {
								b.Error(err)
							}
							return
						}
					}
					got.Add(int64(len(res.Jobs)))
				}
			})
		}
		producer := conns[claimers]
		for i := 0; i < jobs; i += 100 {
			batch := make([]map[string]any, 0, 100)
			for k := i; k < i+100; k++ {
				batch = append(batch, map[string]any{"queue": q, "kind": "late", "payload": k,
					"run_at": asked[k].UTC().Format(time.RFC3339Nano)})
			}
			body, err := json.Marshal(map[string]any{"jobs": batch})
			if err == nil {
				err = producer.post(rawRequest(addr, "/v1/jobs/batch", string(body)), http.StatusCreated)
			}
			if err != nil {
				abort(err)
			}
		}
		wg.Wait()
		for _, c := range conns {
			_ = c.conn.Close()
		}
		if err := promoting.Stop(ctx); err != nil {
			b.Error(err)
		}
		cancel()
		if got.Load() < jobs {
			b.Fatalf("%d of %d jobs claimed", got.Load(), jobs)
		}
		slices.Sort(lateness)
		pct := func(p float64) float64 { return float64(lateness[int(p*float64(jobs-1))].Microseconds()) / 1000 }
		early := 0
		for _, d := range lateness {
			if d < 0 {
				early++
			}
		}
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(lateness[jobs-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(early), "early")
		if early > 0 {
			b.Errorf("%d jobs ran early; the earliest by %s", early, -lateness[0])
		}
	}
}

// redisCPU is the CPU time redis-server has used (INFO cpu).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(b.Context(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\r\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				total += x
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
