package delayed_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/lifecycle"
)

// fakeSource is a sorted set of due times per queue and an index of the
// queues, in memory: these tests are about the promoter's timing, not
// about Redis (the queue package's tests drive the promoter against real
// Redis).
type fakeSource struct {
	mu       sync.Mutex
	due      map[string][]time.Time
	index    map[string]time.Time   // queue -> when it needs a pass, as parked or marked
	promoted map[string][]time.Time // due times, in the order promoted
	at       map[string][]time.Time // clock time of each promotion
	nudges   chan delayed.Nudge
	passes   chan string
	clock    clockwork.Clock // decides what is due, as Redis's clock does for the queue package
}

func newFakeSource(clock clockwork.Clock) *fakeSource {
	return &fakeSource{clock: clock, due: map[string][]time.Time{}, index: map[string]time.Time{}, promoted: map[string][]time.Time{}, at: map[string][]time.Time{},
		nudges: make(chan delayed.Nudge, 16), passes: make(chan string, 1024)}
}

// add schedules a job at t and lowers the queue's index entry to it, as
// the queue package's marks do.
func (s *fakeSource) add(q string, t time.Time) {
	s.addUnindexed(q, t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.index[q]; !ok || t.Before(at) {
		s.index[q] = t
	}
}

// addUnindexed schedules a job at t as a producer does that dies before
// its index update.
func (s *fakeSource) addUnindexed(q string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due[q] = append(s.due[q], t)
	slices.SortFunc(s.due[q], time.Time.Compare)
}

func (s *fakeSource) Promote(_ context.Context, q string, horizon time.Duration) (int, time.Time, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	moved := 0
	for len(s.due[q]) > 0 && !s.due[q][0].After(now) && moved < 2 { // batches of 2
		s.promoted[q] = append(s.promoted[q], s.due[q][0])
		s.at[q] = append(s.at[q], now)
		s.due[q] = s.due[q][1:]
		moved++
	}
	var next time.Time
	if len(s.due[q]) > 0 {
		next = s.due[q][0]
	}
	if next.IsZero() {
		delete(s.index, q)
	} else if next.Sub(now) > horizon {
		s.index[q] = next
	}
	select {
	case s.passes <- q:
	default:
	}
	return moved, next, nil
}

func (s *fakeSource) Due(_ context.Context, within time.Duration, offset, limit int) ([]delayed.Nudge, error) {
	by := s.clock.Now().Add(within)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delayed.Nudge
	for q, at := range s.index {
		if !at.After(by) {
			out = append(out, delayed.Nudge{Queue: q, At: at})
		}
	}
	slices.SortFunc(out, func(a, b delayed.Nudge) int { return a.At.Compare(b.At) })
	out = out[min(offset, len(out)):]
	return out[:min(len(out), limit)], nil
}

func (s *fakeSource) Queues(context.Context) ([]string, error) { return []string{"a"}, nil }

func (s *fakeSource) indexed(q string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.index[q]
	return at, ok
}

func (s *fakeSource) Nudges(ctx context.Context) <-chan delayed.Nudge {
	out := make(chan delayed.Nudge)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-s.nudges:
				select {
				case out <- n:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func (s *fakeSource) snapshot(q string) (promoted, at []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.promoted[q]), slices.Clone(s.at[q])
}

type promoterBundle struct {
	ctx   context.Context
	clock *clockwork.FakeClock
	src   *fakeSource
	p     *delayed.Promoter
	run   *lifecycle.Handle // the promoter's Run, once started
}

func setupPromoter(t *testing.T, cfg delayed.Config) *promoterBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	src := newFakeSource(clock)
	cfg.Source, cfg.Clock = src, clock
	p, err := delayed.NewPromoter(cfg)
	require.NoError(t, err)
	b := &promoterBundle{ctx: ctx, clock: clock, src: src, p: p}
	t.Cleanup(func() {
		if b.run != nil {
			require.NoError(t, b.run.Stop(context.Background()))
		}
	})
	return b
}

// start runs the promoter in the background, until stop or the test's end.
func (b *promoterBundle) start() { b.run = lifecycle.Start(b.ctx, b.p) }

// stop ends the promoter's Run and waits for it.
func (b *promoterBundle) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, b.run.Stop(b.ctx))
}

// parked waits until n queue loops sleep, beside the scheduler.
func (b *promoterBundle) parked(t *testing.T, n int) {
	t.Helper()
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, n+1))
}

// noPass fails when a pass was made.
func (b *promoterBundle) noPass(t *testing.T, why string) {
	t.Helper()
	select {
	case q := <-b.src.passes:
		t.Fatalf("a pass over %s: %s", q, why)
	default:
	}
}

