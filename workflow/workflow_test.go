package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

func TestMain(m *testing.M) { testutil.Main(m) }

// The workflow contract runs on one redis-server and on a 3-master
// Cluster, where the nodes' queues and the workflow's hash sit in
// different slots.
func TestWorkflowSingle(t *testing.T) {
	t.Parallel()
	runContract(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestWorkflowCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runContract(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

// env is one test's workflows on its own namespace.
type env struct {
	t  *testing.T
	q  *queue.Client
	wf *Client
	r  *Releaser
	mu sync.Mutex
	// applied counts, per job id, the actions applied with code 1, by mode
	applied map[string]map[string]int
}

func newEnv(t *testing.T, rdb redis.UniversalClient) *env {
	q, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: testutil.FakeClock(), FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	e := &env{t: t, q: q, applied: map[string]map[string]int{}}
	e.wf, err = New(Config{Queue: q, OnApplied: e.onApplied})
	require.NoError(t, err)
	e.r, err = NewReleaser(ReleaserConfig{Client: e.wf})
	require.NoError(t, err)
	return e
}

func (e *env) onApplied(r Step) {
	if r.Code != 1 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.applied[r.JobID] == nil {
		e.applied[r.JobID] = map[string]int{}
	}
	e.applied[r.JobID][r.Mode]++
}

func (e *env) count(id, mode string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied[id][mode]
}

// handler decides how a claimed job ends: a result to complete with, or
// an error to fail it for good with (dead).
type handler func(j *queue.Job) (result string, fail error)

// echo completes every job with {"node": <name>}.
func echo(j *queue.Job) (string, error) {
	return fmt.Sprintf(`{"node":%q}`, j.Workflow.Node), nil
}

// drive runs the workflow to its end without timers: claim what is
// pending in queues, end it by h, and run a releaser pass, until a round
// changes nothing and no outbox entry is left. It answers every job claimed, by node name (the last
// claim of each).
func (e *env) drive(ctx context.Context, queues []string, h handler) map[string]*queue.Job {
	claimed := map[string]*queue.Job{}
	for range 1000 {
		e.r.Pass(ctx)
		progress := false
		for _, qn := range queues {
			jobs, err := e.q.Claim(ctx, qn, queue.ClaimOptions{Max: 100})
			require.NoError(e.t, err)
			for _, j := range jobs {
				progress = true
				require.NotNil(e.t, j.Workflow, "a workflow node's job names its workflow")
				claimed[j.Workflow.Node] = j
				res, ferr := h(j)
				if ferr != nil {
					_, err := e.q.Fail(ctx, qn, j.ID, j.Token, queue.FailOptions{Error: ferr.Error(), Dead: true})
					require.NoError(e.t, err)
				} else {
					require.NoError(e.t, e.q.Complete(ctx, qn, j.ID, j.Token, queue.CompleteOptions{Result: json.RawMessage(res)}))
				}
			}
		}
		left, err := plumbing.Of(e.q).OutboxDue(ctx, 1) // entries of these ends, or a crashed pass left
		require.NoError(e.t, err)
		if !progress && len(left) == 0 {
			return claimed
		}
	}
	e.t.Fatal("the workflow did not settle")
	return nil
}

func node(name, q string, deps ...string) Node {
	return Node{Name: name, DependsOn: deps, Job: queue.NewJob{Queue: q, Kind: "step", Payload: json.RawMessage(`{"n":"` + name + `"}`), MaxAttempts: 1}}
}

func upstreamOf(t *testing.T, j *queue.Job) map[string]upstreamEntry {
	t.Helper()
	if len(j.Upstream) == 0 {
		return nil
	}
	var up map[string]upstreamEntry
	require.NoError(t, json.Unmarshal(j.Upstream, &up))
	return up
}

func statuses(w *Workflow) map[string]queue.Status {
	out := map[string]queue.Status{}
	for _, n := range w.Nodes {
		out[n.Name] = n.Status
	}
	return out
}

func runContract(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	ctx := context.Background()

	t.Run("NodeFlowKey", func(t *testing.T) {
		// A node's job keeps its flow key (written by wfadd.lua) waiting
		// and once released; a node's job, and a job with parents, take
		// no debounce.
		t.Parallel()
		e := newEnv(t, newRDB(t))
		a, b := node("a", "fa"), node("b", "fb", "a")
		a.Job.FlowKey, b.Job.FlowKey = "acme", "tenant/7"
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{a, b}})
		require.NoError(t, err)
		ids := map[string]string{}
		for _, n := range w.Nodes {
			ids[n.Name] = n.JobID
		}
		ja, err := e.q.Get(ctx, "fa", ids["a"])
		require.NoError(t, err)
		require.Equal(t, queue.StatusPending, ja.Status)
		require.Equal(t, "acme", ja.FlowKey)
		jb, err := e.q.Get(ctx, "fb", ids["b"])
		require.NoError(t, err)
		require.Equal(t, queue.StatusWaiting, jb.Status)
		require.Equal(t, "tenant/7", jb.FlowKey)

		claimed := e.drive(ctx, []string{"fa", "fb"}, echo)
		require.Len(t, claimed, 2)
		require.Equal(t, "acme", claimed["a"].FlowKey)
		require.Equal(t, "tenant/7", claimed["b"].FlowKey, "released, claimed: the same record")

		d := node("d", "fa")
		d.Job.FlowKey, d.Job.Debounce = "acme", &queue.Debounce{Period: time.Second}
		_, err = e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("c", "fa"), d}})
		var fe *queue.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "nodes[1].job.debounce", fe.Field)
		require.ErrorIs(t, err, queue.ErrInvalid)
		_, err = e.wf.EnqueueAfter(ctx, d.Job, []queue.JobRef{{Queue: "fa", ID: ids["a"]}}, "")
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "debounce", fe.Field)

		after, err := e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: "fb", Kind: "after", FlowKey: "acme"}, []queue.JobRef{{Queue: "fa", ID: ids["a"]}}, "")
		require.NoError(t, err)
		got, err := e.q.Get(ctx, "fb", after.ID)
		require.NoError(t, err)
		require.Equal(t, "acme", got.FlowKey)
	})

	t.Run("DiamondDeliversUpstreamOnce", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "qa"), node("b", "qb", "a"), node("c", "qc", "a"), node("d", "qd", "b", "c")}})
		require.NoError(t, err)
		require.Equal(t, StatusRunning, w.Status)
		require.Equal(t, map[string]queue.Status{"a": queue.StatusPending, "b": queue.StatusWaiting, "c": queue.StatusWaiting,
			"d": queue.StatusWaiting}, statuses(w))

		// A waiting job is claimed by no one.
		jobs, err := e.q.Claim(ctx, "qb", queue.ClaimOptions{Max: 10})
		require.NoError(t, err)
		require.Empty(t, jobs)

		claimed := e.drive(ctx, []string{"qa", "qb", "qc", "qd"}, echo)
		require.Len(t, claimed, 4)
		require.Empty(t, claimed["a"].Upstream, "a root has no upstream")
		upB := upstreamOf(t, claimed["b"])
		require.Equal(t, []string{"a"}, keysOf(upB))
		require.JSONEq(t, `{"node":"a"}`, string(upB["a"].Result))
		require.Equal(t, "qa", upB["a"].Queue)
		require.Equal(t, w.Nodes[0].JobID, upB["a"].JobID)
		require.Equal(t, queue.StatusCompleted, upB["a"].Status)
		upD := upstreamOf(t, claimed["d"])
		require.Equal(t, []string{"b", "c"}, keysOf(upD))
		require.JSONEq(t, `{"node":"c"}`, string(upD["c"].Result))

		w = e.requireStatus(ctx, w.ID, StatusCompleted)
		for _, n := range w.Nodes {
			require.Equal(t, queue.StatusCompleted, n.Status, n.Name)
			require.False(t, n.EndedAt.IsZero(), n.Name)
			require.Equal(t, 1, e.count(n.JobID, "release"), "node %s released once", n.Name)
			require.Equal(t, 1, n.Attempts, n.Name)
		}
		require.False(t, w.EndedAt.IsZero())
	})

	t.Run("LabeledNodesGoToTheirWorkers", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		// b and c require labels, in sets the queue has never seen: the
		// enqueue registers them; each is released onto its set's list.
		gpu, big := node("b", "ql", "a"), node("c", "ql", "a")
		gpu.Job.Labels, big.Job.Labels = []string{"gpu"}, []string{"gpu", "big"}
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "ql"), gpu, big}})
		require.NoError(t, err)
		for _, n := range w.Nodes {
			j, err := e.q.Get(ctx, n.Queue, n.JobID)
			require.NoError(t, err)
			if n.Name == "a" {
				require.Empty(t, j.Labels)
			} else {
				require.NotEmpty(t, j.Labels, "node %s keeps its labels", n.Name)
			}
		}
		claimed := e.drive(ctx, []string{"ql"}, echo) // a claimer without labels
		require.Equal(t, []string{"a"}, keysOf(claimed))
		w, err = e.wf.Get(ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]queue.Status{"a": queue.StatusCompleted, "b": queue.StatusPending, "c": queue.StatusPending},
			statuses(w), "released, waiting for a worker with their labels")

		jobs, err := e.q.Claim(ctx, "ql", queue.ClaimOptions{Max: 10, Labels: []string{"gpu"}})
		require.NoError(t, err)
		require.Len(t, jobs, 1, "a gpu claimer takes b, not c")
		require.Equal(t, "b", jobs[0].Workflow.Node)
		require.JSONEq(t, `{"node":"a"}`, string(upstreamOf(t, jobs[0])["a"].Result))
		require.NoError(t, e.q.Complete(ctx, "ql", jobs[0].ID, jobs[0].Token, queue.CompleteOptions{}))
		jobs, err = e.q.Claim(ctx, "ql", queue.ClaimOptions{Max: 10, Labels: []string{"big", "gpu", "x"}})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, "c", jobs[0].Workflow.Node)
		require.NoError(t, e.q.Complete(ctx, "ql", jobs[0].ID, jobs[0].Token, queue.CompleteOptions{}))
		e.drive(ctx, []string{"ql"}, echo)
		w = e.requireStatus(ctx, w.ID, StatusCompleted)
		for _, n := range w.Nodes {
			require.Equal(t, 1, e.count(n.JobID, "release"), "node %s released once", n.Name)
		}
	})

	// A node's job is stored as an enqueued one: a small payload in its
	// record, a larger one in the data hash; each is delivered whole.
	t.Run("NodePayloadsSmallAndLarge", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		small, large := json.RawMessage(`{"n":"small"}`), json.RawMessage(`{"n":"`+strings.Repeat("x", 300)+`"}`)
		a, b := node("a", "qs"), node("b", "qs", "a")
		a.Job.Payload, b.Job.Payload = small, large
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{a, b}})
		require.NoError(t, err)
		keys := store.QueueKeys(plumbing.Of(e.q).Namespace(), "qs").All()
		data := keys[2]
		require.True(t, strings.HasSuffix(data, ":data"), data)
		for _, n := range w.Nodes {
			in, err := plumbing.Of(e.q).Redis().HExists(ctx, data, n.JobID).Result()
			require.NoError(t, err)
			require.Equal(t, n.Name == "b", in, "node %s: payload in the data hash", n.Name)
		}
		claimed := e.drive(ctx, []string{"qs"}, echo)
		require.JSONEq(t, string(small), string(claimed["a"].Payload))
		require.JSONEq(t, string(large), string(claimed["b"].Payload))
	})

	// A queue another process deleted after this one made it is made
	// again by the next workflow into it, listed among the queues, and its
	// nodes run.
	t.Run("QueueDeletedElsewhere", func(t *testing.T) {
		t.Parallel()
		rdb := newRDB(t)
		e := newEnv(t, rdb)
		_, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "qd")}})
		require.NoError(t, err)
		other, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: plumbing.Of(e.q).Namespace(), Clock: plumbing.Of(e.q).Clock(), FollowClock: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = other.Close() })
		require.NoError(t, other.DeleteQueue(ctx, "qd", true))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "qd"), node("b", "qd", "a")}})
		require.NoError(t, err)
		qs, err := e.q.Queues(ctx)
		require.NoError(t, err)
		require.Contains(t, qs, "qd")
		claimed := e.drive(ctx, []string{"qd"}, echo)
		require.Equal(t, w.Nodes[1].JobID, claimed["b"].ID)
	})

	t.Run("FanOutFanIn", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		nodes := []Node{node("root", "fan-a")}
		var mids []string
		for i := range 30 {
			name := fmt.Sprintf("m%02d", i)
			mids = append(mids, name)
			nodes = append(nodes, node(name, []string{"fan-a", "fan-b", "fan-c"}[i%3], "root"))
		}
		nodes = append(nodes, node("sink", "fan-c", mids...))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: nodes})
		require.NoError(t, err)
		claimed := e.drive(ctx, []string{"fan-a", "fan-b", "fan-c"}, echo)
		require.Len(t, claimed, 32)
		up := upstreamOf(t, claimed["sink"])
		require.Equal(t, mids, keysOf(up))
		for _, m := range mids {
			require.JSONEq(t, `{"node":"`+m+`"}`, string(up[m].Result))
		}
		w = e.requireStatus(ctx, w.ID, StatusCompleted)
		for _, n := range w.Nodes {
			require.Equal(t, 1, e.count(n.JobID, "release"), n.Name)
		}
	})

	t.Run("ArtifactsGoDownstream", func(t *testing.T) {
		t.Parallel()
		rdb := newRDB(t)
		e := newEnv(t, rdb)
		_, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("make", "art-a"), node("use", "art-b", "make")}})
		require.NoError(t, err)
		keys := store.QueueKeys(plumbing.Of(e.q).Namespace(), "art-a").All()
		claimed := e.drive(ctx, []string{"art-a", "art-b"}, func(j *queue.Job) (string, error) {
			if j.Workflow.Node == "make" { // as the artifacts API writes them: the data hash's "<id>.a"
				require.NoError(t, rdb.HSet(ctx, keys[2], j.ID+".a", `{"report":{"rows":3}}`).Err())
			}
			return `"ok"`, nil
		})
		up := upstreamOf(t, claimed["use"])
		require.JSONEq(t, `{"report":{"rows":3}}`, string(up["make"].Artifacts))
		require.JSONEq(t, `"ok"`, string(up["make"].Result))
	})

	t.Run("BigUpstreamOmitsResults", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		big := `"` + strings.Repeat("x", 800_000) + `"`
		var parts []string
		nodes := []Node{}
		for i := range 6 { // 6 x 800 KB > MaxUpstreamBytes
			parts = append(parts, fmt.Sprintf("p%d", i))
			nodes = append(nodes, node(parts[i], "big-a"))
		}
		nodes = append(nodes, node("two", "big-b", "p0", "p1"), node("all", "big-b", parts...))
		_, err := e.wf.Enqueue(ctx, Spec{Nodes: nodes})
		require.NoError(t, err)
		claimed := e.drive(ctx, []string{"big-a", "big-b"}, func(*queue.Job) (string, error) { return big, nil })
		two := upstreamOf(t, claimed["two"])
		require.JSONEq(t, big, string(two["p0"].Result), "within the cap: the results")
		require.False(t, two["p0"].Omitted)
		all := upstreamOf(t, claimed["all"])
		require.Equal(t, parts, keysOf(all))
		for _, p := range parts {
			require.True(t, all[p].Omitted, p)
			require.JSONEq(t, `null`, string(all[p].Result))
			require.Equal(t, queue.StatusCompleted, all[p].Status)
			require.NotEmpty(t, all[p].JobID)
		}
		require.Less(t, len(claimed["all"].Upstream), 4096)
	})

	t.Run("DeathCancelsDescendants", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "pc-a"), node("b", "pc-b", "a"), node("c", "pc-a", "b"),
			node("side", "pc-b", "a"), node("d", "pc-b", "c", "side")}})
		require.NoError(t, err)
		claimed := e.drive(ctx, []string{"pc-a", "pc-b"}, func(j *queue.Job) (string, error) {
			if j.Workflow.Node == "b" {
				return "", errors.New("b broke")
			}
			return echo(j)
		})
		require.NotContains(t, claimed, "c")
		require.NotContains(t, claimed, "d")
		w = e.requireStatus(ctx, w.ID, StatusFailed)
		require.Equal(t, map[string]queue.Status{"a": queue.StatusCompleted, "b": queue.StatusDead, "c": queue.StatusCanceled,
			"side": queue.StatusCompleted, "d": queue.StatusCanceled}, statuses(w))
	})

	t.Run("ContinueRunsDescendantsWithTheFailure", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		w, err := e.wf.Enqueue(ctx, Spec{OnFailure: PolicyContinue, Nodes: []Node{node("a", "pk-a"), node("b", "pk-b", "a"), node("c", "pk-a", "b")}})
		require.NoError(t, err)
		claimed := e.drive(ctx, []string{"pk-a", "pk-b"}, func(j *queue.Job) (string, error) {
			if j.Workflow.Node == "b" {
				return "", errors.New("b broke")
			}
			return echo(j)
		})
		require.Contains(t, claimed, "c")
		up := upstreamOf(t, claimed["c"])
		require.Equal(t, queue.StatusDead, up["b"].Status)
		require.Equal(t, "b broke", up["b"].Error)
		require.JSONEq(t, `null`, string(up["b"].Result))
		w = e.requireStatus(ctx, w.ID, StatusFailed)
		require.Equal(t, PolicyContinue, w.OnFailure)
		require.Equal(t, map[string]queue.Status{"a": queue.StatusCompleted, "b": queue.StatusDead, "c": queue.StatusCompleted}, statuses(w))
	})

	t.Run("CancelTheWhole", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "cw-a"), node("b", "cw-b"), node("c", "cw-a", "a", "b")}})
		require.NoError(t, err)
		// a runs; b is pending; c waits.
		jobs, err := e.q.Claim(ctx, "cw-a", queue.ClaimOptions{})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		w, err = e.wf.Cancel(ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, StatusCanceled, w.Status)
		require.Equal(t, map[string]queue.Status{"a": queue.StatusProcessing, "b": queue.StatusCanceled, "c": queue.StatusCanceled}, statuses(w))
		lease, err := e.q.Heartbeat(ctx, "cw-a", jobs[0].ID, jobs[0].Token, queue.HeartbeatOptions{})
		require.NoError(t, err)
		require.True(t, lease.CancelRequested, "the running node is asked to stop")
		require.NoError(t, e.q.CancelClaimed(ctx, "cw-a", jobs[0].ID, jobs[0].Token))
		e.r.Pass(ctx)
		w = e.requireStatus(ctx, w.ID, StatusCanceled)
		require.False(t, w.EndedAt.IsZero(), "every node has ended")
		_, err = e.wf.Cancel(ctx, w.ID)
		require.ErrorIs(t, err, queue.ErrConflict)
	})

	t.Run("RetryResumesTheGraph", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "rt-a"), node("b", "rt-b", "a"), node("c", "rt-a", "b"), node("d", "rt-b", "c")}})
		require.NoError(t, err)
		broken := true
		h := func(j *queue.Job) (string, error) {
			if j.Workflow.Node == "b" && broken {
				return "", errors.New("b broke")
			}
			return echo(j)
		}
		e.drive(ctx, []string{"rt-a", "rt-b"}, h)
		w = e.requireStatus(ctx, w.ID, StatusFailed)
		require.Equal(t, queue.StatusCanceled, statuses(w)["d"])

		// Hours later, past the queues' retention (1 h): the canceled
		// nodes' jobs are kept for the workflow's, so the retry finds them.
		plumbing.Of(e.q).Clock().(*clockwork.FakeClock).Advance(3 * time.Hour)
		for _, qn := range []string{"rt-a", "rt-b"} {
			_, err := e.q.Reclaim(ctx, qn)
			require.NoError(t, err)
		}
		broken = false
		w, err = e.wf.Retry(ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, StatusRunning, w.Status)
		require.Equal(t, map[string]queue.Status{"a": "", "b": queue.StatusPending, "c": queue.StatusWaiting,
			"d": queue.StatusWaiting}, statuses(w), "a's job is past its retention; its upstream is the workflow's")
		claimed := e.drive(ctx, []string{"rt-a", "rt-b"}, h)
		require.Equal(t, []string{"b", "c", "d"}, keysOf(claimed))
		require.JSONEq(t, `{"node":"a"}`, string(upstreamOf(t, claimed["b"])["a"].Result))
		require.JSONEq(t, `{"node":"b"}`, string(upstreamOf(t, claimed["c"])["b"].Result))
		require.Equal(t, queue.StatusCompleted, upstreamOf(t, claimed["c"])["b"].Status)
		require.Empty(t, upstreamOf(t, claimed["c"])["b"].Error, "b completed on its retry: its old error is not its children's business")
		w = e.requireStatus(ctx, w.ID, StatusCompleted)
		_, err = e.wf.Retry(ctx, w.ID)
		require.ErrorIs(t, err, queue.ErrConflict)
	})

	t.Run("RefusesBadGraphsBeforeWriting", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		big := make([]Node, MaxNodes+1)
		for i := range big {
			big[i] = node(fmt.Sprintf("n%d", i), "bad")
		}
		for name, tc := range map[string]struct {
			spec  Spec
			field string
			msg   string
		}{
			"cycle": {Spec{Nodes: []Node{node("a", "bad", "c"), node("b", "bad", "a"), node("c", "bad", "b"), node("x", "bad")}},
				"nodes", "a -> b -> c -> a"},
			"self":      {Spec{Nodes: []Node{node("a", "bad", "a")}}, "nodes[0].depends_on", "itself"},
			"unknown":   {Spec{Nodes: []Node{node("a", "bad"), node("b", "bad", "zz")}}, "nodes[1].depends_on", `"zz"`},
			"duplicate": {Spec{Nodes: []Node{node("a", "bad"), node("a", "bad")}}, "nodes[1].name", "twice"},
			"oversized": {Spec{Nodes: big}, "nodes", "1 to 1000"},
			"empty":     {Spec{}, "nodes", "1 to 1000"},
			"name":      {Spec{Nodes: []Node{node("a,b", "bad")}}, "nodes[0].name", "only"},
			"policy":    {Spec{OnFailure: "ignore", Nodes: []Node{node("a", "bad")}}, "on_failure", "ignore"},
			"job":       {Spec{Nodes: []Node{node("a", "bad"), {Name: "b", Job: queue.NewJob{Queue: "bad"}}}}, "nodes[1].job.kind", ""},
		} {
			_, err := e.wf.Enqueue(ctx, tc.spec)
			require.ErrorIs(t, err, queue.ErrInvalid, name)
			var fe *queue.FieldError
			require.ErrorAs(t, err, &fe, name)
			require.Equal(t, tc.field, fe.Field, name)
			require.Contains(t, err.Error(), tc.msg, name)
		}
		qs, err := e.q.Queues(ctx)
		require.NoError(t, err)
		require.Empty(t, qs, "nothing was written")
		ws, err := e.wf.List(ctx, 0)
		require.NoError(t, err)
		require.Empty(t, ws)
	})

	t.Run("ListAndGet", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		var ids []string
		for range 3 {
			w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("only", "ls")}})
			require.NoError(t, err)
			ids = append(ids, w.ID)
		}
		ws, err := e.wf.List(ctx, 2)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		require.Equal(t, ids[2], ws[0].ID, "newest first")
		_, err = e.wf.Get(ctx, strings.Repeat("0", 32))
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = e.wf.Get(ctx, "no/such")
		require.ErrorIs(t, err, queue.ErrInvalid)
	})

	t.Run("OneJobAfterExistingJobs", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		enq := func(q string) *queue.Job {
			en, err := e.q.Enqueue(ctx, queue.NewJob{Queue: q, Kind: "k", MaxAttempts: 1})
			require.NoError(t, err)
			return en.Job
		}
		// p1 has completed already, p2 is running, p3 is pending.
		p1, p2, p3 := enq("dep-a"), enq("dep-b"), enq("dep-c")
		claim := func(q string) *queue.Job {
			jobs, err := e.q.Claim(ctx, q, queue.ClaimOptions{})
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			return jobs[0]
		}
		j1 := claim("dep-a")
		require.NoError(t, e.q.Complete(ctx, "dep-a", j1.ID, j1.Token, queue.CompleteOptions{Result: json.RawMessage(`"one"`)}))
		j2 := claim("dep-b")
		refs := []queue.JobRef{{Queue: "dep-a", ID: p1.ID}, {Queue: "dep-b", ID: p2.ID}, {Queue: "dep-c", ID: p3.ID}}
		j, err := e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: "dep-z", Kind: "after"}, refs, "")
		require.NoError(t, err)
		require.Equal(t, queue.StatusWaiting, j.Status)
		require.NotNil(t, j.Workflow)
		require.Equal(t, "job", j.Workflow.Node)

		// An unknown job cannot be a parent (a job with other dependents
		// can: see dependents_test.go).
		_, err = e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: "dep-z", Kind: "after"}, []queue.JobRef{{Queue: "dep-a", ID: strings.Repeat("0", 32)}}, "")
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: "dep-z", Kind: "after"}, nil, "")
		require.ErrorIs(t, err, queue.ErrInvalid)

		e.r.Pass(ctx)
		got, err := e.q.Get(ctx, "dep-z", j.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusWaiting, got.Status, "two parents have not ended")
		require.NoError(t, e.q.Complete(ctx, "dep-b", j2.ID, j2.Token, queue.CompleteOptions{Result: json.RawMessage(`"two"`)}))
		j3 := claim("dep-c")
		require.NoError(t, e.q.Complete(ctx, "dep-c", j3.ID, j3.Token, queue.CompleteOptions{}))
		e.r.Pass(ctx)
		after := claim("dep-z")
		require.Equal(t, j.ID, after.ID)
		up := upstreamOf(t, after)
		require.Equal(t, []string{p1.ID, p2.ID, p3.ID}, keysOf(up), "keyed by the parents' job ids")
		require.JSONEq(t, `"one"`, string(up[p1.ID].Result))
		require.JSONEq(t, `"two"`, string(up[p2.ID].Result))
		require.Equal(t, "dep-b", up[p2.ID].Queue)
		require.NoError(t, e.q.Complete(ctx, "dep-z", after.ID, after.Token, queue.CompleteOptions{}))
		e.r.Pass(ctx)
		e.requireStatus(ctx, j.Workflow.ID, StatusCompleted)
	})

	t.Run("OneJobAfterAFailure", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		for _, policy := range []Policy{PolicyCancel, PolicyContinue} {
			p := e.parent(ctx, "depf-a")
			j, err := e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: "depf-b", Kind: "after"}, []queue.JobRef{{Queue: "depf-a", ID: p.ID}}, policy)
			require.NoError(t, err)
			jobs, err := e.q.Claim(ctx, "depf-a", queue.ClaimOptions{})
			require.NoError(t, err)
			_, err = e.q.Fail(ctx, "depf-a", jobs[0].ID, jobs[0].Token, queue.FailOptions{Error: "no"})
			require.NoError(t, err)
			e.r.Pass(ctx)
			got, err := e.q.Get(ctx, "depf-b", j.ID)
			require.NoError(t, err)
			if policy == PolicyCancel {
				require.Equal(t, queue.StatusCanceled, got.Status)
				// a retry concerns the job only: its parent stays dead, so it is canceled again
				_, err = e.wf.Retry(ctx, j.Workflow.ID)
				require.NoError(t, err)
				e.r.Pass(ctx)
				parent, err := e.q.Get(ctx, "depf-a", p.ID)
				require.NoError(t, err)
				require.Equal(t, queue.StatusDead, parent.Status, "the parent is only watched")
				continue
			}
			require.Equal(t, queue.StatusPending, got.Status)
			require.Equal(t, queue.StatusDead, upstreamOf(t, got)[p.ID].Status)
			// a cancel of its workflow cancels the job, never the parents
			p2, err := e.q.Enqueue(ctx, queue.NewJob{Queue: "depf-a", Kind: "k"})
			require.NoError(t, err)
			j2, err := e.wf.EnqueueAfter(ctx, queue.NewJob{Queue: "depf-b", Kind: "after"}, []queue.JobRef{{Queue: "depf-a", ID: p2.Job.ID}}, policy)
			require.NoError(t, err)
			_, err = e.wf.Cancel(ctx, j2.Workflow.ID)
			require.NoError(t, err)
			got, err = e.q.Get(ctx, "depf-b", j2.ID)
			require.NoError(t, err)
			require.Equal(t, queue.StatusCanceled, got.Status)
			parent, err := e.q.Get(ctx, "depf-a", p2.Job.ID)
			require.NoError(t, err)
			require.Equal(t, queue.StatusPending, parent.Status)
		}
	})

	t.Run("ReleaserRunsAlone", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newRDB(t))
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.r.Run(rctx) }()
		defer func() { cancel(); require.NoError(t, <-done) }()
		w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "run-a"), node("b", "run-b", "a")}})
		require.NoError(t, err)
		// The worker completes on the releaser's client: its nudge wakes
		// the releaser, with no timer (the clock is a fake one).
		for _, qn := range []string{"run-a", "run-b"} {
			var jobs []*queue.Job
			require.Eventually(t, func() bool {
				jobs, err = e.q.Claim(ctx, qn, queue.ClaimOptions{})
				require.NoError(t, err)
				return len(jobs) == 1
			}, 10*time.Second, time.Millisecond)
			require.NoError(t, e.q.Complete(ctx, qn, jobs[0].ID, jobs[0].Token, queue.CompleteOptions{}))
		}
		require.Eventually(t, func() bool {
			w, err = e.wf.Get(ctx, w.ID)
			require.NoError(t, err)
			return w.Status == StatusCompleted
		}, 10*time.Second, time.Millisecond)
	})
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
