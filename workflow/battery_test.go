package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/plumbing"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/worker"
)

func TestBatterySingle(t *testing.T) {
	t.Parallel()
	runBattery(t, testutil.Redis(t))
}

func TestBatteryCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runBattery(t, testutil.Cluster(t))
}

// runBattery runs graphs to their end on the real clock, with a promoter
// and a reclaimer as chronoq serve runs them, while Go workers
// are stopped and started again (their running jobs handed back), a
// "worker" claims jobs and dies holding them (their leases lapse and the
// reclaim sweep takes them back), handlers fail now and then (and retry),
// and releasers are stopped mid-pass and die between their steps. Every
// node runs and completes, and none is released twice.
func runBattery(t *testing.T, rdb redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := testutil.Namespace(t)
	quiet := slog.New(slog.DiscardHandler)
	newWF := func() *Client {
		q, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns})
		require.NoError(t, err)
		t.Cleanup(func() { _ = q.Close() })
		c, err := New(Config{Queue: q})
		require.NoError(t, err)
		return c
	}
	producer := newWF()
	queues := []string{"bat-a", "bat-b", "bat-c"}
	// Releases are counted where they happen: each is one "ready" event,
	// published by the script that moved the job (a count of the calls'
	// answers would miss a release whose reply a stopped releaser lost).
	events, err := producer.q.Subscribe(ctx, queues...)
	require.NoError(t, err)
	var mu sync.Mutex
	released := map[string]int{}
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		for ev := range events {
			if ev.Type == "ready" {
				mu.Lock()
				released[ev.ID]++
				mu.Unlock()
			}
		}
	}()

	// Graphs: a fan-out/fan-in of 120, a chain of 15, diamonds.
	var ids []string
	nodes := []Node{node("root", "bat-a")}
	var mids []string
	for i := range 118 {
		mids = append(mids, fmt.Sprintf("m%d", i))
		nodes = append(nodes, node(mids[i], queues[i%3], "root"))
	}
	specs := []Spec{{Nodes: append(nodes, node("sink", "bat-b", mids...))}}
	chain := []Node{node("c0", "bat-a")}
	for i := 1; i < 15; i++ {
		chain = append(chain, node(fmt.Sprintf("c%d", i), queues[i%3], fmt.Sprintf("c%d", i-1)))
	}
	specs = append(specs, Spec{Nodes: chain})
	for range 5 {
		specs = append(specs, Spec{Nodes: []Node{node("a", "bat-c"), node("b", "bat-a", "a"), node("c", "bat-b", "a"), node("d", "bat-c", "b", "c")}})
	}
	total := 0
	for i := range specs {
		for j := range specs[i].Nodes {
			specs[i].Nodes[j].Job.MaxAttempts = 20
			specs[i].Nodes[j].Job.Visibility = 300 * time.Millisecond
		}
		total += len(specs[i].Nodes)
	}

	// Workers: each handler fails one run in 8 (a retry), and two
	// workers are stopped and started again in turn.
	var runs atomic.Int64
	mux := worker.NewMux()
	mux.HandleFunc("step", func(_ context.Context, j *queue.Job) (json.RawMessage, error) {
		runs.Add(1)
		if rand.IntN(8) == 0 {
			return nil, errors.New("flaky")
		}
		return json.RawMessage(fmt.Sprintf(`{"node":%q}`, j.Workflow.Node)), nil
	})
	qcfg := make([]worker.QueueConfig, len(queues))
	for i, q := range queues {
		qcfg[i] = worker.QueueConfig{Name: q}
	}
	// Every few outcomes, the next fault: the faults follow the work, not
	// a timer.
	outcomes := make(chan struct{}, 1024)
	onOutcome := func(worker.Outcome) {
		select {
		case outcomes <- struct{}{}:
		default:
		}
	}
	startWorker := func() *lifecycle.Handle {
		w, err := worker.New(worker.Config{Client: newWF().q, Handler: mux, Queues: qcfg, Concurrency: 8,
			ShutdownTimeout: time.Millisecond, IdleWait: 50 * time.Millisecond, Logger: quiet, OnOutcome: onOutcome})
		require.NoError(t, err)
		return lifecycle.Start(ctx, w)
	}
	rec, err := queue.NewReclaimer(queue.ReclaimerConfig{Client: newWF().q, Interval: 100 * time.Millisecond, Logger: quiet})
	require.NoError(t, err)
	reclaiming := lifecycle.Start(ctx, rec)
	defer func() { _ = reclaiming.Stop(context.Background()) }()
	// The retries of a worker that was stopped are promoted by a promoter.
	prom, err := delayed.NewPromoter(delayed.Config{Source: newWF().q.Source(), Logger: quiet})
	require.NoError(t, err)
	promoting := lifecycle.Start(ctx, prom)
	defer func() { _ = promoting.Stop(context.Background()) }()

	// Releasers: each dies between its steps in one batch of four, and
	// is stopped and started again in turn.
	startReleaser := func() *lifecycle.Handle {
		r, err := NewReleaser(ReleaserConfig{Client: newWF(), Interval: 20 * time.Millisecond, Logger: quiet})
		require.NoError(t, err)
		var rmu sync.Mutex
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		dieAt(t, r, func(string) bool {
			rmu.Lock()
			defer rmu.Unlock()
			return rng.IntN(8) == 0
		})
		return lifecycle.Start(ctx, r)
	}

	for _, s := range specs {
		w, err := producer.Enqueue(ctx, s)
		require.NoError(t, err)
		ids = append(ids, w.ID)
	}
	settled := func() bool {
		for _, id := range ids {
			w, err := producer.Get(ctx, id)
			require.NoError(t, err)
			if w.Status != StatusCompleted {
				return false
			}
		}
		return true
	}

	workers := []*lifecycle.Handle{startWorker(), startWorker()}
	releasers := []*lifecycle.Handle{startReleaser(), startReleaser()}
	abandoner := newWF().q
	faultsCtx, stopFaults := context.WithCancel(ctx)
	faulting := make(chan error, 1)
	go func() {
		for seen, round := 0, 0; ; {
			select {
			case <-faultsCtx.Done():
				faulting <- nil
				return
			case <-outcomes:
			}
			if seen++; seen%5 != 0 {
				continue
			}
			i := round % 2
			switch round % 4 {
			case 0: // a worker stops, handing its running jobs back
				if err := ignoreHandBack(workers[i].Stop(ctx)); err != nil {
					faulting <- err
					return
				}
				workers[i] = startWorker()
			case 1: // a releaser stops mid-pass
				if err := releasers[i].Stop(ctx); err != nil {
					faulting <- err
					return
				}
				releasers[i] = startReleaser()
			case 2: // a worker dies holding a job: its lease lapses
				if _, err := abandoner.Claim(ctx, queues[round%3], queue.ClaimOptions{}); err != nil {
					faulting <- err
					return
				}
			}
			round++
		}
	}()
	if !assert.Eventually(t, settled, 90*time.Second, 20*time.Millisecond, "the graphs did not settle") {
		for _, id := range ids {
			rec, err := plumbing.Of(producer.q).ReadWorkflow(context.Background(), id)
			require.NoError(t, err)
			w, err := producer.Get(context.Background(), id)
			require.NoError(t, err)
			for i, n := range rec.Nodes {
				if w.Nodes[i].Status != queue.StatusCompleted || queue.Status(n.Outcome) != queue.StatusCompleted {
					t.Logf("workflow %s node %s: job %s/%s %s attempts %d; outcome %q left %d failed %d gen %d", id, n.Name,
						n.Queue, n.JobID, w.Nodes[i].Status, w.Nodes[i].Attempts, n.Outcome, n.Left, n.Failed, n.Gen)
				}
			}
		}
		due, err := plumbing.Of(producer.q).OutboxDue(context.Background(), 100)
		t.Logf("outbox index: %v %v", due, err)
		has, err := plumbing.Of(producer.q).OutboxQueues(context.Background(), queues)
		t.Logf("outboxes with entries: %v %v", has, err)
		t.FailNow()
	}
	stopFaults()
	require.NoError(t, <-faulting)
	for _, h := range append(workers, releasers...) {
		require.NoError(t, ignoreHandBack(h.Stop(ctx)))
	}
	var all []NodeState
	for _, id := range ids {
		w, err := producer.Get(ctx, id)
		require.NoError(t, err)
		for _, nd := range w.Nodes {
			require.Equal(t, queue.StatusCompleted, nd.Status, "node %s of %s", nd.Name, id)
			all = append(all, nd)
		}
	}
	require.Len(t, all, total)
	require.Eventually(t, func() bool { // the last events on their way
		mu.Lock()
		defer mu.Unlock()
		return len(released) >= total
	}, 10*time.Second, time.Millisecond)
	cancel()
	<-counted
	for _, nd := range all {
		require.Equal(t, 1, released[nd.JobID], "node %s released once", nd.Name)
	}
	require.GreaterOrEqual(t, runs.Load(), int64(total))
}

// ignoreHandBack: a worker stopped with running jobs answers an error
// after handing them back, which is what the battery wants.
func ignoreHandBack(err error) error {
	if err != nil && !strings.Contains(err.Error(), "handed back") {
		return err
	}
	return nil
}