func TestPromoterSleepsExactlyUntilNextDue(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{Queues: []string{"a"}, MaxSleep: time.Minute})
	start := b.clock.Now()
	b.src.add("a", start.Add(10*time.Second))
	b.src.add("a", start.Add(25*time.Second))
	b.start()
	b.parked(t, 1)
	b.clock.Advance(10*time.Second - time.Millisecond)
	b.parked(t, 1)
	promoted, _ := b.src.snapshot("a")
	require.Empty(t, promoted, "nothing before its due time")
	b.clock.Advance(time.Millisecond)
	b.parked(t, 1)
	promoted, at := b.src.snapshot("a")
	require.Equal(t, []time.Time{start.Add(10 * time.Second)}, promoted)
	require.Equal(t, []time.Time{start.Add(10 * time.Second)}, at, "promoted at its due time exactly")
	b.clock.Advance(15 * time.Second)
	for len(at) < 2 {
		<-b.src.passes
		_, at = b.src.snapshot("a")
	}
	require.Equal(t, start.Add(25*time.Second), at[1])
}

func TestPromoterCapsItsSleep(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{Queues: []string{"a"}, MaxSleep: 2 * time.Second})
	b.src.add("a", b.clock.Now().Add(3*time.Second)) // within the horizon (4 s): the loop stays
	b.start()
	<-b.src.passes
	b.parked(t, 1)
	// A job appears without its nudge (a nudge lost): found after MaxSleep.
	b.src.add("a", b.clock.Now())
	b.clock.Advance(2 * time.Second)
	<-b.src.passes
	b.parked(t, 1)
	promoted, _ := b.src.snapshot("a")
	require.Len(t, promoted, 1)
}

// A queue whose next job is further off than the horizon (2×MaxSleep) is
// parked in the index, its loop ends, and it costs no pass until the
// scheduler's read of the index finds its time near; then it is promoted
// on time.
func TestPromoterParksAQueueUntilItsTimeNears(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{Queues: []string{"a"}, MaxSleep: time.Second})
	start := b.clock.Now()
	b.src.add("a", start.Add(time.Minute))
	b.start()
	<-b.src.passes
	b.parked(t, 0) // the loop ended: only the scheduler's timer is left
	at, ok := b.src.indexed("a")
	require.True(t, ok)
	require.Equal(t, start.Add(time.Minute), at)
	for range 57 {
		b.clock.Advance(time.Second)
		b.parked(t, 0)
	}
	b.noPass(t, "a parked queue is passed over only when its time nears")
	b.clock.Advance(time.Second) // 58 s: within the horizon
	<-b.src.passes
	b.parked(t, 1)
	b.clock.Advance(2 * time.Second)
	<-b.src.passes
	_, promotedAt := b.src.snapshot("a")
	require.Equal(t, []time.Time{start.Add(time.Minute)}, promotedAt, "promoted at its due time exactly")
}

// A queue with nothing scheduled leaves the index and costs no pass, until
// a nudge, or the reconcile every ReconcileInterval (which finds a job
// whose producer died before updating the index).
func TestPromoterIdleQueueCostsNothingUntilReconcile(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{Queues: []string{"a"}, MaxSleep: time.Second, ReconcileInterval: 10 * time.Second})
	b.start()
	<-b.src.passes // the reconcile at Start
	b.parked(t, 0)
	_, ok := b.src.indexed("a")
	require.False(t, ok, "nothing scheduled: not in the index")
	b.src.addUnindexed("a", b.clock.Now())
	for range 9 {
		b.clock.Advance(time.Second)
		b.parked(t, 0)
	}
	b.noPass(t, "an idle queue is passed over only by a reconcile")
	b.clock.Advance(time.Second)
	<-b.src.passes
	promoted, _ := b.src.snapshot("a")
	require.Len(t, promoted, 1)
}

func TestPromoterWakesOnNudge(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{Queues: []string{"a"}, MaxSleep: time.Hour})
	start := b.clock.Now()
	b.src.add("a", start.Add(time.Hour))
	b.start()
	<-b.src.passes
	b.parked(t, 1)
	// An earlier job: without the nudge the loop would sleep an hour.
	b.src.add("a", start.Add(3*time.Second))
	b.src.nudges <- delayed.Nudge{Queue: "a", At: start.Add(3 * time.Second)}
	<-b.src.passes // the nudged pass
	b.parked(t, 1)
	b.clock.Advance(3 * time.Second)
	<-b.src.passes
	b.parked(t, 1)
	promoted, at := b.src.snapshot("a")
	require.Equal(t, []time.Time{start.Add(3 * time.Second)}, promoted)
	require.Equal(t, []time.Time{start.Add(3 * time.Second)}, at)
}

func TestPromoterDrainsInBatchesWithoutSleeping(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var batches []int
	b := setupPromoter(t, delayed.Config{Queues: []string{"a"}, OnPromote: func(_ string, n int) {
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	}})
	for i := range 7 {
		b.src.add("a", b.clock.Now().Add(-time.Duration(i)*time.Second))
	}
	b.start()
	for range 4 { // all seven moved without a sleep
		<-b.src.passes
	}
	b.stop(t)
	promoted, _ := b.src.snapshot("a")
	require.Len(t, promoted, 7)
	require.True(t, slices.IsSortedFunc(promoted, time.Time.Compare), "earliest first")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{2, 2, 2, 1}, batches)
}

