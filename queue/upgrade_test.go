package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/workflow"
)

// An upgrade that stops the old processes first: each dataset under
// testdata/upgrade is a namespace an earlier release filled with jobs in
// every state (testdata/upgrade/gen, whose doc comment says how to
// record one), with what that release's reads answered. The code under
// test loads it under a fresh namespace, on a clock set to when it was
// recorded, reads every job as the old release did, and finishes every
// job: nothing lost, nothing run twice, nothing early, old claim tokens
// honoured and stale ones refused.
func TestUpgradeDataset(t *testing.T) {
	t.Parallel()
	testutil.NeedRedisServer(t, "XSETID, to restore a dataset's streams")
	files, err := filepath.Glob(filepath.Join("testdata", "upgrade", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no dataset in testdata/upgrade")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			runUpgrade(t, f)
		})
	}
}

// upgradeDataset is a dataset as the generator writes it.
type upgradeDataset struct {
	Format       int                     `json:"format"`
	Release      string                  `json:"release"`
	Namespace    string                  `json:"namespace"`
	RecordedAtUs int64                   `json:"recorded_at_us"`
	Cases        map[string]*upgradeCase `json:"cases"`
	Reads        struct {
		Get       map[string]json.RawMessage           `json:"get"`
		List      map[string]map[queue.Status][]string `json:"list"`
		Jobs      map[string]json.RawMessage           `json:"jobs"`
		Stats     map[string]json.RawMessage           `json:"stats"`
		Limits    map[string]json.RawMessage           `json:"limits"`
		Dump      map[string]json.RawMessage           `json:"dump"`
		Logs      map[string]json.RawMessage           `json:"logs"`
		Artifacts map[string]json.RawMessage           `json:"artifacts"`
		Queues    []string                             `json:"queues"`
		Workflow  json.RawMessage                      `json:"workflow"`
		CronEntry json.RawMessage                      `json:"cron_entry"`
	} `json:"reads"`
	Keys []testutil.DatasetKey `json:"keys"`
}

type upgradeCase struct {
	Queue  string   `json:"queue"`
	ID     string   `json:"id"`
	Token  string   `json:"token"`
	Stale  string   `json:"stale"`
	Idem   string   `json:"idem"`
	Labels []string `json:"labels"`
}

// upgradeRun is one dataset loaded, and the jobs the test has claimed and
// completed.
type upgradeRun struct {
	t         *testing.T
	ctx       context.Context
	ds        *upgradeDataset
	c         *queue.Client
	clock     *clockwork.FakeClock
	claims    map[string]int // job id -> claims made by this test
	completed map[string]int // job id -> completions by this test
}

