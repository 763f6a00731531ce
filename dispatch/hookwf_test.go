package dispatch_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/workflow"
)

// A workflow's end is one workflow.ended event, with the workflow's id,
// status and end time, to a subscription that takes the type, through the
// queue of the job whose end ended it: a completed workflow, a failed one
// (a node dead, its child canceled), one canceled as a whole and an
// implicit one (a job enqueued after another), each once; a subscription to other types, or to another queue, gets none. On
// one Redis and on a Redis Cluster, where each workflow's hash sits in a
// slot of its own.
func TestHooksWorkflowEnded(t *testing.T) {
	t.Parallel()
	onSingleAndCluster(t, workflowEnded)
}

func workflowEnded(t *testing.T, rdb redis.UniversalClient) {
	r := newHookRigOn(t, rdb)
	wfc, err := workflow.New(workflow.Config{Queue: r.c})
	require.NoError(t, err)
	rel, err := workflow.NewReleaser(workflow.ReleaserConfig{Client: wfc})
	require.NoError(t, err)
	mk := func(s dispatch.Subscription) *hookReceiver {
		rc := newHookReceiver(t, r.clock.Now)
		s.URL = rc.srv.URL
		_, err := r.hooks.Create(r.ctx, s)
		require.NoError(t, err)
		return rc
	}
	ended := mk(dispatch.Subscription{Events: []string{dispatch.EventWorkflowEnded}})
	endedOfB := mk(dispatch.Subscription{Queues: []string{"wfb"}, Events: []string{dispatch.EventWorkflowEnded}})
	jobs := mk(dispatch.Subscription{Events: []string{dispatch.EventJobCompleted, dispatch.EventJobDead, dispatch.EventJobCanceled}})
	otherQueue := mk(dispatch.Subscription{Queues: []string{"elsewhere"}, Events: []string{dispatch.EventWorkflowEnded}})

	// run claims q's one pending job, ends it as completed or dead, and
	// lets the releaser record the end.
	run := func(q, end string) string {
		t.Helper()
		js, err := r.c.Claim(r.ctx, q, queue.ClaimOptions{})
		require.NoError(t, err)
		require.Len(t, js, 1, "one job of %s pending", q)
		if end == "dead" {
			_, err = r.c.Fail(r.ctx, q, js[0].ID, js[0].Token, queue.FailOptions{Error: "fatal", Dead: true})
		} else {
			err = r.c.Complete(r.ctx, q, js[0].ID, js[0].Token, queue.CompleteOptions{})
		}
		require.NoError(t, err)
		rel.Pass(r.ctx)
		return js[0].ID
	}
	spec := func(qa, qb string) workflow.Spec {
		return workflow.Spec{Nodes: []workflow.Node{
			{Name: "a", Job: queue.NewJob{Queue: qa, Kind: "k"}},
			{Name: "b", DependsOn: []string{"a"}, Job: queue.NewJob{Queue: qb, Kind: "k"}},
		}}
	}

	// Completed: a, then b, the end that ends it (in queue wfb).
	done, err := wfc.Enqueue(r.ctx, spec("wfa", "wfb"))
	require.NoError(t, err)
	run("wfa", "completed")
	doneBy := run("wfb", "completed")
	// Failed: a is dead, so b is canceled (policy cancel); b's end, in wfa,
	// ends it.
	failed, err := wfc.Enqueue(r.ctx, spec("wfa", "wfa"))
	require.NoError(t, err)
	run("wfa", "dead")
	rel.Pass(r.ctx) // b's cancel (its end) recorded
	// Canceled as a whole while a is pending in wfb.
	canceled, err := wfc.Enqueue(r.ctx, spec("wfb", "wfb"))
	require.NoError(t, err)
	_, err = wfc.Cancel(r.ctx, canceled.ID)
	require.NoError(t, err)
	for range 3 {
		rel.Pass(r.ctx)
	}
	// Implicit: a job enqueued after one that has ended (depends_on).
	parent := r.end("wfa", "k", "completed")
	rel.Pass(r.ctx)
	after, err := wfc.EnqueueAfter(r.ctx, queue.NewJob{Queue: "wfb", Kind: "k"}, []queue.JobRef{{Queue: "wfa", ID: parent}}, "")
	require.NoError(t, err)
	require.NotNil(t, after.Workflow)
	rel.Pass(r.ctx) // the parent's end recorded: the job released
	implicit := &workflow.Workflow{ID: after.Workflow.ID}
	require.Equal(t, after.ID, run("wfb", "completed"))
	for _, w := range []*workflow.Workflow{done, failed, canceled, implicit} {
		got, err := wfc.Get(r.ctx, w.ID)
		require.NoError(t, err)
		require.NotEqual(t, workflow.StatusRunning, got.Status, "workflow %s ended", w.ID)
	}
	for range 3 {
		r.pass(time.Second)
	}

	want := map[string]string{done.ID: dispatch.WorkflowCompleted, failed.ID: dispatch.WorkflowFailed, canceled.ID: dispatch.WorkflowCanceled,
		implicit.ID: dispatch.WorkflowCompleted}
	ended.mu.Lock()
	evs := append([]dispatch.HookEvent(nil), ended.events...)
	ended.mu.Unlock()
	got := map[string]string{}
	for _, e := range evs {
		require.Equal(t, dispatch.EventWorkflowEnded, e.Type)
		require.NotNil(t, e.Data.Workflow)
		_, dup := got[e.Data.Workflow.ID]
		require.False(t, dup, "workflow %s ended once", e.Data.Workflow.ID)
		got[e.Data.Workflow.ID] = e.Data.Workflow.Status
		w, err := wfc.Get(r.ctx, e.Data.Workflow.ID)
		require.NoError(t, err)
		require.Equal(t, string(w.Status), e.Data.Workflow.Status, "the status the workflow package reads")
		require.True(t, w.EndedAt.Equal(e.Data.Workflow.EndedAt), "ended_at %s, the workflow's %s", e.Data.Workflow.EndedAt, w.EndedAt)
		require.True(t, e.Timestamp.Equal(w.EndedAt))
		if e.Data.Workflow.ID == done.ID {
			// The job whose end ended it: b's, completed, in wfb.
			require.Equal(t, dispatch.HookEventData{Queue: "wfb", ID: doneBy, Kind: "k", Status: "completed", Attempts: 1,
				Workflow: e.Data.Workflow}, e.Data)
		}
	}
	require.Equal(t, want, got)
	// Each body is what the OpenAPI document's WebhookEvent says.
	doc, err := os.ReadFile("../api/openapi.json")
	require.NoError(t, err)
	spec3, err := openapi3.NewLoader().LoadFromData(doc)
	require.NoError(t, err)
	schema := spec3.Components.Schemas["WebhookEvent"]
	require.NotNil(t, schema)
	for _, e := range evs {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		require.NoError(t, schema.Value.VisitJSON(v), "%s", b)
	}
	// The queue filter applies to the job whose end ended the workflow.
	ofB := map[string]bool{}
	endedOfB.mu.Lock()
	for _, e := range endedOfB.events {
		require.Equal(t, "wfb", e.Data.Queue)
		ofB[e.Data.Workflow.ID] = true
	}
	endedOfB.mu.Unlock()
	require.Equal(t, map[string]bool{done.ID: true, canceled.ID: true, implicit.ID: true}, ofB)
	for _, rc := range []*hookReceiver{jobs, otherQueue} {
		rc.mu.Lock()
		for _, e := range rc.events {
			require.NotEqual(t, dispatch.EventWorkflowEnded, e.Type)
		}
		rc.mu.Unlock()
	}
	n, _ := jobs.count()
	require.Positive(t, n, "the job events were sent")
	n, _ = otherQueue.count()
	require.Zero(t, n)

	// Nothing more: another releaser pass and hook passes send no event
	// again.
	rel.Pass(r.ctx)
	for range 3 {
		r.pass(time.Second)
	}
	n, _ = ended.count()
	require.Equal(t, len(want), n)
}
