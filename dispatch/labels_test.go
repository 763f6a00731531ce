package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

// A push config's labels are the endpoint's: a job whose labels are all
// among them is pushed; a job that needs a label the endpoint lacks stays
// pending (the dispatcher's claim cannot take it) and goes to a pull
// claim that has the label. The queue's worker is registered with the
// labels, and a change of labels starts a worker with the new ones.
func TestPushConfigLabels(t *testing.T) {
	t.Parallel()
	r := newRig(t, loopback, nil)
	rc := newReceiver(t, nil)
	qc := r.push("gpuq", rc.URL, func(c *dispatch.QueueConfig) { c.Labels = []string{"linux", "gpu", "gpu"} })
	require.Equal(t, []string{"gpu", "linux"}, qc.Labels, "sorted, without duplicates")
	got, err := r.store.Get(r.ctx, "gpuq")
	require.NoError(t, err)
	require.Equal(t, []string{"gpu", "linux"}, got.Labels, "as stored")

	// Enqueued first, the job the endpoint cannot take; then the one it can.
	tpu := r.enqueue(queue.NewJob{Queue: "gpuq", Labels: []string{"tpu"}})
	gpu := r.enqueue(queue.NewJob{Queue: "gpuq", Labels: []string{"gpu"}})
	plain := r.enqueue(queue.NewJob{Queue: "gpuq"})
	r.wait("gpuq", gpu.ID, queue.StatusCompleted)
	r.wait("gpuq", plain.ID, queue.StatusCompleted)
	ids := map[string]bool{}
	for _, req := range rc.requests() {
		ids[req.Header.Get(dispatch.HeaderJobID)] = true
	}
	require.Equal(t, map[string]bool{gpu.ID: true, plain.ID: true}, ids, "the labeled job and the plain one were pushed")
	j, err := r.c.Get(r.ctx, "gpuq", tpu.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusPending, j.Status, "the job needing tpu waits")

	js, err := r.c.Claim(r.ctx, "gpuq", queue.ClaimOptions{Labels: []string{"tpu"}})
	require.NoError(t, err)
	require.Len(t, js, 1, "a pull claim with the label gets it")
	require.Equal(t, tpu.ID, js[0].ID)

	reg, err := registry.New(r.c, registry.Config{})
	require.NoError(t, err)
	labelsOf := func() []string {
		p, err := reg.List(r.ctx, registry.ListOptions{})
		require.NoError(t, err)
		if len(p.Workers) != 1 {
			return nil
		}
		return p.Workers[0].Labels
	}
	require.Eventually(t, func() bool { return len(labelsOf()) == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"gpu", "linux"}, labelsOf(), "registered with the endpoint's labels")

	// New labels: a worker with them serves the queue.
	r.push("gpuq", rc.URL, func(c *dispatch.QueueConfig) { c.Labels = []string{"tpu"} })
	require.Eventually(t, func() bool { l := labelsOf(); return len(l) == 1 && l[0] == "tpu" }, 10*time.Second, 10*time.Millisecond)
	tpu2 := r.enqueue(queue.NewJob{Queue: "gpuq", Labels: []string{"tpu"}})
	r.wait("gpuq", tpu2.ID, queue.StatusCompleted)
}

// Bad labels in a push config are an error naming the field, and nothing
// is stored.
func TestPushConfigLabelsValidated(t *testing.T) {
	t.Parallel()
	r := newRig(t, loopback, nil)
	many := make([]string, queue.MaxClaimLabels+1)
	for i := range many {
		many[i] = "l" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	for _, labels := range [][]string{{""}, {"a b"}, {"a,b"}, {strings.Repeat("a", queue.MaxLabelBytes+1)}, many} {
		_, err := r.store.Put(r.ctx, "bad", dispatch.QueueConfig{Target: dispatch.Target{URL: "http://127.0.0.1/"}, Labels: labels})
		var fe *queue.FieldError
		require.ErrorAs(t, err, &fe, "%q", labels)
		require.Equal(t, "labels", fe.Field)
		require.ErrorIs(t, err, queue.ErrInvalidLabels)
	}
	_, err := r.store.Get(r.ctx, "bad")
	require.ErrorIs(t, err, dispatch.ErrNoConfig)
}