func runUpgrade(t *testing.T, path string) {
	ctx := context.Background()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	ds := &upgradeDataset{}
	require.NoError(t, json.Unmarshal(raw, ds))
	require.Equal(t, 1, ds.Format, "dataset format")
	require.NotZero(t, ds.RecordedAtUs)

	rdb := testutil.Redis(t)
	ns := testutil.Namespace(t)
	testutil.LoadKeys(t, rdb, ds.Keys, ds.Namespace, ns)
	// Redis's clock, as the scripts read it, starts where the dataset's
	// was when it was recorded, and runs on from there.
	clock := clockwork.NewFakeClockAt(time.UnixMicro(ds.RecordedAtUs).UTC())
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	wf, err := workflow.New(workflow.Config{Queue: c})
	require.NoError(t, err)
	rel, err := workflow.NewReleaser(workflow.ReleaserConfig{Client: wf})
	require.NoError(t, err)
	crons := cron.NewStore(c)
	u := &upgradeRun{t: t, ctx: ctx, ds: ds, c: c, clock: clock, claims: map[string]int{}, completed: map[string]int{}}
	cs := func(name string) *upgradeCase {
		t.Helper()
		k, ok := ds.Cases[name]
		require.True(t, ok, "the dataset has no case %q", name)
		return k
	}
	const up, flow, cronq = "up", "flow", "cronq"

	// 1. Every read answers as the old release's did.
	t.Run("reads", func(t *testing.T) { u.compareReads(t, wf, crons) })

	// 2. The completed jobs' results, as the old release stored them.
	for name, want := range map[string]string{"done-small": `{"sum":3}`, "done-large": `{"what":"result"}`} {
		k := cs(name)
		j, err := c.Get(ctx, k.Queue, k.ID)
		require.NoError(t, err, name)
		require.Equal(t, queue.StatusCompleted, j.Status, name)
		var res map[string]any
		require.NoError(t, json.Unmarshal(j.Result, &res), name)
		var w map[string]any
		require.NoError(t, json.Unmarshal([]byte(want), &w))
		for f, v := range w {
			require.Equal(t, v, res[f], "%s: result field %s", name, f)
		}
	}

	// 3. Idempotency keys still answer their jobs.
	for _, name := range []string{"pending-idem", "done-large", "sched-far"} {
		k := cs(name)
		res, err := c.Enqueue(ctx, queue.NewJob{Queue: k.Queue, Kind: "calc.sum", IdempotencyKey: k.Idem})
		require.NoError(t, err, name)
		require.True(t, res.Replayed, "%s: idempotency key %q made a new job", name, k.Idem)
		require.Equal(t, k.ID, res.Job.ID, name)
	}

	// 4. A stale token is refused; the current one still acks.
	stale := cs("proc-stale")
	require.NotEmpty(t, stale.Stale)
	require.ErrorIs(t, c.Complete(ctx, up, stale.ID, stale.Stale, queue.CompleteOptions{}), queue.ErrLeaseLost)
	_, err = c.Heartbeat(ctx, up, stale.ID, stale.Stale, queue.HeartbeatOptions{})
	require.ErrorIs(t, err, queue.ErrLeaseLost)
	_, err = c.Fail(ctx, up, stale.ID, stale.Stale, queue.FailOptions{Error: "stale"})
	require.ErrorIs(t, err, queue.ErrLeaseLost)
	u.complete(stale, stale.Token)

	// 5. The processing jobs' tokens, given out by the old release.
	done := cs("proc-complete")
	u.complete(done, done.Token)
	require.NoError(t, c.Complete(ctx, up, done.ID, done.Token, queue.CompleteOptions{Result: json.RawMessage(`{"by":"upgrade"}`)}),
		"a retried complete answers as the first")

	beat := cs("proc-beat")
	lease, err := c.Heartbeat(ctx, up, beat.ID, beat.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 90, Message: "pass 2 of 2"}})
	require.NoError(t, err)
	require.False(t, lease.CancelRequested)
	require.True(t, lease.Until.After(clock.Now()), "the heartbeat extends the lease")
	_, err = c.AppendLog(ctx, up, beat.ID, beat.Token, []string{"pass 2: done"})
	require.NoError(t, err)
	page, err := c.Logs(ctx, up, beat.ID, 0, 100)
	require.NoError(t, err)
	var oldPage queue.LogPage
	require.NoError(t, json.Unmarshal(ds.Reads.Logs["proc-beat"], &oldPage))
	require.Equal(t, oldPage.Total+1, page.Total)
	require.Len(t, page.Lines, len(oldPage.Lines)+1)
	require.Equal(t, "pass 2: done", page.Lines[len(page.Lines)-1].Line)
	require.NoError(t, c.AttachArtifacts(ctx, up, beat.ID, beat.Token, map[string]json.RawMessage{"final": json.RawMessage(`true`)}))
	arts, err := c.Artifacts(ctx, up, beat.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"preview":{"frame":600},"final":true}`, string(arts))
	u.complete(beat, beat.Token)
	j, err := c.Get(ctx, up, beat.ID)
	require.NoError(t, err)
	require.NotNil(t, j.Progress)
	require.Equal(t, 90.0, j.Progress.Percent)

	failing := cs("proc-fail")
	fr, err := c.Fail(ctx, up, failing.ID, failing.Token, queue.FailOptions{Error: "resize: timeout"})
	require.NoError(t, err)
	require.Equal(t, queue.StatusScheduled, fr.Status, "one attempt of three spent: a retry")
	require.True(t, fr.RunAt.After(clock.Now()), "the retry is due after its backoff")

	canc := cs("proc-cancel")
	lease, err = c.Heartbeat(ctx, up, canc.ID, canc.Token, queue.HeartbeatOptions{})
	require.NoError(t, err)
	require.True(t, lease.CancelRequested, "the cancel the old release recorded is seen")
	require.NoError(t, c.CancelClaimed(ctx, up, canc.ID, canc.Token))
	j, err = c.Get(ctx, up, canc.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCanceled, j.Status)

	lab := cs("proc-labels")
	u.complete(lab, lab.Token)

	// A deleted job's tombstone answers a retried complete as the first.
	tomb := cs("tomb-done")
	require.NoError(t, c.Complete(ctx, up, tomb.ID, tomb.Token, queue.CompleteOptions{}))
	_, err = c.Get(ctx, up, tomb.ID)
	require.ErrorIs(t, err, queue.ErrNotFound)

	// 6. Every pending job is claimed (the labelled one by a claimer with
	// its labels), once, and nothing that is not due yet.
	got := u.claimAll(up, nil)
	got = append(got, u.claimAll(up, cs("pending-labels").Labels)...)
	u.requireCases(got, "pending-small", "pending-large", "pending-labels", "pending-idem", "pending-custom", "pending-trace")
	for _, j := range got {
		u.requireAsRecorded(j)
		require.Equal(t, 1, j.Attempts, j.ID)
		u.completeJob(j)
	}
	ticks := u.claimAll(cronq, nil)
	u.requireCases(ticks, "cron-tick")
	u.requireAsRecorded(ticks[0])
	u.completeJob(ticks[0])

	// 7. The paused queue claims nothing until resumed; then its limit of
	// two in flight counts the job the old release leased.
	const held = "held"
	require.Empty(t, u.claimAll(held, nil), "a paused queue")
	require.NoError(t, c.Resume(ctx, held))
	jobs, err := c.Claim(ctx, held, queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	u.requireCases(jobs, "held-a")
	u.claims[jobs[0].ID]++
	u.requireAsRecorded(jobs[0])
	u.completeJob(jobs[0])
	hp := cs("held-proc")
	u.complete(hp, hp.Token)
	got = u.claimAll(held, nil)
	u.requireCases(got, "held-b")
	u.requireAsRecorded(got[0])
	u.completeJob(got[0])

	// 8. The workflow: the child runs once its parent, claimed by the old
	// release, completes, and receives the parent's result.
	require.Empty(t, u.claimAll(flow, nil), "the child waits for its parent")
	parent := cs("wf-parent")
	require.NoError(t, c.Complete(ctx, flow, parent.ID, parent.Token, queue.CompleteOptions{Result: json.RawMessage(`{"rows":7}`)}))
	u.completed[parent.ID]++
	rel.Pass(ctx)
	kids := u.claimAll(flow, nil)
	u.requireCases(kids, "wf-child")
	var upstream map[string]struct {
		JobID  string          `json:"job_id"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(kids[0].Upstream, &upstream), string(kids[0].Upstream))
	require.Equal(t, parent.ID, upstream["parent"].JobID)
	require.JSONEq(t, `{"rows":7}`, string(upstream["parent"].Result))
	u.completeJob(kids[0])
	rel.Pass(ctx)
	var oldWF workflow.Workflow
	require.NoError(t, json.Unmarshal(ds.Reads.Workflow, &oldWF))
	w, err := wf.Get(ctx, oldWF.ID)
	require.NoError(t, err)
	require.Equal(t, workflow.StatusCompleted, w.Status)

	// 9. Time moves on past the soon-due jobs, the waiting retries and the
	// short lease: each is claimed now, once.
	lapse := cs("proc-lapse")
	u.clock.Advance(25 * time.Second)
	ids, err := c.Reclaim(ctx, up)
	require.NoError(t, err)
	require.Equal(t, []string{lapse.ID}, ids, "the one lapsed lease")
	got = u.claimAll(up, nil)
	u.requireCases(got, "sched-soon", "sched-soon-large", "retry-waiting", "proc-fail", "proc-lapse")
	require.ErrorIs(t, c.Complete(ctx, up, lapse.ID, lapse.Token, queue.CompleteOptions{}), queue.ErrLeaseLost,
		"the token of a lapsed lease, reclaimed and claimed again, is refused")
	for _, j := range got {
		u.requireAsRecorded(j)
		switch j.ID {
		case lapse.ID, failing.ID, cs("retry-waiting").ID:
			require.Equal(t, 2, j.Attempts, j.ID)
		default:
			require.Equal(t, 1, j.Attempts, j.ID)
		}
		u.completeJob(j)
	}

	// 10. The dead jobs, requeued, run again.
	n, err := c.RequeueDead(ctx, up, "")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got = u.claimAll(up, nil)
	u.requireCases(got, "dead-retried", "dead-forced")
	for _, j := range got {
		u.requireAsRecorded(j)
		require.Equal(t, 1, j.Attempts, "a requeued job starts its attempts again")
		u.completeJob(j)
	}

	// 11. The cron entry, written by the old release, still fires.
	job, err := crons.Trigger(ctx, "hourly")
	require.NoError(t, err)
	ticks = u.claimAll(cronq, nil)
	require.Len(t, ticks, 1)
	require.Equal(t, job.ID, ticks[0].ID)
	u.completeJob(ticks[0])
	e, err := crons.Get(ctx, "hourly")
	require.NoError(t, err)
	require.Equal(t, job.ID, e.LastJobID)

	// 12. The wake streams and their groups, as the old release left
	// them, wake a claimer waiting on the queue, and one waiting with a
	// label set the old release registered.
	for i, labels := range [][]string{nil, cs("pending-labels").Labels} {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		t.Cleanup(cancel)
		woken := make(chan []*queue.Job, 1)
		go func() {
			js, _ := c.Claim(wctx, up, queue.ClaimOptions{Wait: 10 * time.Second, Labels: labels})
			woken <- js
		}()
		require.Eventually(t, func() bool { return plumbing.Of(c).Waiters() == 1 }, 10*time.Second, time.Millisecond, "a claimer waits")
		res, err := c.Enqueue(ctx, queue.NewJob{Queue: up, Kind: "calc.sum", Payload: json.RawMessage(`{"woken":` + strconv.Itoa(i) + `}`), Labels: labels})
		require.NoError(t, err)
		js := <-woken
		cancel()
		require.Len(t, js, 1, "the waiting claimer (labels %v) is woken by the job", labels)
		require.Equal(t, res.Job.ID, js[0].ID)
		u.completeJob(js[0])
	}

	// 13. The end: each job ran to its end once; only the far one waits.
	for name, k := range ds.Cases {
		j, err := c.Get(ctx, k.Queue, k.ID)
		switch name {
		case "tomb-done", "tomb-canceled":
			require.ErrorIs(t, err, queue.ErrNotFound, name)
			continue
		}
		require.NoError(t, err, name)
		want := queue.StatusCompleted
		switch name {
		case "sched-far":
			want = queue.StatusScheduled
		case "canceled-pending", "canceled-scheduled", "proc-cancel":
			want = queue.StatusCanceled
		}
		require.Equal(t, want, j.Status, name)
		if want == queue.StatusCompleted && name != "done-small" && name != "done-large" {
			require.Equal(t, 1, u.completed[k.ID], "%s: completed once by the new release", name)
		} else {
			require.Zero(t, u.completed[k.ID], name)
		}
	}
	for id, n := range u.completed {
		require.Equal(t, 1, n, "job %s completed more than once", id)
	}
	for id, n := range u.claims {
		require.Equal(t, 1, n, "job %s claimed more than once by the new release", id)
	}
	for _, q := range ds.Reads.Queues {
		st, err := c.Stats(ctx, q)
		require.NoError(t, err)
		scheduled := int64(0)
		if q == up {
			scheduled = 1
		}
		require.Equal(t, [4]int64{scheduled, 0, 0, 0}, [4]int64{st.Scheduled, st.Pending, st.Processing, st.Dead},
			"%s: scheduled, pending, processing, dead at the end", q)
	}
	left, _, err := c.List(ctx, up, queue.ListOptions{Status: queue.StatusScheduled})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, cs("sched-far").ID, left[0].ID)
}

