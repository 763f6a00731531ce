package workflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"

	"github.com/chronoq/chronoq/internal/tracing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
	"github.com/chronoq/chronoq/workflow"
)

// While tracing is on, a workflow's node jobs, and a job enqueued with
// depends_on, store the trace context of their enqueue: a "send <queue>"
// span a queue, a child of the caller's.
func TestTracingNodeJobsStoreTheEnqueuesTrace(t *testing.T) {
	rec := testutil.RecordSpans(t)
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	wf, err := workflow.New(workflow.Config{Queue: c})
	require.NoError(t, err)
	ctx, root := otel.Tracer("test").Start(context.Background(), "caller")
	w, err := wf.Enqueue(ctx, workflow.Spec{Nodes: []workflow.Node{
		{Name: "a", Job: queue.NewJob{Queue: "wa", Kind: "k"}},
		{Name: "b", DependsOn: []string{"a"}, Job: queue.NewJob{Queue: "wb", Kind: "k"}},
	}})
	require.NoError(t, err)
	after, err := wf.EnqueueAfter(ctx, queue.NewJob{Queue: "wc", Kind: "k"}, []queue.JobRef{{Queue: "wa", ID: w.Nodes[0].JobID}}, workflow.PolicyCancel)
	require.NoError(t, err)
	root.End()
	tid := root.SpanContext().TraceID()
	refs := []queue.JobRef{{Queue: "wa", ID: w.Nodes[0].JobID}, {Queue: "wb", ID: w.Nodes[1].JobID}, {Queue: "wc", ID: after.ID}}
	for _, ref := range refs {
		j, err := c.Get(ctx, ref.Queue, ref.ID)
		require.NoError(t, err)
		sc, ok := tracing.Parse(j.TraceParent)
		require.True(t, ok, "%s/%s stores %q", ref.Queue, ref.ID, j.TraceParent)
		require.Equal(t, tid, sc.TraceID())
		var found bool
		for _, s := range testutil.SpansOf(rec, tid) {
			if s.SpanContext().SpanID() == sc.SpanID() {
				found = s.Name() == "send "+ref.Queue && s.Parent().SpanID() == root.SpanContext().SpanID()
			}
		}
		require.True(t, found, "%s/%s: its enqueue's span", ref.Queue, ref.ID)
	}
}
