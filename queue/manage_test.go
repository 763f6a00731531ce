package queue_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Job management (manage.go), run against one redis-server and against a
// 3-master Redis Cluster like the contract suite.

func TestManageSingle(t *testing.T) {
	t.Parallel()
	runManage(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestManageCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runManage(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

// pageAll reads every page of status with limit, calling between (when set)
// after each page, and answers the ids in the order read. It fails the test
// when a page is larger than limit or paging does not end.
func (b *testBundle) pageAll(t *testing.T, status queue.Status, limit int, between func(page []*queue.Job)) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 100_000 {
		jobs, next, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: status, Limit: limit, Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(jobs), limit)
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if between != nil {
			between(jobs)
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
	t.Fatal("paging did not end")
	return nil
}

// enqueueMany enqueues n jobs in batches; mk builds job i.
func (b *testBundle) enqueueMany(t *testing.T, n int, mk func(i int) queue.NewJob) []*queue.Job {
	t.Helper()
	out := make([]*queue.Job, 0, n)
	batch := make([]queue.NewJob, 0, queue.MaxBatch)
	flush := func() {
		res, err := b.client.EnqueueBatch(b.ctx, batch)
		require.NoError(t, err)
		for _, e := range res {
			out = append(out, e.Job)
		}
		batch = batch[:0]
	}
	for i := range n {
		nj := mk(i)
		nj.Queue, nj.Kind = b.queue, cmpOr(nj.Kind, "k")
		batch = append(batch, nj)
		if len(batch) == queue.MaxBatch {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// writeDead writes n dead jobs straight into Redis, in the hash layout of
// the scripts (much faster than enqueue, claim and fail each): ids
// "<prefix>000000"..., died at diedAt(i), of kind kind(i).
func writeDead(t *testing.T, ctx context.Context, c *queue.Client, rdb redis.UniversalClient, ns, q, prefix string, n int, kind func(int) string, diedAt func(int) int64) []string {
	t.Helper()
	_, err := c.RunScript(ctx, "create", q)
	require.NoError(t, err)
	ids := make([]string, n)
	bo := queue.DefaultBackoff.Encode()
	const vis = 30 * time.Second
	for start := 0; start < n; start += 2000 {
		pipe := rdb.Pipeline()
		for i := start; i < min(start+2000, n); i++ {
			id := fmt.Sprintf("%s%06d", prefix, i)
			ids[i] = id
			at := diedAt(i)
			pipe.HSet(ctx, queue.QueueKey(ns, q, queue.KeyJobs), id, queue.DeadRecord(kind(i), 3, queue.EncodeSpec(3, vis, bo), at-1000, at))
			pipe.HSet(ctx, queue.QueueKey(ns, q, queue.KeyData), id, "{}")
			pipe.ZAdd(ctx, queue.QueueKey(ns, q, queue.KeyDead), redis.Z{Score: float64(at), Member: id})
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
	}
	return ids
}

// requireEachOnce checks that ids holds no repeat and every id of want.
func requireEachOnce(t *testing.T, ids []string, want []string) {
	t.Helper()
	seen := make(map[string]int, len(ids))
	for _, id := range ids {
		seen[id]++
		require.Equal(t, 1, seen[id], "job %s listed twice", id)
	}
	for _, id := range want {
		require.Equal(t, 1, seen[id], "job %s missed", id)
	}
}

func runManage(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	setup := setupOn(newRDB)
	quiet := func(c *queue.Config) { c.DisableEvents = true }

	t.Run("ListScheduled10000PagesSoonestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, quiet)
		// 50 distinct run-ats: 200 jobs share each, so pages end inside ties.
		jobs := b.enqueueMany(t, 10_000, func(i int) queue.NewJob {
			return queue.NewJob{Delay: time.Duration(1+(i*7)%50) * time.Second}
		})
		want := make([]string, len(jobs))
		runAt := map[string]time.Time{}
		for i, j := range jobs {
			want[i] = j.ID
			runAt[j.ID] = j.RunAt
		}
		for _, limit := range []int{333, 1000} {
			ids := b.pageAll(t, queue.StatusScheduled, limit, nil)
			require.Len(t, ids, 10_000)
			requireEachOnce(t, ids, want)
			for i := 1; i < len(ids); i++ {
				require.False(t, runAt[ids[i]].Before(runAt[ids[i-1]]), "soonest first")
			}
		}
	})

	t.Run("ListScheduledWhileJobsComeAndGo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, quiet)
		jobs := b.enqueueMany(t, 10_000, func(i int) queue.NewJob {
			return queue.NewJob{Delay: time.Duration(1+(i*7)%50) * time.Second}
		})
		gone := map[string]bool{}
		n := 0
		ids := b.pageAll(t, queue.StatusScheduled, 250, func(page []*queue.Job) {
			if len(page) == 0 {
				return
			}
			n++
			// The cursor's own job leaves, another job leaves, and new jobs
			// arrive both before the cursor and after it.
			last := page[len(page)-1]
			other := jobs[(n*389)%len(jobs)]
			for _, id := range []string{last.ID, other.ID} {
				if !gone[id] {
					_, err := b.client.Cancel(b.ctx, b.queue, id)
					require.NoError(t, err)
					gone[id] = true
				}
			}
			b.enqueue(t, queue.NewJob{Delay: 500 * time.Millisecond})
			b.enqueue(t, queue.NewJob{Delay: time.Hour})
		})
		var stayed []string
		for _, j := range jobs {
			if !gone[j.ID] {
				stayed = append(stayed, j.ID)
			}
		}
		require.Greater(t, n, 39)
		requireEachOnce(t, ids, stayed)
	})

	t.Run("ListDead10000PagesNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, quiet)
		base := b.clock.Now().UnixMilli()
		// 7 jobs die in each millisecond: ties again.
		ids := writeDead(t, b.ctx, b.client, b.rdb, b.ns, b.queue, "d", 10_000, func(int) string { return "k" }, func(i int) int64 { return base - int64(i/7) })
		got := b.pageAll(t, queue.StatusDead, 128, nil)
		require.Len(t, got, 10_000)
		requireEachOnce(t, got, ids)
		index := make(map[string]int, len(ids))
		for i, id := range ids {
			index[id] = i
		}
		want := slices.Clone(ids)
		slices.SortFunc(want, func(x, y string) int {
			ix, iy := index[x], index[y]
			if ix/7 != iy/7 {
				return ix/7 - iy/7 // a smaller i died later
			}
			return strings.Compare(y, x) // equal died-at: by id, descending
		})
		require.Equal(t, want, got)

		// The cursor's job purged between pages: nothing missed.
		var cut []string
		got = b.pageAll(t, queue.StatusDead, 100, func(page []*queue.Job) {
			if len(page) > 0 {
				last := page[len(page)-1].ID
				_, err := b.client.Cancel(b.ctx, b.queue, last)
				require.NoError(t, err)
				cut = append(cut, last)
			}
		})
		require.Len(t, got, 10_000)
		requireEachOnce(t, got, ids)
		require.Len(t, cut, 100)
	})

	t.Run("ListPending10000WhileClaimed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, quiet)
		jobs := b.enqueueMany(t, 10_000, func(int) queue.NewJob { return queue.NewJob{} })
		// Without change: the order of claims.
		ids := b.pageAll(t, queue.StatusPending, 300, nil)
		want := make([]string, len(jobs))
		for i, j := range jobs {
			want[i] = j.ID
		}
		require.Equal(t, want, ids, "next to be claimed first")

		// Workers claim from the head and producers add at the tail while
		// an operator pages: 100 claims a page, faster than 50-job pages,
		// so the cursor's job is claimed each time.
		claimed := map[string]bool{}
		for _, limit := range []int{250, 50} {
			ids = b.pageAll(t, queue.StatusPending, limit, func([]*queue.Job) {
				got, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 100})
				require.NoError(t, err)
				for _, j := range got {
					claimed[j.ID] = true
				}
				b.enqueue(t, queue.NewJob{})
			})
			var stayed []string
			for _, j := range jobs {
				if !claimed[j.ID] {
					stayed = append(stayed, j.ID)
				}
			}
			requireEachOnce(t, ids, stayed)
		}
	})

	t.Run("ListProcessingAndCompleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var claims []*queue.Job
		for range 5 {
			b.enqueue(t, queue.NewJob{})
			claims = append(claims, b.claimOne(t))
			b.clock.Advance(time.Second)
		}
		ids := b.pageAll(t, queue.StatusProcessing, 2, nil)
		require.Equal(t, []string{claims[0].ID, claims[1].ID, claims[2].ID, claims[3].ID, claims[4].ID}, ids, "longest claimed first")
		for _, c := range claims[:3] {
			require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		}
		ids = b.pageAll(t, queue.StatusCompleted, 2, nil)
		require.Equal(t, []string{claims[2].ID, claims[1].ID, claims[0].ID}, ids, "newest first")
		jobs, next, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusProcessing})
		require.NoError(t, err)
		require.Empty(t, next)
		require.Len(t, jobs, 2)
		require.Equal(t, queue.StatusProcessing, jobs[0].Status)
		// An empty queue lists nothing, and the first page is the only one.
		jobs, next, err = b.client.List(b.ctx, "empty", queue.ListOptions{Status: queue.StatusDead})
		require.NoError(t, err)
		require.Empty(t, jobs)
		require.Empty(t, next)
	})

	t.Run("ListBadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			b.enqueue(t, queue.NewJob{Delay: time.Minute})
		}
		_, next, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusScheduled, Limit: 1})
		require.NoError(t, err)
		require.NotEmpty(t, next)
		cases := []queue.ListOptions{
			{Status: queue.StatusCanceled},
			{Status: "nope"},
			{Status: queue.StatusScheduled, Limit: 1001},
			{Status: queue.StatusScheduled, Limit: -1},
			{Status: queue.StatusScheduled, Cursor: "!!"},
			{Status: queue.StatusPending, Cursor: next}, // a cursor of another listing
		}
		for _, o := range cases {
			_, _, err := b.client.List(b.ctx, b.queue, o)
			require.ErrorIs(t, err, queue.ErrInvalid, "%+v", o)
		}
	})

	t.Run("CancelScheduledAndPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.Retention = 10 * time.Minute })
		s := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		p := b.enqueue(t, queue.NewJob{})
		for _, j := range []*queue.Job{s, p} {
			got, err := b.client.Cancel(b.ctx, b.queue, j.ID)
			require.NoError(t, err)
			require.Equal(t, queue.StatusCanceled, got.Status)
			require.Equal(t, j.ID, got.ID)
			require.Equal(t, queue.StatusCanceled, b.get(t, j.ID).Status)
			ttl := b.expiresIn(t, j.ID)
			require.InDelta(t, (10 * time.Minute).Seconds(), ttl.Seconds(), 5, "kept for the retention")
		}
		st := b.stats(t)
		require.Zero(t, st.Scheduled+st.Pending)
		b.clock.Advance(time.Hour)
		moved, _, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Zero(t, moved)
		b.claimNone(t)
		_, err = b.client.Cancel(b.ctx, b.queue, "nosuchjob")
		require.ErrorIs(t, err, queue.ErrNotFound)
	})

	t.Run("CancelProcessingRequestsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		got, err := b.client.Cancel(b.ctx, b.queue, c.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusProcessing, got.Status)
		require.True(t, got.CancelRequested)
		l, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{})
		require.NoError(t, err)
		require.True(t, l.CancelRequested)
		require.ErrorIs(t, b.client.CancelClaimed(b.ctx, b.queue, c.ID, "stale"), queue.ErrLeaseLost)
		require.NoError(t, b.client.CancelClaimed(b.ctx, b.queue, c.ID, c.Token))
		require.NoError(t, b.client.CancelClaimed(b.ctx, b.queue, c.ID, c.Token), "a repeat answers as the first")
		j := b.get(t, c.ID)
		require.Equal(t, queue.StatusCanceled, j.Status)
		require.False(t, j.CancelRequested)
		require.Zero(t, b.stats(t).Processing)
		ids, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Empty(t, ids)
		require.ErrorIs(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}), queue.ErrLeaseLost)
	})

	t.Run("CancelFinishedDeletesIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		done := b.enqueue(t, queue.NewJob{IdempotencyKey: "once"})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		dead := b.enqueue(t, queue.NewJob{})
		c = b.claimOne(t)
		_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
		require.NoError(t, err)
		canceled := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		_, err = b.client.Cancel(b.ctx, b.queue, canceled.ID)
		require.NoError(t, err)

		for _, tc := range []struct {
			id     string
			status queue.Status
		}{{done.ID, queue.StatusCompleted}, {dead.ID, queue.StatusDead}, {canceled.ID, queue.StatusCanceled}} {
			got, err := b.client.Cancel(b.ctx, b.queue, tc.id)
			require.NoError(t, err)
			require.Equal(t, tc.status, got.Status, "answered as it was")
			_, err = b.client.Get(b.ctx, b.queue, tc.id)
			require.ErrorIs(t, err, queue.ErrNotFound)
		}
		s := b.stats(t)
		require.Zero(t, s.Dead)
		require.Zero(t, s.CompletedHistory)
		// The idempotency record went with it.
		e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", IdempotencyKey: "once"})
		require.NoError(t, err)
		require.False(t, e.Replayed)
	})

	t.Run("CancelRetriedAnswersTheSame", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		args := []any{j.ID, "req-1", 60000, "", 60000}
		r1, err := b.client.RunScript(b.ctx, "cancel", b.queue, args...)
		require.NoError(t, err)
		r2, err := b.client.RunScript(b.ctx, "cancel", b.queue, args...)
		require.NoError(t, err)
		require.Equal(t, int64(1), r1.([]any)[0])
		require.Equal(t, int64(2), r2.([]any)[0], "the retry is not taken for a delete")
		require.Equal(t, queue.StatusCanceled, b.get(t, j.ID).Status)
	})

	t.Run("Reschedule", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(b.ctx)
		defer cancel()
		nudges := b.client.Source().Nudges(ctx)
		a := b.enqueue(t, queue.NewJob{Delay: time.Minute})
		<-nudges
		later := b.enqueue(t, queue.NewJob{Delay: 2 * time.Minute})

		// Earlier than the head: it becomes the head, and promoters hear it.
		at := b.clock.Now().Add(10*time.Second + 300*time.Microsecond)
		got, err := b.client.Reschedule(b.ctx, b.queue, later.ID, at)
		require.NoError(t, err)
		require.Equal(t, later.ID, got.ID)
		require.Equal(t, queue.StatusScheduled, got.Status)
		require.Equal(t, b.clock.Now().Add(10*time.Second), got.RunAt, "its millisecond")
		next, err := b.client.Stats(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, at, next.NextRunAt, "the schedule keeps the microseconds")
		n := <-nudges
		require.Equal(t, got.RunAt, n.At)

		// Due: to pending, claimable now.
		got, err = b.client.Reschedule(b.ctx, b.queue, a.ID, b.clock.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Equal(t, queue.StatusPending, got.Status)
		requireSoonAfter(t, b.clock.Now(), got.RunAt)
		c := b.claimOne(t)
		require.Equal(t, a.ID, c.ID)

		// Pending to later: scheduled, not claimable.
		p := b.enqueue(t, queue.NewJob{})
		got, err = b.client.Reschedule(b.ctx, b.queue, p.ID, b.clock.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, queue.StatusScheduled, got.Status)
		b.claimNone(t)

		_, err = b.client.Reschedule(b.ctx, b.queue, c.ID, b.clock.Now().Add(time.Minute))
		require.ErrorIs(t, err, queue.ErrConflict, "processing")
		_, err = b.client.Reschedule(b.ctx, b.queue, "nosuchjob", b.clock.Now())
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = b.client.Reschedule(b.ctx, b.queue, p.ID, time.Time{})
		require.ErrorIs(t, err, queue.ErrInvalid)
		s := b.stats(t)
		require.Equal(t, int64(2), s.Scheduled)
		require.Equal(t, int64(1), s.Processing)
	})

	t.Run("RunNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.enqueue(t, queue.NewJob{Delay: time.Hour})
		got, err := b.client.RunNow(b.ctx, b.queue, s.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusPending, got.Status)
		requireSoonAfter(t, b.clock.Now(), got.RunAt)
		again, err := b.client.RunNow(b.ctx, b.queue, s.ID)
		require.NoError(t, err, "pending already: nothing to do")
		require.Equal(t, queue.StatusPending, again.Status)
		require.Equal(t, s.ID, b.claimOne(t).ID)

		// A dead job starts afresh: attempts back to 0, last error kept.
		d := b.enqueue(t, queue.NewJob{MaxAttempts: 2})
		for range 2 {
			c := b.claimOne(t)
			_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "boom", RetryAt: b.clock.Now()})
			require.NoError(t, err)
		}
		require.Equal(t, queue.StatusDead, b.get(t, d.ID).Status)
		got, err = b.client.RunNow(b.ctx, b.queue, d.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusPending, got.Status)
		require.Zero(t, got.Attempts)
		require.True(t, got.DiedAt.IsZero())
		require.Equal(t, "boom", got.LastError)
		c := b.claimOne(t)
		require.Equal(t, d.ID, c.ID)
		require.Equal(t, 1, c.Attempts)
		res, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "again"})
		require.NoError(t, err)
		require.Equal(t, queue.StatusScheduled, res.Status, "a fresh budget of attempts")
		require.Zero(t, b.stats(t).Dead)

		_, err = b.client.RunNow(b.ctx, b.queue, c.ID)
		require.NoError(t, err, "scheduled retry runs now")
		c = b.claimOne(t)
		_, err = b.client.RunNow(b.ctx, b.queue, c.ID)
		require.ErrorIs(t, err, queue.ErrConflict, "processing")
		_, err = b.client.RunNow(b.ctx, b.queue, "nosuchjob")
		require.ErrorIs(t, err, queue.ErrNotFound)
	})

	t.Run("RequeueAndPurgeDeadByKind", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		kinds := map[string]string{}
		for i := range 9 {
			kind := []string{"a", "b", "c"}[i%3]
			j := b.enqueue(t, queue.NewJob{Kind: kind, IdempotencyKey: fmt.Sprint("k", i)})
			c := b.claimOne(t)
			_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
			require.NoError(t, err)
			kinds[j.ID] = kind
			b.clock.Advance(time.Second) // apart by more than Redis's clock runs ahead of the fake one
		}
		n, err := b.client.RequeueDead(b.ctx, b.queue, "a")
		require.NoError(t, err)
		require.Equal(t, 3, n)
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, jobs, 3)
		for _, j := range jobs {
			require.Equal(t, "a", j.Kind)
			require.Equal(t, 1, j.Attempts)
		}
		n, err = b.client.PurgeDead(b.ctx, b.queue, "b")
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Equal(t, int64(3), b.stats(t).Dead)
		n, err = b.client.PurgeDead(b.ctx, b.queue, "")
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Zero(t, b.stats(t).Dead)
		for id, kind := range kinds {
			_, err := b.client.Get(b.ctx, b.queue, id)
			if kind == "a" {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, queue.ErrNotFound)
			}
		}
		e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "b", IdempotencyKey: "k1"})
		require.NoError(t, err)
		require.False(t, e.Replayed, "purged with its idempotency record")
		_, err = b.client.PurgeDead(b.ctx, b.queue, "bad kind")
		require.ErrorIs(t, err, queue.ErrInvalidKind)
	})

	// A push job is stored as kind chronoq.push, the kind it was given in
	// its envelope payload: the dead set's kind filter reads that kind, as
	// reads and lists show it, whether the payload is kept in the record
	// (short) or in the data hash (long). A push payload that names no
	// kind, or is no envelope, is filtered by the stored kind.
	t.Run("DeadKindFilterReadsPushEnvelopes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		long := strings.Repeat("x", 400)
		payloads := []string{
			`{"kind":"mail","body":{}}`,                      // inline
			`{"kind":"mail","body":{"text":"` + long + `"}}`, // in the data hash
			`{"kind":"sms","body":{}}`,
			`{"body":{}}`,
		}
		for i, p := range payloads {
			b.enqueue(t, queue.NewJob{Kind: "chronoq.push", Payload: []byte(p), IdempotencyKey: fmt.Sprint("p", i)})
			c := b.claimOne(t)
			_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
			require.NoError(t, err)
			b.clock.Advance(time.Second)
		}
		n, err := b.client.RequeueDead(b.ctx, b.queue, "mail")
		require.NoError(t, err)
		require.Equal(t, 2, n, "both mail jobs, inline and not")
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, jobs, 2)
		for _, j := range jobs {
			require.Contains(t, string(j.Payload), `"kind":"mail"`)
		}
		n, err = b.client.PurgeDead(b.ctx, b.queue, "sms")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = b.client.PurgeDead(b.ctx, b.queue, "chronoq.push")
		require.NoError(t, err)
		require.Equal(t, 1, n, "the envelope that names no kind")
		require.Zero(t, b.stats(t).Dead)
	})

	t.Run("WaitPendingPeeksWithoutClaiming", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := time.Now()
		ok, err := plumbing.Of(b.client).WaitPending(b.ctx, b.queue, 100*time.Millisecond)
		require.NoError(t, err)
		require.False(t, ok)
		require.Less(t, time.Since(start), 900*time.Millisecond, "a sub-second wait is not rounded up to 1 s")

		for range 3 {
			b.enqueue(t, queue.NewJob{})
		}
		before := b.rdb.LRange(b.ctx, b.key(queue.KeyPending), 0, -1).Val()
		ok, err = plumbing.Of(b.client).WaitPending(b.ctx, b.queue, time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, before, b.rdb.LRange(b.ctx, b.key(queue.KeyPending), 0, -1).Val(), "the list is left as it was")

		// A job arriving while it waits wakes it.
		testutil.NeedRedisServer(t, "CLIENT LIST (to see the waiter wait)")
		other := "q2"
		res := make(chan bool, 1)
		go func() {
			ok, _ := plumbing.Of(b.client).WaitPending(b.ctx, other, 10*time.Second)
			res <- ok
		}()
		node := b.rdb
		if cc, ok := b.rdb.(*redis.ClusterClient); ok {
			n, err := cc.MasterForKey(b.ctx, b.ns+":{"+other+"}:pending")
			require.NoError(t, err)
			node = n
		}
		require.Eventually(t, func() bool {
			cl, err := node.ClientList(b.ctx).Result()
			return err == nil && containsCmd(cl, "xread")
		}, 10*time.Second, 5*time.Millisecond)
		b.enqueue(t, queue.NewJob{Queue: other})
		require.True(t, <-res)

		// Paused: waits on the clock, and says no.
		require.NoError(t, b.client.Pause(b.ctx, b.queue))
		go func() {
			ok, _ := plumbing.Of(b.client).WaitPending(b.ctx, b.queue, 5*time.Second)
			res <- ok
		}()
		require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
		b.clock.Advance(5 * time.Second)
		require.False(t, <-res)
	})
}

