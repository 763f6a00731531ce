package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
)

// contractEnqueue holds the contract of enqueue: what a job is once
// accepted, and what is refused.
func contractEnqueue(t *testing.T, setup setupFunc) {
	t.Run("EnqueueNowIsPendingAndClaimable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Kind: "email", Payload: json.RawMessage(`{"to":"a@example.com"}`)})
		require.Equal(t, queue.StatusPending, j.Status)
		require.Len(t, j.ID, names.IDLen)
		require.NoError(t, names.ValidateID(j.ID))
		got := b.claimOne(t)
		require.Equal(t, j.ID, got.ID)
		require.Equal(t, "email", got.Kind)
		require.JSONEq(t, `{"to":"a@example.com"}`, string(got.Payload))
		require.Equal(t, queue.StatusProcessing, got.Status)
		require.Equal(t, 1, got.Attempts)
		require.NotEmpty(t, got.Token)
		requireSoonAfter(t, b.clock.Now().Add(queue.DefaultVisibility), got.LeaseUntil)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, got.ID, got.Token, queue.CompleteOptions{Result: json.RawMessage(`{"ok":true}`)}))
		done := b.get(t, j.ID)
		require.Equal(t, queue.StatusCompleted, done.Status)
		require.JSONEq(t, `{"ok":true}`, string(done.Result))
		s := b.stats(t)
		require.Equal(t, int64(1), s.EnqueuedTotal)
		require.Equal(t, int64(1), s.CompletedTotal)
		require.Equal(t, int64(1), s.CompletedHistory)
		require.Zero(t, s.Pending+s.Processing+s.Scheduled)
	})

	t.Run("ConcurrentEnqueuesShareAScriptCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Kind: "warm-up"}) // the queue exists
		// The next enqueue script call waits at the gate, in flight; the
		// calls that arrive meanwhile wait for it, and then go together.
		gate, entered := make(chan struct{}), make(chan struct{}, 1)
		h := &enqueueHook{gate: gate, entered: entered}
		b.rdb.AddHook(h)
		first := make(chan error, 1)
		go func() {
			_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "first"})
			first <- err
		}()
		<-entered
		const n = 5
		type answer struct {
			e   queue.Enqueued
			err error
		}
		answers := make(chan answer, n)
		for i := range n {
			go func() {
				e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k" + strconv.Itoa(i),
					Payload: json.RawMessage(strconv.Itoa(i))})
				answers <- answer{e, err}
			}()
		}
		// An invalid job is refused at once, never joining a batch.
		_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "bad kind"})
		require.ErrorIs(t, err, queue.ErrInvalidKind)
		// A caller that gives up while its job waits takes it out.
		cctx, cancel := context.WithCancel(b.ctx)
		gaveUp := make(chan error, 1)
		go func() {
			_, err := b.client.Enqueue(cctx, queue.NewJob{Queue: b.queue, Kind: "gave-up"})
			gaveUp <- err
		}()
		require.Eventually(t, func() bool { return b.client.CoalesceWaiting(b.queue) == n+1 }, 10*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, <-gaveUp, context.Canceled)
		require.Equal(t, n, b.client.CoalesceWaiting(b.queue))
		close(gate)
		require.NoError(t, <-first)
		ids := map[string]bool{}
		for range n {
			a := <-answers
			require.NoError(t, a.err)
			require.False(t, a.e.Replayed)
			require.Equal(t, queue.StatusPending, a.e.Job.Status)
			got := b.get(t, a.e.Job.ID)
			require.Equal(t, a.e.Job.Kind, got.Kind, "each call is answered its own job")
			require.Equal(t, "k"+string(got.Payload), got.Kind)
			ids[a.e.Job.ID] = true
		}
		require.Len(t, ids, n)
		require.Equal(t, []int{1, n}, h.batches(), "the first call alone, then the %d that waited, together", n)
		require.Equal(t, int64(2+n), b.stats(t).EnqueuedTotal, "the warm-up, the first and the %d; not the one given up", n)
	})

	t.Run("CoalescedEnqueuesKeepIdempotency", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Kind: "warm-up"})
		gate, entered := make(chan struct{}), make(chan struct{}, 1)
		h := &enqueueHook{gate: gate, entered: entered}
		b.rdb.AddHook(h)
		go func() { _, _ = b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "first"}) }()
		<-entered
		answers := make(chan queue.Enqueued, 2)
		for range 2 {
			go func() {
				e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", IdempotencyKey: "same"})
				assert.NoError(t, err)
				answers <- e
			}()
		}
		require.Eventually(t, func() bool { return b.client.CoalesceWaiting(b.queue) == 2 }, 10*time.Second, time.Millisecond)
		close(gate)
		a, c := <-answers, <-answers
		require.Equal(t, a.Job.ID, c.Job.ID, "one job for the key, even within one script call")
		require.True(t, a.Replayed != c.Replayed, "the second of the batch is answered the first")
		require.Equal(t, []int{1, 2}, h.batches())
	})

	t.Run("ImmediateJobIsPendingWhateverTheSubMillisecond", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.clock.Advance(700 * time.Microsecond) // real clocks are rarely on a whole millisecond
		j := b.enqueue(t, queue.NewJob{})
		require.Equal(t, queue.StatusPending, j.Status)
		j2 := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now()})
		require.Equal(t, queue.StatusPending, j2.Status)
		require.Equal(t, int64(2), b.stats(t).Pending)
		// Due 0.1 ms from now, in this same millisecond: scheduled.
		j3 := b.enqueue(t, queue.NewJob{Delay: 100 * time.Microsecond})
		require.Equal(t, queue.StatusScheduled, j3.Status)
		requireSoonAfter(t, b.clock.Now().Truncate(time.Millisecond), j3.RunAt)
		require.Equal(t, int64(1), b.stats(t).Scheduled)
	})

	t.Run("PastRunAtMeansNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(-time.Hour)})
		require.Equal(t, queue.StatusPending, j.Status)
		require.Equal(t, j.ID, b.claimOne(t).ID)
	})

	t.Run("DecodeRecordReadsWhatGetReads", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bo := queue.Backoff{Initial: 3 * time.Second, Factor: 1.5, Max: time.Hour, Jitter: 0.1}
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 7, Visibility: 45 * time.Second, Backoff: &bo})
		claimed := b.claimOne(t)
		rec, err := b.rdb.HGet(b.ctx, b.key(queue.KeyJobs), j.ID).Result()
		require.NoError(t, err)
		payload := b.rdb.HGet(b.ctx, b.key(queue.KeyData), j.ID).Val() // "": a small payload is in the record
		got, err := queue.DecodeRecord(b.queue, j.ID, rec, payload, "")
		require.NoError(t, err)
		require.Equal(t, claimed.Token, got.Token, "the claim's token, which Get leaves out")
		got.Token = ""
		require.Equal(t, b.get(t, j.ID), got)
		require.Equal(t, 7, got.MaxAttempts)
		require.Equal(t, 1, got.Attempts)
		require.Equal(t, int64(1), got.Fence)
		require.Equal(t, 45*time.Second, got.Visibility)
		require.Equal(t, bo, got.Backoff)
		_, err = queue.DecodeRecord(b.queue, j.ID, "", "", "")
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = queue.DecodeRecord(b.queue, j.ID, "-c1.1", "", "")
		require.ErrorIs(t, err, queue.ErrNotFound, "a tombstone is no job")
		_, err = queue.DecodeRecord(b.queue, j.ID, strings.Replace(rec, "|", "x", 1), "", "")
		require.ErrorContains(t, err, "malformed spec")
	})

	t.Run("BatchEnqueueAcrossQueuesValidatedAsAWhole", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.EnqueueBatch(b.ctx, []queue.NewJob{
			{Queue: "qa", Kind: "k"}, {Queue: "qb", Kind: "k"}, {Queue: "Bad{Name}", Kind: "k"}})
		var fe *queue.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, 2, fe.Index)
		require.Equal(t, "queue", fe.Field)
		qs, err := b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Empty(t, qs, "nothing was enqueued")

		jobs := make([]queue.NewJob, 0, 1000)
		for i := range 1000 {
			jobs = append(jobs, queue.NewJob{Queue: []string{"qa", "qb", "qc"}[i%3], Kind: "k", Delay: time.Duration(i%2) * time.Second})
		}
		out, err := b.client.EnqueueBatch(b.ctx, jobs)
		require.NoError(t, err)
		require.Len(t, out, 1000)
		seen := map[string]bool{}
		for _, e := range out {
			require.False(t, seen[e.Job.ID])
			seen[e.Job.ID] = true
		}
		qs, err = b.client.Queues(b.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"qa", "qb", "qc"}, qs)
		var total int64
		for _, q := range qs {
			s, err := b.client.Stats(b.ctx, q)
			require.NoError(t, err)
			total += s.Pending + s.Scheduled
		}
		require.Equal(t, int64(1000), total)
		_, err = b.client.EnqueueBatch(b.ctx, make([]queue.NewJob, 1001))
		require.ErrorIs(t, err, queue.ErrInvalid)
	})

	t.Run("BadInputIsANamedError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.MaxPayloadBytes = 64 })
		cases := []struct {
			field string
			nj    queue.NewJob
			is    error
		}{
			{"queue", queue.NewJob{Queue: "A", Kind: "k"}, queue.ErrInvalidQueue},
			{"kind", queue.NewJob{Kind: ""}, queue.ErrInvalidKind},
			{"payload", queue.NewJob{Kind: "k", Payload: json.RawMessage(`{"a":`)}, queue.ErrInvalid},
			{"payload", queue.NewJob{Kind: "k", Payload: json.RawMessage(`"` + string(make([]byte, 70)) + `"`)}, queue.ErrPayloadTooLarge},
			{"delay", queue.NewJob{Kind: "k", Delay: -time.Second}, queue.ErrInvalid},
			{"delay", queue.NewJob{Kind: "k", Delay: time.Second, RunAt: time.Now()}, queue.ErrInvalid},
			{"max_attempts", queue.NewJob{Kind: "k", MaxAttempts: -1}, queue.ErrInvalid},
			{"max_attempts", queue.NewJob{Kind: "k", MaxAttempts: 1001}, queue.ErrInvalid},
			{"backoff", queue.NewJob{Kind: "k", Backoff: &queue.Backoff{Initial: time.Second, Factor: 0.5, Max: time.Minute}}, queue.ErrInvalidBackoff},
			{"visibility", queue.NewJob{Kind: "k", Visibility: time.Millisecond}, queue.ErrInvalid},
			{"result_ttl", queue.NewJob{Kind: "k", ResultTTL: -time.Second}, queue.ErrInvalid},
			{"idempotency_key", queue.NewJob{Kind: "k", IdempotencyKey: "a\nb"}, queue.ErrInvalid},
		}
		for _, tc := range cases {
			_, err := b.client.Enqueue(b.ctx, tc.nj)
			var fe *queue.FieldError
			require.ErrorAs(t, err, &fe, tc.field)
			require.Equal(t, tc.field, fe.Field)
			require.ErrorIs(t, err, tc.is, tc.field)
		}
		_, err := b.client.Claim(b.ctx, "no{tag}", queue.ClaimOptions{})
		require.ErrorIs(t, err, queue.ErrInvalidQueue)
		_, err = b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 1001})
		require.ErrorIs(t, err, queue.ErrInvalid)
		_, err = b.client.Get(b.ctx, b.queue, "../x")
		require.ErrorIs(t, err, queue.ErrInvalidID)
	})

	t.Run("TooManyQueues", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.MaxQueues = 2 })
		b.enqueue(t, queue.NewJob{Queue: "a"})
		b.enqueue(t, queue.NewJob{Queue: "b"})
		b.enqueue(t, queue.NewJob{Queue: "a"})
		_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "c", Kind: "k"})
		require.ErrorIs(t, err, queue.ErrTooManyQueues)
		// A batch refused for one of its queues enqueues nothing at all.
		_, err = b.client.EnqueueBatch(b.ctx, []queue.NewJob{{Queue: "a", Kind: "k"}, {Queue: "c", Kind: "k"}})
		require.ErrorIs(t, err, queue.ErrTooManyQueues)
		s, err := b.client.Stats(b.ctx, "a")
		require.NoError(t, err)
		require.Equal(t, int64(2), s.EnqueuedTotal)
	})
}

// enqueueHook holds the first enqueue script call it sees at gate (telling
// entered), and notes how many jobs each enqueue call carried.
type enqueueHook struct {
	gate    chan struct{}
	entered chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (h *enqueueHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *enqueueHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *enqueueHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if name, _ := store.ScriptCalled(fmt.Sprint(args[0]), fmt.Sprint(args[1])); len(args) > 3 && name == "enqueue" {
			keys, _ := args[2].(int)
			n, _ := strconv.Atoi(fmt.Sprint(args[3+keys+8])) // ARGV[9]: the jobs (specEnqueue)
			h.mu.Lock()
			h.sizes = append(h.sizes, n)
			firstCall := len(h.sizes) == 1
			h.mu.Unlock()
			if firstCall {
				h.entered <- struct{}{}
				<-h.gate
			}
		}
		return next(ctx, cmd)
	}
}

func (h *enqueueHook) batches() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sizes)
}
