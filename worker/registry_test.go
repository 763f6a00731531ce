package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

// registered answers the worker id as the registry lists it, and whether
// it is listed.
func (b *testBundle) registered(t *testing.T, id string) (registry.Worker, bool) {
	t.Helper()
	reg, err := registry.New(b.client, registry.Config{})
	require.NoError(t, err)
	p, err := reg.List(b.ctx, registry.ListOptions{Limit: registry.MaxListLimit})
	require.NoError(t, err)
	for _, w := range p.Workers {
		if w.ID == id {
			return w, true
		}
	}
	return registry.Worker{}, false
}

// withinTwoSeconds waits for cond while it moves the fake clock on by
// steps of 100 ms, up to two seconds: well before the refresh of a third
// of the TTL.
func (b *testBundle) withinTwoSeconds(t *testing.T, cond func() bool) {
	t.Helper()
	until := b.clock.Now().Add(2 * time.Second)
	require.Eventually(t, func() bool {
		if b.clock.Now().Before(until) {
			b.clock.Advance(100 * time.Millisecond)
		}
		return cond()
	}, 10*time.Second, 5*time.Millisecond)
}

func TestWorkerRegistersAndDeregisters(t *testing.T) {
	t.Parallel()
	testWorkerRegistersAndDeregisters(t, setup(t))
}

func TestClusterWorkerRegistersAndDeregisters(t *testing.T) {
	t.Parallel()
	testWorkerRegistersAndDeregisters(t, setupOn(t, testutil.Cluster(t)))
}

func testWorkerRegistersAndDeregisters(t *testing.T, b *testBundle) {
	release := make(chan struct{})
	started := make(chan *queue.Job, 10)
	b.mux.HandleFunc("hold", func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
		started <- j
		<-release
		return nil, nil
	})
	run := b.start(t, worker.Config{ID: "w-1", Labels: []string{"gpu", "eu"}, Version: "v9.9.9",
		Queues: []worker.QueueConfig{{Name: "q1"}, {Name: "q2"}}})

	var w registry.Worker
	require.Eventually(t, func() (ok bool) { w, ok = b.registered(t, "w-1"); return ok }, 10*time.Second, 5*time.Millisecond)
	host, _ := os.Hostname()
	require.Equal(t, registry.Info{ID: "w-1", Host: host, Labels: []string{"eu", "gpu"}, Queues: []string{"q1", "q2"}, Version: "v9.9.9"}, w.Info)
	require.Empty(t, w.Jobs)
	require.False(t, w.StartedAt.IsZero())

	// The jobs it runs are listed within a second of their start, and
	// gone within a second of their end.
	j1 := b.enqueue(t, queue.NewJob{Kind: "hold", Queue: "q1"})
	j2 := b.enqueue(t, queue.NewJob{Kind: "hold", Queue: "q2"})
	recv(t, b.ctx, started)
	recv(t, b.ctx, started)
	want := []registry.JobRef{{Queue: "q1", ID: j1.ID}, {Queue: "q2", ID: j2.ID}}
	b.withinTwoSeconds(t, func() bool { w, _ = b.registered(t, "w-1"); return len(w.Jobs) == 2 })
	require.Equal(t, want, w.Jobs)
	close(release)
	b.outcome(t)
	b.outcome(t)
	b.withinTwoSeconds(t, func() bool { w, _ = b.registered(t, "w-1"); return len(w.Jobs) == 0 })

	// A clean stop deregisters it.
	require.NoError(t, run.Stop(b.ctx))
	_, ok := b.registered(t, "w-1")
	require.False(t, ok)
}

// A worker refreshes every third of its TTL: it stays registered however
// long it runs.
func TestWorkerRefreshesItsRegistration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ttl := 30 * time.Second
	b.start(t, worker.Config{ID: "w-2", RegistryTTL: ttl})
	var first registry.Worker
	require.Eventually(t, func() (ok bool) { first, ok = b.registered(t, "w-2"); return ok }, 10*time.Second, 5*time.Millisecond)
	for range 9 { // three TTLs
		b.clock.Advance(ttl / 3)
		now := b.clock.Now()
		require.Eventually(t, func() bool {
			w, ok := b.registered(t, "w-2")
			require.True(t, ok, "expired")
			return !w.LastSeenAt.Before(now)
		}, 10*time.Second, 5*time.Millisecond)
	}
	w, _ := b.registered(t, "w-2")
	require.Equal(t, first.StartedAt, w.StartedAt)
	require.Equal(t, w.LastSeenAt.Add(ttl), w.ExpiresAt)
}

func TestWorkerRegistryConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := worker.HandlerFunc(func(context.Context, *queue.Job) (json.RawMessage, error) { return nil, nil })
	w, err := worker.New(worker.Config{Client: b.client, Handler: h})
	require.NoError(t, err)
	require.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*-`+strconv.Itoa(os.Getpid())+`-[0-9a-f]{6}$`), w.ID())
	require.NoError(t, registry.ValidateID(w.ID()))
	w, err = worker.New(worker.Config{Client: b.client, Handler: h, DisableRegistry: true})
	require.NoError(t, err)
	require.Empty(t, w.ID())
	for _, cfg := range []worker.Config{
		{ID: "not ok"},
		{Labels: []string{"a b"}},
		{RegistryTTL: time.Millisecond},
		{Version: string(make([]byte, registry.MaxVersionBytes+1))},
	} {
		cfg.Client, cfg.Handler = b.client, h
		_, err := worker.New(cfg)
		require.ErrorIs(t, err, queue.ErrInvalid, "%+v", cfg)
	}
}
