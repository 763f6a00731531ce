// Command push-receiver is the receiver of the README's push walk-through:
// it verifies chronoq's signature, logs each job, and with FAIL_ONCE set
// answers 503 to every first attempt, so that the retry shows. -listen
// sets the address it listens on (127.0.0.1:9000 by default).
package main

import (
	"flag"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/chronoq/chronoq/dispatch"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to listen on (host:port)")
	flag.Parse()
	secret, failOnce := os.Getenv("SECRET"), os.Getenv("FAIL_ONCE") != ""
	http.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := dispatch.Verify(r.Header, body, time.Now(), 0, secret); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		slog.Info("job", "id", r.Header.Get("chronoq-job-id"), "attempt", r.Header.Get("chronoq-attempt"), "body", string(body))
		if failOnce && r.Header.Get("chronoq-attempt") == "1" {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second}
	slog.Info("listening", "addr", *listen)
	log.Fatal(srv.ListenAndServe())
}