// compareReads reads every case, list, stats, log, artifacts, the
// workflow and the cron entry, and compares each with the old release's
// answer field by field.
func (u *upgradeRun) compareReads(t *testing.T, wf *workflow.Client, crons *cron.Store) {
	ctx, ds, c := u.ctx, u.ds, u.c
	names := make([]string, 0, len(ds.Cases))
	for name := range ds.Cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k := ds.Cases[name]
		want, ok := ds.Reads.Get[name]
		require.True(t, ok, "no recorded read of %s", name)
		j, err := c.Get(ctx, k.Queue, k.ID)
		if string(want) == "null" {
			require.ErrorIs(t, err, queue.ErrNotFound, "%s: gone in the old release", name)
			continue
		}
		require.NoError(t, err, name)
		sameFields(t, "Get "+name, want, j)
	}
	for q, byStatus := range ds.Reads.List {
		for st, want := range byStatus {
			jobs, _, err := c.List(ctx, q, queue.ListOptions{Status: st, Limit: 1000})
			require.NoError(t, err)
			ids := []string{}
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			require.Equal(t, want, ids, "List %s %s", q, st)
		}
	}
	var refs []queue.JobRef
	for _, name := range names {
		refs = append(refs, queue.JobRef{Queue: ds.Cases[name].Queue, ID: ds.Cases[name].ID})
	}
	jobs, err := c.Jobs(ctx, refs)
	require.NoError(t, err)
	for i, name := range names {
		want, ok := ds.Reads.Jobs[name]
		require.True(t, ok, "no recorded Jobs read of %s", name)
		if string(want) == "null" {
			require.Nil(t, jobs[i], "Jobs %s: gone in the old release", name)
			continue
		}
		require.NotNil(t, jobs[i], "Jobs %s", name)
		sameFields(t, "Jobs "+name, want, jobs[i])
	}
	for q, want := range ds.Reads.Dump {
		v, err := plumbing.Of(c).Dump(ctx, q)
		require.NoError(t, err)
		d := v.(*queue.Dump)
		var old queue.Dump
		require.NoError(t, json.Unmarshal(want, &old))
		require.GreaterOrEqual(t, d.Stats.OldestPendingAge, old.Stats.OldestPendingAge, "Dump %s OldestPendingAge", q)
		d.Stats.OldestPendingAge = old.Stats.OldestPendingAge
		sameFields(t, "Dump "+q, want, d)
	}
	for q, want := range ds.Reads.Limits {
		l, err := c.Limits(ctx, q)
		require.NoError(t, err)
		sameFields(t, "Limits "+q, want, l)
	}
	for q, want := range ds.Reads.Stats {
		st, err := c.Stats(ctx, q)
		require.NoError(t, err)
		var old queue.Stats
		require.NoError(t, json.Unmarshal(want, &old))
		// How long the next pending job has waited grows with the time
		// between the old reads and these.
		require.GreaterOrEqual(t, st.OldestPendingAge, old.OldestPendingAge, "Stats %s OldestPendingAge", q)
		require.Less(t, st.OldestPendingAge, old.OldestPendingAge+10*time.Second, "Stats %s OldestPendingAge", q)
		st.OldestPendingAge = old.OldestPendingAge
		sameFields(t, "Stats "+q, want, st)
	}
	for name, want := range ds.Reads.Logs {
		k := ds.Cases[name]
		page, err := c.Logs(ctx, k.Queue, k.ID, 0, 100)
		require.NoError(t, err)
		sameFields(t, "Logs "+name, want, page)
	}
	for name, want := range ds.Reads.Artifacts {
		k := ds.Cases[name]
		arts, err := c.Artifacts(ctx, k.Queue, k.ID)
		require.NoError(t, err)
		if string(want) == "null" {
			require.Nil(t, arts, "Artifacts "+name)
			continue
		}
		require.JSONEq(t, string(want), string(arts), "Artifacts "+name)
	}
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	slices.Sort(qs)
	require.Equal(t, ds.Reads.Queues, qs)
	var oldWF workflow.Workflow
	require.NoError(t, json.Unmarshal(ds.Reads.Workflow, &oldWF))
	w, err := wf.Get(ctx, oldWF.ID)
	require.NoError(t, err)
	sameFields(t, "workflow", ds.Reads.Workflow, w)
	var oldEntry cron.Entry
	require.NoError(t, json.Unmarshal(ds.Reads.CronEntry, &oldEntry))
	e, err := crons.Get(ctx, oldEntry.Name)
	require.NoError(t, err)
	sameFields(t, "cron entry", ds.Reads.CronEntry, e)
}

