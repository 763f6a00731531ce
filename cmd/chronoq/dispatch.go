package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/internal/alarm"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
)

// runDispatch is `chronoq dispatch`: push dispatchers without the API, to
// scale them apart from it (serve runs them too unless --no-dispatch). It
// runs a promoter and a reclaimer as well, as serve does: a deployment of
// dispatch instances and Go producers only still has its scheduled jobs
// promoted and its lapsed leases reclaimed (several of each are safe).
func runDispatch(ctx context.Context, args []string, env func(string) string, _, stderr io.Writer) int {
	var c serveConfig
	fs := flag.NewFlagSet("chronoq dispatch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := &envFlags{fs: fs, getenv: env}
	var cluster, level, metrics string
	e.String(&c.redisURL, "redis-url", "REDIS_URL", "", "Redis to use: redis://[user:password@]host:port[/db] or rediss:// for TLS (required, unless --redis-cluster)")
	e.String(&cluster, "redis-cluster", "CHRONOQ_REDIS_CLUSTER", "", "Redis Cluster seed addresses, comma-separated host:port")
	e.String(&c.namespace, "namespace", "CHRONOQ_NAMESPACE", queue.DefaultNamespace, "prefix of every Redis key")
	e.String(&c.dispatchAllow, "dispatch-allow", "CHRONOQ_DISPATCH_ALLOW", "", "push targets the SSRF guard lets through although internal: CIDRs, IPs and host names, comma-separated")
	e.String(&metrics, "metrics-listen", "CHRONOQ_METRICS_LISTEN", "", "address to serve /metrics on; empty: none")
	e.Duration(&c.shutdownTimeout, "shutdown-timeout", "CHRONOQ_SHUTDOWN_TIMEOUT", 30*time.Second, "longest wait for requests under way at shutdown")
	storeFlags(e, &c)
	e.String(&c.logFormat, "log-format", "CHRONOQ_LOG_FORMAT", "text", "log format: text or json")
	e.String(&level, "log-level", "CHRONOQ_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	err := errors.Join(e.errs...)
	if err == nil {
		err = fs.Parse(args)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	for a := range strings.SplitSeq(cluster, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.redisCluster = append(c.redisCluster, a)
		}
	}
	if err == nil {
		err = c.logLevel.UnmarshalText([]byte(level))
	}
	if err == nil && c.redisURL == "" && len(c.redisCluster) == 0 {
		err = errors.New("--redis-url (or --redis-cluster) is required: dispatchers share the Redis of the serve instances")
	}
	if err != nil {
		fmt.Fprintf(stderr, "chronoq dispatch: %v\n", err)
		return 2
	}
	log := newLogger(c, stderr)
	if err := dispatchOnly(ctx, c, metrics, log); err != nil {
		log.Error("chronoq dispatch: stopped", "err", err)
		return 1
	}
	return 0
}

func dispatchOnly(ctx context.Context, c serveConfig, metricsAddr string, log *slog.Logger) error {
	rdb, closeRedis, err := connect(ctx, c, log)
	if err != nil {
		return err
	}
	defer closeRedis()
	clock := alarm.Real() // the promoter's waits end on a kernel timer
	client, err := queue.NewClient(storeConfig(c, rdb, clock))
	if err != nil {
		return err
	}
	defer client.Close()
	guard, err := dispatch.ParseAllow(c.dispatchAllow)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(limitWaitMetric(client))
	d, err := dispatch.New(dispatch.Config{Client: client, Guard: guard, ShutdownTimeout: c.shutdownTimeout, Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	promoter, err := delayed.NewPromoter(delayed.Config{Source: client.Source(), Clock: clock, MaxSleep: c.promoteMaxSleep, ReconcileInterval: c.reconcileEvery,
		Logger: log})
	if err != nil {
		return err
	}
	reclaimer, err := queue.NewReclaimer(queue.ReclaimerConfig{Client: client, Interval: c.reclaimInterval, ReconcileInterval: c.reconcileEvery, Logger: log})
	if err != nil {
		return err
	}
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
	}
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()
	var background lifecycle.Group
	background.Start(bg, "promoter", promoter)
	background.Start(bg, "reclaimer", reclaimer)
	background.Start(bg, "dispatcher", d)
	log.Info("chronoq dispatching", "namespace", c.namespace)
	<-ctx.Done()
	// The dispatcher's workers give the requests under way
	// --shutdown-timeout; wait a little longer for them to hand back the rest.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout+5*time.Second)
	defer cancel()
	return background.Stop(sctx)
}
