package api_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// BenchmarkHTTPEnqueue measures the HTTP produce path end to end: clients
// in parallel over a real loopback listener with keep-alive, the server,
// and a redis-server of its own, all on this machine. It reports
// requests/s and jobs/s.
//
//	go test -run '^$' -bench HTTPEnqueue -benchtime 5s ./api/
func BenchmarkHTTPEnqueue(b *testing.B) {
	rs := testutil.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr(), PoolSize: 128})
	b.Cleanup(func() { _ = rdb.Close() })
	client, err := queue.NewClient(queue.Config{Redis: rdb})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	srv, err := api.New(api.Config{Store: client, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	addr := strings.TrimPrefix(hs.URL, "http://")

	run := func(b *testing.B, body []byte, jobsPerRequest int) {
		if err := rdb.FlushAll(b.Context()).Err(); err != nil { // a dedicated server: keep memory flat
			b.Fatal(err)
		}
		path := "/v1/jobs"
		if jobsPerRequest > 1 {
			path = "/v1/jobs/batch"
		}
		// The request, rendered once: the clients are plain HTTP/1.1 over
		// keep-alive connections, so that the measure is the server's, not
		// net/http's client's.
		req := []byte(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, addr, len(body), body))
		b.SetParallelism(32) // 32 × GOMAXPROCS clients, one connection each
		redisCPU0, procCPU0 := redisCPU(b, rdb), processCPU()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Close()
			br := bufio.NewReaderSize(conn, 64<<10)
			for pb.Next() {
				if _, err := conn.Write(req); err != nil {
					b.Error(err)
					return
				}
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				if res.StatusCode != http.StatusCreated {
					b.Errorf("status %d", res.StatusCode)
					return
				}
			}
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
