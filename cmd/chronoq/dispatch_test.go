package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// `chronoq dispatch` alone (no serve instance) needs a Redis, delivers a
// push queue's scheduled job when it is due, and stops cleanly at the end
// of its context.
func TestDispatchCommand(t *testing.T) {
	t.Parallel()
	var stderr testutil.LogBuffer
	require.Equal(t, 2, runDispatch(t.Context(), nil, env(), io.Discard, &stderr), "no --redis-url")
	require.Contains(t, stderr.String(), "--redis-url")

	arrived := make(chan time.Time, 1)
	rc := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { arrived <- time.Now() }))
	t.Cleanup(rc.Close)
	redisURL, ns := "redis://"+testutil.RedisAddr(t)+"/0", testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: ns})
	require.NoError(t, err)
	loopback, err := dispatch.ParseAllow("127.0.0.1")
	require.NoError(t, err)
	_, err = dispatch.NewStore(c, loopback).Put(t.Context(), "hooks", dispatch.QueueConfig{Target: dispatch.Target{URL: rc.URL}})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var logs testutil.LogBuffer
	go func() {
		done <- runDispatch(ctx, []string{"--redis-url", redisURL, "--namespace", ns, "--dispatch-allow", "127.0.0.1"}, env(), io.Discard, &logs)
	}()
	due := time.Now().Add(300 * time.Millisecond)
	_, err = c.Enqueue(t.Context(), queue.NewJob{Queue: "hooks", Kind: "k", RunAt: due})
	require.NoError(t, err)
	select {
	case at := <-arrived:
		require.False(t, at.Before(due), "delivered %s early", due.Sub(at))
	case <-time.After(15 * time.Second):
		t.Fatalf("the scheduled job never arrived\n%s", logs.String())
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, logs.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("chronoq dispatch did not stop\n%s", logs.String())
	}
	require.Contains(t, logs.String(), "chronoq dispatching")
}
