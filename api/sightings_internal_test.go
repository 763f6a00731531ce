package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
)

// touchLog is a registry for sightings: it records each write, answers
// ttl, and fails with fail when set.
type touchLog struct {
	mu    sync.Mutex
	calls []registry.Touch
	ttl   time.Duration
	fail  error
	gate  chan struct{} // when set, each write waits for a value from it (or its close)
}

func (l *touchLog) touch(_ context.Context, id string, t registry.Touch) (time.Duration, error) {
	if l.gate != nil {
		<-l.gate
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	if id != "w" {
		panic("a sighting of " + id)
	}
	l.calls = append(l.calls, t)
	return l.ttl, nil
}

func (l *touchLog) written() []registry.Touch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]registry.Touch(nil), l.calls...)
}

func newTestSightings(ttl time.Duration) (*sightings, *touchLog, *clockwork.FakeClock, *testutil.LogBuffer) {
	l := &touchLog{ttl: ttl}
	clock := clockwork.NewFakeClock()
	logs := &testutil.LogBuffer{}
	return newSightings(l.touch, clock, slog.New(slog.NewTextHandler(logs, nil))), l, clock, logs
}

// settle waits until worker id's sightings have nothing waiting and no
// write under way.
func settle(t *testing.T, s *sightings, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		w := s.ws[id]
		return w != nil && w.idle()
	}, 5*time.Second, time.Millisecond)
}

// A claim's sighting is written before it, unless one written within the
// worker's gap recorded the same queue and labels.
func TestSightingsAClaimSkipsTheRegistryWhileItsRecordIsFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, clock, _ := newTestSightings(time.Minute)
	claim := func(q string, labels ...string) {
		require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: q, Labels: labels}))
	}
	claim("q", "gpu")
	require.Len(t, l.written(), 1, "the first is written")
	claim("q", "gpu")
	claim("q")
	clock.Advance(sightingGap - time.Millisecond)
	claim("q", "gpu")
	require.Len(t, l.written(), 1, "the same within the gap: nothing to write")
	claim("q2")
	require.Len(t, l.written(), 2, "a queue not recorded yet")
	claim("q", "arm64")
	require.Len(t, l.written(), 3, "other labels")
	claim("q2", "arm64")
	require.Len(t, l.written(), 3)
	clock.Advance(sightingGap)
	claim("q2", "arm64")
	require.Equal(t, []registry.Touch{{Queue: "q", Labels: []string{"gpu"}}, {Queue: "q2"},
		{Queue: "q", Labels: []string{"arm64"}}, {Queue: "q2", Labels: []string{"arm64"}}}, l.written(),
		"past the gap: written, the worker's last sighting refreshed")
}

// The gap is a third of the worker's TTL when that is shorter than a
// second: a record never stands for a sighting past the worker's expiry.
func TestSightingsGapIsAThirdOfAShortTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, clock, _ := newTestSightings(1500 * time.Millisecond)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	clock.Advance(499 * time.Millisecond)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	require.Len(t, l.written(), 1)
	clock.Advance(time.Millisecond)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	require.Len(t, l.written(), 2)
}

// A claim the registry refuses answers its error and records nothing: the
// next one is written again.
func TestSightingsARefusedClaimIsWrittenAgainNextTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, _, _ := newTestSightings(time.Minute)
	l.fail = registry.ErrTooManyWorkers
	require.ErrorIs(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}), registry.ErrTooManyWorkers)
	l.fail = nil
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	require.Len(t, l.written(), 1)
}

// The changes of a worker's held jobs wait until the gap after its last
// write, merged (each job's last sighting decides), and go in one write.
func TestSightingsHeldJobsWaitForTheGapMerged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, clock, _ := newTestSightings(time.Minute)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	clock.Advance(300 * time.Millisecond)
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("a"), ref("b")}, true))
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("a")}, false))
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("c")}, true))
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("c")}, false))
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("c")}, true))
	clock.Advance(sightingGap - 300*time.Millisecond - time.Millisecond)
	require.Len(t, l.written(), 1, "nothing written before the gap")
	clock.Advance(time.Millisecond)
	want := []registry.Touch{{Queue: "q"}, {Add: []registry.JobRef{ref("b"), ref("c")}, Drop: []registry.JobRef{ref("a")}}}
	settle(t, s, "w")
	require.Equal(t, want, l.written())

	// The next changes wait for the gap after that write.
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("b")}, false))
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	clock.Advance(sightingGap - time.Millisecond)
	require.Len(t, l.written(), 2)
	clock.Advance(time.Millisecond)
	require.Eventually(t, func() bool { return len(l.written()) == 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, registry.Touch{Drop: []registry.JobRef{ref("b")}}, l.written()[2])
}