// sameFields compares got, encoded as encoding/json encodes it, with want,
// the old release's encoding of the same read, field by field (and the
// fields of objects within, such as a dump's jobs): every field the old
// release wrote must read the same. A field the new release adds is not
// compared.
func sameFields(t *testing.T, what string, want json.RawMessage, got any) {
	t.Helper()
	enc, err := json.Marshal(got)
	require.NoError(t, err)
	var w, g any
	require.NoError(t, json.Unmarshal(want, &w), what)
	require.NoError(t, json.Unmarshal(enc, &g), what)
	sameValue(t, what, w, g)
}

func sameValue(t *testing.T, path string, want, got any) {
	t.Helper()
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: the old release read %v, this one %v", path, want, got)
		}
		return
	}
	gm, ok := got.(map[string]any)
	if !ok {
		t.Errorf("%s: the old release read an object %v, this one %v", path, want, got)
		return
	}
	fields := make([]string, 0, len(wm))
	for f := range wm {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		gv, ok := gm[f]
		if !ok {
			t.Errorf("%s.%s is gone (the old release read %v)", path, f, wm[f])
			continue
		}
		sameValue(t, path+"."+f, wm[f], gv)
	}
}

// claimAll claims queue's jobs until none is left, with the claimer's
// labels.
func (u *upgradeRun) claimAll(q string, labels []string) []*queue.Job {
	u.t.Helper()
	var out []*queue.Job
	for range 10 {
		jobs, err := u.c.Claim(u.ctx, q, queue.ClaimOptions{Max: 100, Labels: labels})
		require.NoError(u.t, err)
		if len(jobs) == 0 {
			return out
		}
		for _, j := range jobs {
			u.claims[j.ID]++
		}
		out = append(out, jobs...)
	}
	u.t.Fatalf("claims of %s did not run out", q)
	return nil
}

