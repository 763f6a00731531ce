package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Several jobs enqueued with depends_on naming one existing job: each is
// an implicit workflow watching it (the job's watchers), on single Redis
// and on a Cluster, where the parent's queue and each workflow's hash
// sit in different slots.
func TestDependentsSingle(t *testing.T) {
	t.Parallel()
	runDependents(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestDependentsCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runDependents(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

// after enqueues a job in queue q that depends on parents.
func (e *env) after(ctx context.Context, q string, parents ...*queue.Job) *queue.Job {
	e.t.Helper()
	refs := make([]queue.JobRef, len(parents))
	for i, p := range parents {
		refs[i] = queue.JobRef{Queue: p.Queue, ID: p.ID}
	}
	j, err := e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: q, Kind: "after", MaxAttempts: 1}, refs, "")
	require.NoError(e.t, err)
	require.Equal(e.t, queue.StatusWaiting, j.Status)
	return j
}

// parent enqueues a job in queue q for others to depend on.
func (e *env) parent(ctx context.Context, q string) *queue.Job {
	e.t.Helper()
	en, err := e.q.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k", MaxAttempts: 1})
	require.NoError(e.t, err)
	return en.Job
}

// complete completes job j with the result runAll gives: {"id": <its id>}.
func (e *env) complete(ctx context.Context, j *queue.Job) {
	e.t.Helper()
	require.NoError(e.t, e.q.Complete(ctx, j.Queue, j.ID, j.Token, queue.CompleteOptions{Result: json.RawMessage(fmt.Sprintf(`{"id":%q}`, j.ID))}))
}

// requireStatus answers workflow id, which must have status want.
func (e *env) requireStatus(ctx context.Context, id string, want Status) *Workflow {
	e.t.Helper()
	w, err := e.wf.Get(ctx, id)
	require.NoError(e.t, err)
	require.Equal(e.t, want, w.Status)
	return w
}

// claimOne claims the one job pending in q.
func (e *env) claimOne(ctx context.Context, q string) *queue.Job {
	e.t.Helper()
	jobs, err := e.q.Claim(ctx, q, queue.ClaimOptions{Max: 10})
	require.NoError(e.t, err)
	require.Len(e.t, jobs, 1, "jobs pending in %s", q)
	return jobs[0]
}

// runAll claims and completes (with {"id": <job id>}) what is pending in
// queues, with releaser passes, until a round changes nothing and no
// outbox entry is left; it answers the jobs claimed by id, each claimed
// once.
func (e *env) runAll(ctx context.Context, queues ...string) map[string]*queue.Job {
	return e.runAllWith(ctx, []*Releaser{e.r}, queues...)
}

// runAllWith is runAll with rels passing at once (each may die part way,
// see dyingReleasers) instead of e's releaser.
func (e *env) runAllWith(ctx context.Context, rels []*Releaser, queues ...string) map[string]*queue.Job {
	e.t.Helper()
	claimed := map[string]*queue.Job{}
	for range 1000 {
		var wg sync.WaitGroup
		for _, r := range rels {
			wg.Go(func() { r.Pass(ctx) })
		}
		wg.Wait()
		progress := false
		for _, qn := range queues {
			jobs, err := e.q.Claim(ctx, qn, queue.ClaimOptions{Max: 100})
			require.NoError(e.t, err)
			for _, j := range jobs {
				progress = true
				require.NotContains(e.t, claimed, j.ID, "a job is claimed once")
				claimed[j.ID] = j
				e.complete(ctx, j)
			}
		}
		left, err := plumbing.Of(e.q).OutboxDue(ctx, 1)
		require.NoError(e.t, err)
		if !progress && len(left) == 0 {
			return claimed
		}
	}
	e.t.Fatal("the jobs did not settle")
	return nil
}

// requireRanAfter checks that each of deps ran once, released once, with
// parent's end (completed, with {"id": <parent id>}) as its upstream.
func (e *env) requireRanAfter(claimed map[string]*queue.Job, parent *queue.Job, deps ...*queue.Job) {
	e.t.Helper()
	for i, d := range deps {
		j, ok := claimed[d.ID]
		require.True(e.t, ok, "dependent %d ran", i)
		require.Equal(e.t, 1, e.count(d.ID, "release"), "dependent %d released once", i)
		up := upstreamOf(e.t, j)
		require.Equal(e.t, []string{parent.ID}, keysOf(up), "dependent %d", i)
		require.Equal(e.t, queue.StatusCompleted, up[parent.ID].Status)
		require.JSONEq(e.t, fmt.Sprintf(`{"id":%q}`, parent.ID), string(up[parent.ID].Result), "dependent %d", i)
	}
}

func runDependents(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	ctx := context.Background()

	// Two, then three, dependents of one pending job all wait for it and
	// all run with its result; its record names each.
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%dDependentsOfAPendingJob", n), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, newRDB(t))
			p := e.parent(ctx, "dm-a")
			var deps []*queue.Job
			for i := range n {
				deps = append(deps, e.after(ctx, []string{"dm-b", "dm-c", "dm-a"}[i], p))
			}
			got, err := e.q.Get(ctx, "dm-a", p.ID)
			require.NoError(t, err)
			require.Nil(t, got.Workflow, "watched, not a node")
			require.Len(t, got.Watchers, n)
			for i, d := range deps {
				require.Equal(t, d.Workflow.ID, got.Watchers[i].ID)
				require.Equal(t, p.ID, got.Watchers[i].Node)
			}
			e.r.Pass(ctx)
			for _, d := range deps {
				j, err := e.q.Get(ctx, d.Queue, d.ID)
				require.NoError(t, err)
				require.Equal(t, queue.StatusWaiting, j.Status, "the parent has not ended")
			}
			claimed := e.runAll(ctx, "dm-a", "dm-b", "dm-c")
			require.Len(t, claimed, n+1)
			e.requireRanAfter(claimed, p, deps...)
			for _, d := range deps {
				e.requireStatus(ctx, d.Workflow.ID, StatusCompleted)
			}
		})
	}

	// A job that completed (its outbox entry acked, or none: it was no
	// one's parent then) gets its entry at once for each new dependent.
	t.Run("DependentsOfACompletedJob", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		p := e.parent(ctx, "dc-a")
		d1 := e.after(ctx, "dc-b", p)
		claimed := e.runAll(ctx, "dc-a", "dc-b") // p's entry is acked
		e.requireRanAfter(claimed, p, d1)
		d2 := e.after(ctx, "dc-b", p)
		d3 := e.after(ctx, "dc-c", p)
		more := e.runAll(ctx, "dc-a", "dc-b", "dc-c")
		require.Len(t, more, 2)
		e.requireRanAfter(more, p, d2, d3)
		require.Equal(t, 1, e.count(d1.ID, "release"), "the first dependent is not released again")

		// A job that completed before anyone depended on it.
		early := e.parent(ctx, "dc-a")
		e.complete(ctx, e.claimOne(ctx, "dc-a"))
		d4, d5 := e.after(ctx, "dc-b", early), e.after(ctx, "dc-c", early)
		more = e.runAll(ctx, "dc-a", "dc-b", "dc-c")
		require.Len(t, more, 2)
		e.requireRanAfter(more, early, d4, d5)
	})

	// A node of a workflow may be watched too: its end releases both its
	// workflow's child and the dependents, whether they came before it
	// ended, or after (its entry not acked yet: the new ref joins it).
	t.Run("DependentsOfAWorkflowNode", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "dw-a"), node("b", "dw-b", "a")}})
		require.NoError(t, err)
		a, err := e.q.Get(ctx, "dw-a", w.Nodes[0].JobID)
		require.NoError(t, err)
		d1 := e.after(ctx, "dw-c", a)
		got, err := e.q.Get(ctx, "dw-a", a.ID)
		require.NoError(t, err)
		require.Equal(t, w.ID, got.Workflow.ID, "still its workflow's node")
		require.Len(t, got.Watchers, 1)

		j := e.claimOne(ctx, "dw-a")
		require.Equal(t, "a", j.Workflow.Node)
		e.complete(ctx, j)
		d2 := e.after(ctx, "dw-c", a) // before any releaser read a's entry
		claimed := e.runAll(ctx, "dw-a", "dw-b", "dw-c")
		require.Len(t, claimed, 3)
		e.requireRanAfter(claimed, a, d1, d2)
		var b *queue.Job
		for _, c := range claimed {
			if c.Workflow.ID == w.ID {
				b = c
			}
		}
		require.NotNil(t, b, "the workflow's own child ran")
		require.Equal(t, "b", b.Workflow.Node)
		require.Equal(t, 1, e.count(b.ID, "release"))
		require.JSONEq(t, fmt.Sprintf(`{"id":%q}`, a.ID), string(upstreamOf(t, b)["a"].Result))
		e.requireStatus(ctx, w.ID, StatusCompleted)

		// A rerun of an adoption changes nothing.
		require.NoError(t, plumbing.Of(e.q).AdoptJob(ctx, "dw-a", a.ID, d1.Workflow.ID, a.ID))
		got, err = e.q.Get(ctx, "dw-a", a.ID)
		require.NoError(t, err)
		require.Len(t, got.Watchers, 2)
		require.Empty(t, e.runAll(ctx, "dw-a", "dw-b", "dw-c"))
		require.Equal(t, 1, e.count(d1.ID, "release"))
	})

	// A job has at most queue.MaxWatchers dependents: one more is refused,
	// naming the cap, before anything is written (and by the adoption's
	// script, when two enqueues race past the check). Every one of the
	// cap runs.
	t.Run("WatchersCap", func(t *testing.T) {
		t.Parallel()
		rdb := newRDB(t)
		e := newEnv(t, rdb)
		p := e.parent(ctx, "dx-a")
		deps := make([]*queue.Job, 0, queue.MaxWatchers)
		for range queue.MaxWatchers {
			deps = append(deps, e.after(ctx, "dx-b", p))
		}
		keys := store.QueueKeys(plumbing.Of(e.q).Namespace(), "dx-b").All()
		before, err := rdb.HLen(ctx, keys[1]).Result()
		require.NoError(t, err)
		_, err = e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: "dx-b", Kind: "after"}, []queue.JobRef{{Queue: "dx-a", ID: p.ID}}, "")
		require.ErrorIs(t, err, queue.ErrTooManyWatchers)
		require.ErrorIs(t, err, queue.ErrConflict)
		require.ErrorContains(t, err, fmt.Sprintf("has %d dependents already, the cap (queue.MaxWatchers)", queue.MaxWatchers))
		err = plumbing.Of(e.q).AdoptJob(ctx, "dx-a", p.ID, strings.Repeat("f", 32), p.ID)
		require.ErrorIs(t, err, queue.ErrTooManyWatchers)
		require.ErrorContains(t, err, "MaxWatchers")
		got, err := e.q.Get(ctx, "dx-a", p.ID)
		require.NoError(t, err)
		require.Len(t, got.Watchers, queue.MaxWatchers)
		after, err := rdb.HLen(ctx, keys[1]).Result()
		require.NoError(t, err)
		require.Equal(t, before, after, "nothing more was enqueued")

		claimed := e.runAll(ctx, "dx-a", "dx-b")
		require.Len(t, claimed, queue.MaxWatchers+1)
		e.requireRanAfter(claimed, p, deps...)
	})

	// The outbox entry holds all its refs need: a parent whose record
	// expires after its end, before a releaser read the entry, still
	// releases every dependent with its result.
	t.Run("ParentExpiresBeforeTheRelease", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		clock := plumbing.Of(e.q).Clock().(*clockwork.FakeClock)
		en, err := e.q.Enqueue(ctx, queue.NewJob{Queue: "dr-a", Kind: "k", MaxAttempts: 1, ResultTTL: time.Second})
		require.NoError(t, err)
		p := en.Job
		d1, d2 := e.after(ctx, "dr-b", p), e.after(ctx, "dr-b", p)
		j := e.claimOne(ctx, "dr-a")
		e.complete(ctx, j)
		clock.Advance(time.Minute)
		_, err = e.q.Reclaim(ctx, "dr-a")
		require.NoError(t, err)
		_, err = e.q.Get(ctx, "dr-a", p.ID)
		require.ErrorIs(t, err, queue.ErrNotFound, "the parent's record is gone")
		claimed := e.runAll(ctx, "dr-a", "dr-b")
		require.Len(t, claimed, 2)
		e.requireRanAfter(claimed, p, d1, d2)
	})

	// A record written before watchers existed (one field shorter),
	// adopted by that version (the implicit workflow's ref in its own
	// workflow field): it gets more dependents, a rerun of the old
	// adoption changes nothing, and its end releases them all.
	t.Run("OldRecordWithoutWatchers", func(t *testing.T) {
		t.Parallel()
		rdb := newRDB(t)
		e := newEnv(t, rdb)
		p := e.parent(ctx, "do-a")
		d1 := e.after(ctx, "do-b", p)
		keys := store.QueueKeys(plumbing.Of(e.q).Namespace(), "do-a").All()
		jobsKey := keys[1]
		require.True(t, strings.HasSuffix(jobsKey, ":jobs"))
		rec, err := rdb.HGet(ctx, jobsKey, p.ID).Result()
		require.NoError(t, err)
		f := strings.Split(rec, "\x00")
		ref := d1.Workflow.ID + "|" + p.ID + "|0"
		require.Equal(t, []string{"", ref}, f[len(f)-2:], "workflow, watchers")
		f[len(f)-2] = ref // as the version before watchers adopted it
		require.NoError(t, rdb.HSet(ctx, jobsKey, p.ID, strings.Join(f[:len(f)-1], "\x00")).Err())
		got, err := e.q.Get(ctx, "do-a", p.ID)
		require.NoError(t, err)
		require.Equal(t, d1.Workflow.ID, got.Workflow.ID)
		require.Empty(t, got.Watchers)

		require.NoError(t, plumbing.Of(e.q).AdoptJob(ctx, "do-a", p.ID, d1.Workflow.ID, p.ID)) // a rerun
		d2 := e.after(ctx, "do-b", p)
		got, err = e.q.Get(ctx, "do-a", p.ID)
		require.NoError(t, err)
		require.Equal(t, d1.Workflow.ID, got.Workflow.ID)
		require.Len(t, got.Watchers, 1)
		require.Equal(t, d2.Workflow.ID, got.Watchers[0].ID)

		claimed := e.runAll(ctx, "do-a", "do-b")
		require.Len(t, claimed, 3)
		e.requireRanAfter(claimed, p, d1, d2)
	})
}