func TestPromoterFollowsNewQueues(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{MaxSleep: time.Hour})
	b.start()
	<-b.src.passes // queue "a" from the listing
	b.parked(t, 0)
	b.src.add("new", b.clock.Now())
	b.src.add("new", b.clock.Now().Add(time.Minute))
	b.src.nudges <- delayed.Nudge{Queue: "new", At: b.clock.Now()}
	<-b.src.passes
	b.parked(t, 1)
	promoted, _ := b.src.snapshot("new")
	require.Len(t, promoted, 1)
}

func TestPromoterStopWaitsForLoops(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{Queues: []string{"a", "b"}})
	b.src.add("a", b.clock.Now().Add(time.Second))
	b.src.add("b", b.clock.Now().Add(time.Second))
	b.start()
	<-b.src.passes
	<-b.src.passes
	require.Error(t, b.p.Run(b.ctx), "a second Run, while one is under way, is refused")
	b.parked(t, 2)
	b.stop(t)
	// Stopped loops hold no timers.
	ctx, cancel := context.WithTimeout(b.ctx, time.Second)
	defer cancel()
	require.NoError(t, b.clock.BlockUntilContext(ctx, 0))
	// A promoter whose Run has returned may run again.
	b.start()
	<-b.src.passes
	<-b.src.passes
	b.parked(t, 2)
	b.stop(t)
	_, err := delayed.NewPromoter(delayed.Config{})
	require.Error(t, err)
}

// TestPromoterOnTheRealClock: on the real clock the waits end on a kernel
// timer (see sleepUntil); every job is still promoted, in due order,
// including one scheduled while the loop waits.
func TestPromoterOnTheRealClock(t *testing.T) {
	t.Parallel()
	src := newFakeSource(clockwork.NewRealClock())
	start := time.Now()
	// Due times both shorter and longer than the kernel-slept end of a wait.
	for i := range 20 {
		src.add("a", start.Add(time.Duration(i)*2*time.Millisecond))
	}
	p, err := delayed.NewPromoter(delayed.Config{Source: src, Queues: []string{"a"}, MaxSleep: time.Hour})
	require.NoError(t, err)
	run := lifecycle.Start(t.Context(), p)
	t.Cleanup(func() { require.NoError(t, run.Stop(context.Background())) })
	late := time.Now().Add(50 * time.Millisecond)
	src.add("a", late)
	src.nudges <- delayed.Nudge{Queue: "a", At: late}
	deadline := time.After(10 * time.Second)
	for {
		promoted, _ := src.snapshot("a")
		if len(promoted) == 21 {
			require.True(t, slices.IsSortedFunc(promoted, time.Time.Compare), "promoted in due order")
			return
		}
		select {
		case <-src.passes:
		case <-deadline:
			t.Fatalf("%d of 21 jobs promoted in 10 s", len(promoted))
		}
	}
}

// The index is read a page at a time: the entries of queues whose loops
// run stay early (a running loop writes no entry), and a full page of
// them must not hide a queue behind them.
func TestPromoterReadsTheIndexPastRunningQueues(t *testing.T) {
	t.Parallel()
	b := setupPromoter(t, delayed.Config{MaxSleep: time.Minute})
	start := b.clock.Now()
	const running = 1000 // one page
	qs := make([]string, running)
	for i := range qs {
		qs[i] = fmt.Sprintf("q%04d", i)
		b.src.add(qs[i], start.Add(90*time.Second)) // within the horizon (2 min): their loops stay
	}
	b.start()
	<-b.src.passes // the reconcile's pass over "a"
	for _, q := range qs {
		b.p.Wake(q)
	}
	b.parked(t, running)
	b.src.mu.Lock()
	for _, q := range qs {
		b.src.index[q] = start // early: their loops run and write nothing
	}
	b.src.mu.Unlock()
	b.src.add("behind", start.Add(100*time.Second)) // no nudge: only the index names it
	for len(b.src.passes) > 0 {
		<-b.src.passes
	}
	b.clock.Advance(time.Minute)  // the scheduler's tick reads the index
	for q := ""; q != "behind"; { // its loop starts: it sleeps until its job
		select {
		case q = <-b.src.passes:
		case <-b.ctx.Done():
			t.Fatal("the queue behind a page of running queues got no pass")
		}
	}
	b.parked(t, running+1)
	b.clock.Advance(40 * time.Second)
	for {
		promoted, _ := b.src.snapshot("behind")
		if len(promoted) == 1 {
			break
		}
		select {
		case <-b.src.passes:
		case <-b.ctx.Done():
			t.Fatal("the queue behind a page of running queues was not promoted")
		}
	}
}