// requireCases checks that jobs are exactly the named cases' jobs.
func (u *upgradeRun) requireCases(jobs []*queue.Job, names ...string) {
	u.t.Helper()
	var want, got []string
	for _, n := range names {
		k, ok := u.ds.Cases[n]
		require.True(u.t, ok, "no case %s", n)
		want = append(want, k.ID)
	}
	for _, j := range jobs {
		got = append(got, j.ID)
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(u.t, want, got, "the jobs claimed should be %v", names)
}

// requireAsRecorded checks what a claim answers of a job against the old
// release's Get of it: its kind, payload, options, labels and trace, and
// a fence one above the last the old release gave.
func (u *upgradeRun) requireAsRecorded(j *queue.Job) {
	u.t.Helper()
	for name, k := range u.ds.Cases {
		if k.ID != j.ID {
			continue
		}
		var old queue.Job
		require.NoError(u.t, json.Unmarshal(u.ds.Reads.Get[name], &old))
		require.Equal(u.t, old.Kind, j.Kind, name)
		require.JSONEq(u.t, string(old.Payload), string(j.Payload), name)
		require.Equal(u.t, old.MaxAttempts, j.MaxAttempts, name)
		require.Equal(u.t, old.Backoff, j.Backoff, name)
		require.Equal(u.t, old.Visibility, j.Visibility, name)
		require.Equal(u.t, old.ResultTTL, j.ResultTTL, name)
		require.Equal(u.t, old.Labels, j.Labels, name)
		require.Equal(u.t, old.TraceParent, j.TraceParent, name)
		require.Equal(u.t, old.IdempotencyKey, j.IdempotencyKey, name)
		require.True(u.t, old.EnqueuedAt.Equal(j.EnqueuedAt), name)
		require.False(u.t, u.clock.Now().Before(old.RunAt), "%s claimed before its run-at", name)
		require.Equal(u.t, old.Fence+1, j.Fence, "%s: each claim's fence is above every earlier claim's", name)
		require.NotEqual(u.t, u.ds.Cases[name].Token, j.Token, name)
		return
	}
	u.t.Fatalf("claimed job %s is no case of the dataset", j.ID)
}

// complete completes case k's job with token, and counts it.
func (u *upgradeRun) complete(k *upgradeCase, token string) {
	u.t.Helper()
	require.NoError(u.t, u.c.Complete(u.ctx, k.Queue, k.ID, token, queue.CompleteOptions{Result: json.RawMessage(`{"by":"upgrade"}`)}), k.ID)
	u.completed[k.ID]++
}

// completeJob completes a job this test claimed.
func (u *upgradeRun) completeJob(j *queue.Job) {
	u.t.Helper()
	err := u.c.Complete(u.ctx, j.Queue, j.ID, j.Token, queue.CompleteOptions{Result: json.RawMessage(`{"by":"upgrade"}`)})
	if errors.Is(err, queue.ErrLeaseLost) {
		u.t.Fatalf("job %s: lease lost before its complete", j.ID)
	}
	require.NoError(u.t, err, j.ID)
	u.completed[j.ID]++
}
