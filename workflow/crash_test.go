package workflow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

func TestCrashSafetySingle(t *testing.T) {
	t.Parallel()
	runCrashes(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestCrashSafetyCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runCrashes(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

func runCrashes(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	ctx := context.Background()

	// A releaser that dies right after recording an end (before the
	// children's jobs moved), or right after moving them (before the
	// outbox entry was acked), leaves the entry: the next releaser
	// records nothing twice, loses no child and releases none twice.
	for _, step := range []string{"recorded", "applied"} {
		t.Run("DiesAfter_"+step, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, newRDB(t))
			_, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "cr-a"), node("b", "cr-b", "a"), node("c", "cr-a", "a"),
				node("d", "cr-b", "b", "c")}})
			require.NoError(t, err)
			crashes := 0
			dieAt(t, e.r, func(s string) bool {
				if s == step && crashes < 3 {
					crashes++
					return true
				}
				return false
			})
			claimed := e.drive(ctx, []string{"cr-a", "cr-b"}, echo)
			require.Equal(t, 3, crashes)
			require.Len(t, claimed, 4)
			e.requireOnce(ctx, claimed)
		})
	}

	// An entry with several refs (a node's job, watched by two
	// dependents), each in a workflow of its own, hence a batch of its
	// own: a releaser that dies between recording one workflow's batch
	// and the next, first before the second, then before the third,
	// leaves the entry; the next records every ref again, and each child
	// (the workflow's own and both dependents) is released once.
	t.Run("DiesBetweenRefs", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "cx-a"), node("b", "cx-b", "a")}})
		require.NoError(t, err)
		a, err := e.q.Get(ctx, "cx-a", w.Nodes[0].JobID)
		require.NoError(t, err)
		d1, d2 := e.after(ctx, "cx-c", a), e.after(ctx, "cx-c", a)
		calls := 0
		dieAt(t, e.r, func(s string) bool {
			if s != "ref" {
				return false
			}
			calls++
			return calls == 1 || calls == 3
		})
		claimed := e.runAll(ctx, "cx-a", "cx-b", "cx-c")
		// the sixth: the dependents' own ends, one page naming their two
		// workflows
		require.Equal(t, 6, calls, "died before the second batch, then before the third, then went through")
		require.Len(t, claimed, 4)
		e.requireRanAfter(claimed, a, d1, d2)
		for _, j := range claimed {
			require.Equal(t, int64(1), j.Fence, "claimed once")
		}
		require.Equal(t, 1, e.count(w.Nodes[1].JobID, "release"), "the workflow's child released once")
	})

	// Three releasers, each on its own client, pass at once over a
	// fan-out/fan-in and a diamond while workers complete, each dying at
	// a random step of a third of its batches.
	t.Run("ConcurrentReleasersDying", func(t *testing.T) {
		t.Parallel()
		rdb := newRDB(t)
		e := newEnv(t, rdb)
		rels := dyingReleasers(t, e, rdb, 7)
		nodes := []Node{node("root", "cc-a")}
		var mids []string
		for i := range 40 {
			mids = append(mids, fmt.Sprintf("m%02d", i))
			nodes = append(nodes, node(mids[i], []string{"cc-a", "cc-b", "cc-c"}[i%3], "root"))
		}
		nodes = append(nodes, node("sink", "cc-b", mids...), node("after", "cc-c", "sink"))
		w1, err := e.wf.Enqueue(ctx, Spec{Nodes: nodes})
		require.NoError(t, err)
		w2, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "cc-c"), node("b", "cc-a", "a"), node("c", "cc-b", "a"), node("d", "cc-c", "b", "c")}})
		require.NoError(t, err)

		claimed := e.runAllWith(ctx, rels, "cc-a", "cc-b", "cc-c")
		for _, id := range []string{w1.ID, w2.ID} {
			w := e.requireStatus(ctx, id, StatusCompleted)
			for _, n := range w.Nodes {
				require.Contains(t, claimed, n.JobID, "node %s ran", n.Name)
				require.Equal(t, 1, e.count(n.JobID, "release"), "node %s released once", n.Name)
			}
		}
		require.Len(t, claimed, 43+4)
	})

	// The same with dependents: a fan-out's root and one of its children
	// are watched by jobs enqueued after them, so their entries hold
	// several refs, and the releasers die at random steps, between refs
	// too.
	t.Run("ConcurrentReleasersDyingWithDependents", func(t *testing.T) {
		t.Parallel()
		rdb := newRDB(t)
		e := newEnv(t, rdb)
		rels := dyingReleasers(t, e, rdb, 11)
		nodes := []Node{node("root", "cd-a")}
		var mids []string
		for i := range 10 {
			mids = append(mids, fmt.Sprintf("m%02d", i))
			nodes = append(nodes, node(mids[i], []string{"cd-a", "cd-b"}[i%2], "root"))
		}
		nodes = append(nodes, node("sink", "cd-b", mids...))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: nodes})
		require.NoError(t, err)
		root, err := e.q.Get(ctx, "cd-a", w.Nodes[0].JobID)
		require.NoError(t, err)
		mid, err := e.q.Get(ctx, "cd-b", w.Nodes[2].JobID)
		require.NoError(t, err)
		var deps, midDeps []*queue.Job
		for range 5 {
			deps = append(deps, e.after(ctx, "cd-c", root))
		}
		for range 2 {
			midDeps = append(midDeps, e.after(ctx, "cd-c", mid))
		}

		claimed := e.runAllWith(ctx, rels, "cd-a", "cd-b", "cd-c")
		w = e.requireStatus(ctx, w.ID, StatusCompleted)
		for _, n := range w.Nodes[1:] {
			require.Contains(t, claimed, n.JobID, "node %s ran", n.Name)
			require.Equal(t, 1, e.count(n.JobID, "release"), "node %s released once", n.Name)
		}
		e.requireRanAfter(claimed, root, deps...)
		e.requireRanAfter(claimed, mid, midDeps...)
		require.Len(t, claimed, 12+7)
	})

	// A process that dies while it enqueues: a workflow that never
	// started is canceled by a releaser once its creation is older than
	// DirtyGrace (none of its jobs ran); one that started has its roots
	// released.
	t.Run("EnqueueDiesPartWay", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		clock := plumbing.Of(e.q).Clock().(*clockwork.FakeClock)
		half := func(start bool) string {
			id := fmt.Sprintf("%032x", rand.Uint64())
			g, err := validate(Spec{Nodes: []Node{node("a", "ed-a"), node("b", "ed-b", "a")}})
			require.NoError(t, err)
			var preps []plumbing.PreparedNode
			var specs []plumbing.NodeSpec
			for i, n := range []Node{node("a", "ed-a"), node("b", "ed-b", "a")} {
				p, err := plumbing.Of(e.q).PrepareNode(n.Job, id, n.Name)
				require.NoError(t, err)
				preps = append(preps, p)
				specs = append(specs, plumbing.NodeSpec{Name: n.Name, Queue: p.Queue, JobID: p.ID, Parents: g.parents[i], Children: g.children[i]})
			}
			_, err = plumbing.Of(e.q).MarkWorkflowDirty(ctx, id, "create")
			require.NoError(t, err)
			require.NoError(t, plumbing.Of(e.q).CreateWorkflow(ctx, id, "cancel", specs))
			require.NoError(t, plumbing.Of(e.q).AddNodeJobs(ctx, preps))
			if start {
				st, err := plumbing.Of(e.q).StartWorkflow(ctx, id)
				require.NoError(t, err)
				require.Equal(t, 1, st.Code)
			}
			return id // and the process dies here
		}
		unstarted, started := half(false), half(true)
		require.True(t, e.r.finishDirty(ctx))
		w, err := e.wf.Get(ctx, started)
		require.NoError(t, err)
		require.Equal(t, queue.StatusWaiting, statuses(w)["a"], "not before DirtyGrace")

		clock.Advance(DefaultDirtyGrace + time.Second)
		require.True(t, e.r.finishDirty(ctx))
		w = e.requireStatus(ctx, unstarted, StatusCanceled)
		require.Equal(t, map[string]queue.Status{"a": queue.StatusCanceled, "b": queue.StatusCanceled}, statuses(w))
		w, err = e.wf.Get(ctx, started)
		require.NoError(t, err)
		require.Equal(t, map[string]queue.Status{"a": queue.StatusPending, "b": queue.StatusWaiting}, statuses(w))
		ids, _, _, err := plumbing.Of(e.q).DirtyWorkflows(ctx, 0, 10)
		require.NoError(t, err)
		require.Empty(t, ids, "finished changes are cleared")
		claimed := e.drive(ctx, []string{"ed-a", "ed-b"}, echo)
		require.Len(t, claimed, 2)
	})
}

