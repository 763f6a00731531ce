package api

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

func ref(id string) registry.JobRef { return registry.JobRef{Queue: "q", ID: id} }

func TestMergeTouchesKeepsEachJobsLastSighting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		in   []registry.Touch
		want []registry.Touch
	}{
		{"one goes as it is",
			[]registry.Touch{{Queue: "q", Labels: []string{"gpu"}}},
			[]registry.Touch{{Queue: "q", Labels: []string{"gpu"}}}},
		{"held then released: released; released then held: held",
			[]registry.Touch{{Add: []registry.JobRef{ref("a"), ref("b")}}, {Drop: []registry.JobRef{ref("a")}},
				{Drop: []registry.JobRef{ref("b")}}, {Add: []registry.JobRef{ref("b"), ref("c")}}},
			[]registry.Touch{{Add: []registry.JobRef{ref("b"), ref("c")}, Drop: []registry.JobRef{ref("a")}}}},
		{"every queue claimed from is recorded, the last labels and TTL win",
			[]registry.Touch{{Queue: "q1", Labels: []string{"a"}}, {Queue: "q2"}, {Queue: "q1", Labels: []string{"b"}},
				{Queue: "q3", TTL: time.Minute}, {Queue: "q2"}, {Drop: []registry.JobRef{ref("x")}}},
			[]registry.Touch{{Queue: "q2"}, {Queue: "q3"},
				{Queue: "q1", Labels: []string{"b"}, TTL: time.Minute, Drop: []registry.JobRef{ref("x")}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, mergeTouches(c.in))
		})
	}
}

// gatedRegistry records the sightings it gets, by worker, at its gate.
type gatedRegistry struct {
	storeGate
	calls map[string][]registry.Touch
	fail  error
}

// gatedTTL is the TTL a gatedRegistry answers for every worker.
const gatedTTL = 42 * time.Second

func (g *gatedRegistry) TouchTTL(_ context.Context, id string, t registry.Touch) (time.Duration, error) {
	var fail error
	g.pass(func() { g.calls[id], fail = append(g.calls[id], t), g.fail })
	if fail != nil {
		return 0, fail
	}
	return gatedTTL, nil
}

// touchErr is tc.Touch's error, and fails t when a touch that succeeded
// did not answer the registry's TTL.
func touchErr(t *testing.T, tc *toucher, id string, x registry.Touch) error {
	ttl, err := tc.Touch(context.Background(), id, x)
	if err == nil {
		assert.Equal(t, gatedTTL, ttl, "the TTL the registry answered")
	}
	return err
}

// heldTouches records a sighting of worker "w" and, while it is in
// flight, sends touches (each a sighting of its worker) one after
// another, each once the one before waits (or, another worker's, has
// reached the registry), then lets them all go with fail in force, and
// answers each one's error in order.
func heldTouches(t *testing.T, touches []struct {
	id string
	t  registry.Touch
}, fail error) (*gatedRegistry, []error) {
	t.Helper()
	g := &gatedRegistry{storeGate: newStoreGate(100), calls: map[string][]registry.Touch{}}
	tc := newToucher(g, slog.New(slog.DiscardHandler))
	first := make(chan error, 1)
	go func() { first <- touchErr(t, tc, "w", registry.Touch{Queue: "q"}) }()
	<-g.entered // the first goes alone, at once
	errs := make([]chan error, len(touches))
	waiting := 0
	for i, x := range touches {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- touchErr(t, tc, x.id, x.t) }()
		if x.id != "w" {
			<-g.entered // another worker's goes at once, alone, and waits at the gate
			continue
		}
		waiting++
		require.Eventually(t, func() bool { return tc.b.waiting("w") == waiting }, 5*time.Second, time.Millisecond)
	}
	g.release(t, func() int { return tc.b.waiting("w") }, waiting, func() { g.fail = fail })
	require.NoError(t, <-first)
	out := make([]error, len(touches))
	for i := range touches {
		out[i] = <-errs[i]
	}
	return g, out
}

func TestToucherMergesAWorkersSightingsThatArriveMeanwhile(t *testing.T) {
	t.Parallel()
	g, errs := heldTouches(t, []struct {
		id string
		t  registry.Touch
	}{
		{"w", registry.Touch{Add: []registry.JobRef{ref("a"), ref("b")}}},
		{"w", registry.Touch{Drop: []registry.JobRef{ref("a")}}},
		{"v", registry.Touch{Queue: "q"}},
		{"w", registry.Touch{Queue: "q2", Labels: []string{"gpu"}}},
		{"w", registry.Touch{Add: []registry.JobRef{ref("c")}}},
	}, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, []registry.Touch{{Queue: "q"},
		{Queue: "q2", Labels: []string{"gpu"}, Add: []registry.JobRef{ref("b"), ref("c")}, Drop: []registry.JobRef{ref("a")}}},
		g.calls["w"], "the first alone, then one call for the four that came meanwhile")
	require.Equal(t, []registry.Touch{{Queue: "q"}}, g.calls["v"], "another worker's, apart")
}

// A sighting the registry would refuse for what it carries is refused
// alone, before it joins a batch whose other sightings it would fail.
func TestToucherRefusesABadSightingAlone(t *testing.T) {
	t.Parallel()
	g := &gatedRegistry{storeGate: newStoreGate(100), calls: map[string][]registry.Touch{}}
	close(g.gate)
	tc := newToucher(g, slog.New(slog.DiscardHandler))
	err := touchErr(t, tc, "w", registry.Touch{Queue: "q", Labels: []string{"no spaces"}})
	var fe *queue.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "labels[0]", fe.Field)
	err = touchErr(t, tc, "w", registry.Touch{Queue: "Bad Queue"})
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "queue", fe.Field)
	require.NoError(t, touchErr(t, tc, "w", registry.Touch{Queue: "q"}))
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, []registry.Touch{{Queue: "q"}}, g.calls["w"], "the refused ones never reached the registry")
}

func TestToucherErrorReachesEverySightingOfTheBatch(t *testing.T) {
	t.Parallel()
	refused := errors.New("registry full")
	_, errs := heldTouches(t, []struct {
		id string
		t  registry.Touch
	}{
		{"w", registry.Touch{Add: []registry.JobRef{ref("a")}}},
		{"w", registry.Touch{Drop: []registry.JobRef{ref("b")}}},
	}, refused)
	for _, err := range errs {
		require.ErrorIs(t, err, refused)
	}
}