// A worker this server never wrote (its claims went to another instance)
// has its held jobs written at once, and so has one whose changes reach
// maxPendingJobs: no write carries more.
func TestSightingsHeldJobsOfAnUnknownWorkerOrManyGoAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, _, _ := newTestSightings(time.Minute)
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("a")}, true))
	settle(t, s, "w")
	require.Equal(t, []registry.Touch{{Add: []registry.JobRef{ref("a")}}}, l.written())

	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	many := make([]registry.JobRef, maxPendingJobs)
	for i := range many {
		many[i] = ref(strings.Repeat("x", i+1))
	}
	require.NoError(t, s.heldJobs(ctx, "w", many[:maxPendingJobs-1], true))
	require.Never(t, func() bool { return len(l.written()) > 2 }, 50*time.Millisecond, time.Millisecond)
	require.NoError(t, s.heldJobs(ctx, "w", many[maxPendingJobs-1:], true))
	require.Eventually(t, func() bool { return len(l.written()) == 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, many, l.written()[2].Add)
}

// A claim's jobs on top of those that wait may pass what one registry
// call takes: they are written in pieces, every job once.
func TestSightingsWriteManyJobsInPieces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, _, _ := newTestSightings(time.Minute)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	ids := func(from, to int) []registry.JobRef {
		out := make([]registry.JobRef, 0, to-from)
		for i := from; i < to; i++ {
			out = append(out, ref(fmt.Sprint(i)))
		}
		return out
	}
	require.NoError(t, s.heldJobs(ctx, "w", ids(0, maxPendingJobs-11), true))
	require.NoError(t, s.heldJobs(ctx, "w", ids(0, 10), false)) // 255 wait: not written yet
	require.NoError(t, s.heldJobs(ctx, "w", ids(maxPendingJobs, maxPendingJobs+registry.MaxHeldJobs), true))
	settle(t, s, "w")
	var add, drop []registry.JobRef
	for _, w := range l.written()[1:] {
		require.LessOrEqual(t, len(w.Add)+len(w.Drop), registry.MaxHeldJobs)
		add, drop = append(add, w.Add...), append(drop, w.Drop...)
	}
	require.Len(t, l.written(), 3, "the claim's sighting, then two pieces")
	require.Equal(t, append(ids(10, maxPendingJobs-11), ids(maxPendingJobs, maxPendingJobs+registry.MaxHeldJobs)...), add)
	require.Equal(t, ids(0, 10), drop)
}

// A read, a PUT or DELETE and Close write what waits at once; forget
// also drops the record, so the worker's next claim is written.
func TestSightingsFlushAndForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, _, _ := newTestSightings(time.Minute)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("a")}, true))
	require.NoError(t, s.flush(ctx, "w"))
	require.Equal(t, []registry.Touch{{Queue: "q"}, {Add: []registry.JobRef{ref("a")}}}, l.written())
	require.NoError(t, s.flush(ctx, "w"), "nothing waits: nothing written")
	require.NoError(t, s.flush(ctx, "unknown"))
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("a")}, false))
	require.NoError(t, s.flushAll(ctx))
	require.Len(t, l.written(), 3)
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("b")}, true))
	require.NoError(t, s.forget(ctx, "w"))
	require.Len(t, l.written(), 4)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	require.Equal(t, registry.Touch{Queue: "q"}, l.written()[4], "forgotten: the claim is written again")
}

// A write that waited and fails is logged; the sightings it carried are
// not tried again: the worker's next calls set the registry right.
func TestSightingsAFailedWriteIsLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, clock, logs := newTestSightings(time.Minute)
	require.NoError(t, s.beforeClaim(ctx, "w", registry.Touch{Queue: "q"}))
	l.mu.Lock()
	l.fail = errors.New("redis gone")
	l.mu.Unlock()
	require.NoError(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("a")}, true), "it waits for the gap")
	clock.Advance(sightingGap)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "redis gone") }, 5*time.Second, time.Millisecond)
	settle(t, s, "w")
	require.Len(t, l.written(), 1, "the claim's only")
	require.ErrorContains(t, s.heldJobs(ctx, "w", []registry.JobRef{ref("b")}, true), "redis gone",
		"past the gap, a change is written at once and answers its error")
}

// The writes of one worker go one after another, in the order their
// sightings were taken: a write waits for the one under way.
func TestSightingsWritesOfAWorkerKeepTheirOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, l, _, _ := newTestSightings(time.Minute)
	l.gate = make(chan struct{})
	first := make(chan error, 1)
	go func() { first <- s.heldJobs(ctx, "w", []registry.JobRef{ref("a")}, true) }() // written at once: waits at the gate
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.ws["w"] != nil && len(s.ws["w"].pending) == 0 && s.ws["w"].jobs == 0
	}, 5*time.Second, time.Millisecond, "the first write took its sightings")
	second := make(chan error, 1)
	go func() { second <- s.heldJobs(ctx, "w", []registry.JobRef{ref("a")}, false) }()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.ws["w"].jobs == 1
	}, 5*time.Second, time.Millisecond, "the second taken while the first is under way: due at once too")
	l.gate <- struct{}{} // one write passes: it must be the first
	require.NoError(t, <-first)
	require.Equal(t, []registry.Touch{{Add: []registry.JobRef{ref("a")}}}, l.written())
	close(l.gate)
	require.NoError(t, <-second)
	require.Equal(t, []registry.Touch{{Add: []registry.JobRef{ref("a")}}, {Drop: []registry.JobRef{ref("a")}}}, l.written())
}