// requireOnce checks that every claimed node was released once and
// claimed once.
func (e *env) requireOnce(_ context.Context, claimed map[string]*queue.Job) {
	for name, j := range claimed {
		require.Equal(e.t, 1, e.count(j.ID, "release"), "node %s released once", name)
		require.Equal(e.t, int64(1), j.Fence, "node %s claimed once", name)
	}
}

// dyingReleasers answers three releasers of e's workflows, each on a
// client of its own on rdb, each dying at a random step (seeded by seed)
// of a third of its batches.
func dyingReleasers(t *testing.T, e *env, rdb redis.UniversalClient, seed uint64) []*Releaser {
	t.Helper()
	var rels []*Releaser
	for i := range 3 {
		q, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: plumbing.Of(e.q).Namespace(), Clock: plumbing.Of(e.q).Clock(), FollowClock: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = q.Close() })
		c, err := New(Config{Queue: q, OnApplied: e.onApplied})
		require.NoError(t, err)
		r, err := NewReleaser(ReleaserConfig{Client: c})
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(uint64(i), seed))
		var mu sync.Mutex
		dieAt(t, r, func(string) bool {
			mu.Lock()
			defer mu.Unlock()
			return rng.IntN(3) == 0
		})
		rels = append(rels, r)
	}
	return rels
}

// dying holds the stop functions that dieAt gave the tests' releasers.
var dying sync.Map // *Releaser -> func(step string) bool

func init() {
	testHookStop = func(r *Releaser, step string) bool {
		stop, ok := dying.Load(r)
		return ok && stop.(func(string) bool)(step)
	}
}

// dieAt makes releaser r stop handling a batch at a step (see
// testHookStop) whenever stop answers true for it, until the test ends.
func dieAt(t testing.TB, r *Releaser, stop func(step string) bool) {
	dying.Store(r, stop)
	t.Cleanup(func() { dying.Delete(r) })
}