// TestDeadSweepsAreBounded requeues and purges 50,000 dead jobs and checks
// that no script call ran 10 ms or more, in Redis's own SLOWLOG, on a
// dedicated server so that the log holds nothing else.
//
// SLOWLOG measures wall time: a redis-server preempted on an oversubscribed
// machine logs the wait as the command's own. The test therefore does not
// run in parallel with the rest of this binary, it also checks the bound
// deterministically (the number of script calls, from INFO commandstats,
// shows that each one handled at most 50 jobs), and a sweep whose log shows
// a slow call is measured once more on fresh jobs: an unbounded script is
// slow every time, a preemption is not.
func TestDeadSweepsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("50,000 jobs: skipped in -short mode")
	}
	srv := testutil.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	t.Cleanup(cancel)
	clock := testutil.FakeClock()
	ns := testutil.Namespace(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, Clock: clock, FollowClock: true, DeadMaxJobs: 100_000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	const n, q = 50_000, "big"
	base := clock.Now().UnixMilli()
	kind := func(i int) string { return []string{"a", "b"}[i%2] }
	died := func(i int) int64 { return base - int64(i/3) }
	// Log every command of 1 ms or more (the commands a script calls are
	// logged too), so the longest script call is known.
	require.NoError(t, rdb.ConfigSet(ctx, "slowlog-log-slower-than", "1000").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "slowlog-max-len", "10000").Err())

	// measure runs sweep after a reset of SLOWLOG and of the command
	// statistics, and answers the script calls made, those logged, and the
	// longest logged.
	measure := func(t *testing.T, sweep func()) (calls, logged int, worst time.Duration) {
		t.Helper()
		require.NoError(t, rdb.SlowLogReset(ctx).Err())
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		sweep()
		logs, err := rdb.SlowLogGet(ctx, 10_000).Result()
		require.NoError(t, err)
		for _, l := range logs {
			if _, ok := store.ScriptCalled(l.Args...); ok {
				logged++
				worst = max(worst, l.Duration)
			}
		}
		stats := commandStats(t, ctx, rdb)
		calls = int(stats["eval"].calls + stats["evalsha"].calls + stats["fcall"].calls)
		return calls, logged, worst
	}
	check := func(t *testing.T, name string, fill func(), sweep func(), minCalls int) {
		t.Helper()
		fill()
		calls, logged, worst := measure(t, sweep)
		// The bound is the number of jobs a call takes, which the count of
		// calls proves; how long a call ran depends on the machine's load,
		// so it is logged, not asserted (make bench-bounded measures it).
		t.Logf("%s: %d script calls, %d of them 1 ms or more, the longest %s", name, calls, logged, worst)
		require.GreaterOrEqual(t, calls, minCalls, "at most 50 jobs per script call")
	}

	var ids []string
	round := 0
	fill := func() {
		round++
		ids = writeDead(t, ctx, c, rdb, ns, q, fmt.Sprintf("r%d_", round), n, kind, died)
	}
	check(t, "requeue", fill, func() {
		got, err := c.RequeueDead(ctx, q, "")
		require.NoError(t, err)
		require.Equal(t, n, got)
		require.Equal(t, int64(1), rdb.ZCard(ctx, queue.QueueKey(ns, q, queue.KeyDead)).Val(), "the sentinel only")
		last, err := c.Get(ctx, q, ids[n-1])
		require.NoError(t, err)
		require.Zero(t, last.Attempts)
		first, err := c.Get(ctx, q, ids[0])
		require.NoError(t, err)
		require.Equal(t, queue.StatusPending, first.Status)
	}, n/50)
	require.GreaterOrEqual(t, rdb.LLen(ctx, queue.QueueKey(ns, q, queue.KeyPending)).Val(), int64(n))

	// Purge by kind examines every entry but deletes only half.
	check(t, "purge", fill, func() {
		got, err := c.PurgeDead(ctx, q, "a")
		require.NoError(t, err)
		require.Equal(t, n/2, got)
		got, err = c.PurgeDead(ctx, q, "")
		require.NoError(t, err)
		require.Equal(t, n/2, got)
		require.Equal(t, int64(1), rdb.ZCard(ctx, queue.QueueKey(ns, q, queue.KeyDead)).Val(), "the sentinel only")
		for _, id := range []string{ids[0], ids[n/2], ids[n-1]} {
			_, err := c.Get(ctx, q, id)
			require.ErrorIs(t, err, queue.ErrNotFound)
		}
	}, n/50+n/2/50)
}
