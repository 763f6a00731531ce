package registry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
	"github.com/chronoq/chronoq/testutil"
)

type bundle struct {
	ctx   context.Context
	clock *clockwork.FakeClock
	reg   *registry.Registry
}

func setupOn(t *testing.T, rdb redis.UniversalClient, cfg registry.Config) *bundle {
	t.Helper()
	clock := testutil.FakeClock()
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	reg, err := registry.New(c, cfg)
	require.NoError(t, err)
	return &bundle{ctx: t.Context(), clock: clock, reg: reg}
}

func setup(t *testing.T, cfg registry.Config) *bundle {
	t.Helper()
	return setupOn(t, testutil.Redis(t), cfg)
}

// requireAt checks that got, a time Redis's clock decided, is the fake
// clock's now or a little after (the scripts read Redis's clock as the
// fake one plus the time the command took to reach Redis).
func (b *bundle) requireAt(t *testing.T, got time.Time, msg string) {
	t.Helper()
	now := b.clock.Now()
	require.False(t, got.Before(now.Truncate(time.Millisecond)), "%s: %s is before %s", msg, got, now)
	require.Less(t, got.Sub(now), time.Second, "%s: %s", msg, got)
}

func (b *bundle) list(t *testing.T) registry.Page {
	t.Helper()
	p, err := b.reg.List(b.ctx, registry.ListOptions{})
	require.NoError(t, err)
	return p
}

func (b *bundle) ids(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, w := range b.list(t).Workers {
		out = append(out, w.ID)
	}
	return out
}

func TestRegisterListExpire(t *testing.T) {
	t.Parallel()
	testRegisterListExpire(t, setup(t, registry.Config{}))
}

func TestClusterRegisterListExpire(t *testing.T) {
	t.Parallel()
	testRegisterListExpire(t, setupOn(t, testutil.Cluster(t), registry.Config{}))
}

func testRegisterListExpire(t *testing.T, b *bundle) {
	start := b.clock.Now()
	w, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w1", Host: "box-1",
		Labels: []string{"gpu", "eu", "gpu"}, Queues: []string{"q1", "q2"}, Version: "v1.2.3"},
		Jobs: []registry.JobRef{{Queue: "q1", ID: "a"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"gpu", "eu"}, w.Labels, "duplicates dropped")
	b.requireAt(t, w.StartedAt, "started")

	p := b.list(t)
	require.Equal(t, 1, p.Live)
	require.Empty(t, p.Next)
	require.Len(t, p.Workers, 1)
	got := p.Workers[0]
	require.Equal(t, registry.Info{ID: "w1", Host: "box-1", Labels: []string{"gpu", "eu"}, Queues: []string{"q1", "q2"}, Version: "v1.2.3"}, got.Info)
	require.Equal(t, []registry.JobRef{{Queue: "q1", ID: "a"}}, got.Jobs)
	require.Equal(t, w.StartedAt, got.StartedAt)
	require.Equal(t, got.LastSeenAt.Add(registry.DefaultTTL), got.ExpiresAt)

	// A refresh within the TTL keeps the start, moves the last sighting
	// and keeps the jobs when it names none.
	b.clock.Advance(40 * time.Second)
	w2, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w1", Host: "box-1"}})
	require.NoError(t, err)
	require.Equal(t, w.StartedAt, w2.StartedAt)
	b.requireAt(t, w2.LastSeenAt, "last seen")
	require.Equal(t, []registry.JobRef{{Queue: "q1", ID: "a"}}, w2.Jobs)
	require.Empty(t, w2.Labels, "the registration replaced")

	// Silent for less than the TTL: live. Past it: gone.
	b.clock.Advance(registry.DefaultTTL - time.Second)
	require.Equal(t, []string{"w1"}, b.ids(t))
	b.clock.Advance(2 * time.Second)
	p = b.list(t)
	require.Empty(t, p.Workers)
	require.Zero(t, p.Live)
	n, err := b.reg.Live(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// Back again: a new start, no jobs.
	w3, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w1"}})
	require.NoError(t, err)
	require.True(t, w3.StartedAt.After(start.Add(registry.DefaultTTL)), "started again at %s", w3.StartedAt)
	require.Empty(t, w3.Jobs)
}

// A TTL given is the worker's own until another is given: a touch
// without one keeps it.
func TestOwnTTL(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{TTL: 10 * time.Second})
	w, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w"}, TTL: 5 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, w.LastSeenAt.Add(5*time.Minute), w.ExpiresAt)
	b.clock.Advance(time.Minute)
	require.NoError(t, b.reg.Touch(b.ctx, "w", registry.Touch{Queue: "q"}))
	got, err := b.reg.Get(b.ctx, "w")
	require.NoError(t, err)
	require.Equal(t, got.LastSeenAt.Add(5*time.Minute), got.ExpiresAt)
	b.requireAt(t, got.LastSeenAt, "refreshed")
	w, err = b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w"}, TTL: 2 * time.Second})
	require.NoError(t, err)
	require.Equal(t, w.LastSeenAt.Add(2*time.Second), w.ExpiresAt)
	// A new worker gets the registry's.
	require.NoError(t, b.reg.Touch(b.ctx, "x", registry.Touch{}))
	got, err = b.reg.Get(b.ctx, "x")
	require.NoError(t, err)
	require.Equal(t, got.LastSeenAt.Add(10*time.Second), got.ExpiresAt)
	b.clock.Advance(3 * time.Second)
	_, err = b.reg.Get(b.ctx, "w")
	require.ErrorIs(t, err, registry.ErrNotFound)
	require.ErrorIs(t, err, queue.ErrNotFound)
}

// An entry past its TTL that no sweep has deleted yet is neither listed
// nor counted, and a registration under its id starts afresh.
func TestExpiredUnsweptStartsAfresh(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	_, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w1", Queues: []string{"q1"}},
		Jobs: []registry.JobRef{{Queue: "q1", ID: "a"}}, TTL: 5 * time.Second})
	require.NoError(t, err)
	_, err = b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w2"}, TTL: time.Hour})
	require.NoError(t, err)
	b.clock.Advance(6 * time.Second)
	require.NoError(t, b.reg.Touch(b.ctx, "w1", registry.Touch{Queue: "q3"}))
	p := b.list(t)
	require.Equal(t, 2, p.Live)
	require.Len(t, p.Workers, 2)
	w1 := p.Workers[0]
	b.requireAt(t, w1.StartedAt, "started afresh")
	require.Empty(t, w1.Jobs)
	require.Equal(t, []string{"q3"}, w1.Queues, "the old registration is gone")
}

func TestTouchHeldJobs(t *testing.T) {
	t.Parallel()
	testTouchHeldJobs(t, setup(t, registry.Config{}))
}

func TestClusterTouchHeldJobs(t *testing.T) {
	t.Parallel()
	testTouchHeldJobs(t, setupOn(t, testutil.Cluster(t), registry.Config{}))
}

func testTouchHeldJobs(t *testing.T, b *bundle) {
	a, c, d := registry.JobRef{Queue: "q1", ID: "a"}, registry.JobRef{Queue: "q1", ID: "c"}, registry.JobRef{Queue: "q2", ID: "d"}
	// Unknown: registered with nothing but its id and what the call says.
	require.NoError(t, b.reg.Touch(b.ctx, "http-1", registry.Touch{Queue: "q1", Add: []registry.JobRef{a, c}}))
	// Twice, as after a lost reply: the same.
	require.NoError(t, b.reg.Touch(b.ctx, "http-1", registry.Touch{Queue: "q1", Add: []registry.JobRef{a, c}}))
	require.NoError(t, b.reg.Touch(b.ctx, "http-1", registry.Touch{Queue: "q2", Add: []registry.JobRef{d}}))
	w := b.list(t).Workers[0]
	require.Equal(t, []string{"q1", "q2"}, w.Queues)
	require.Equal(t, []registry.JobRef{a, c, d}, w.Jobs)
	require.Empty(t, w.Host)
	require.Empty(t, w.Labels)

	require.NoError(t, b.reg.Touch(b.ctx, "http-1", registry.Touch{Drop: []registry.JobRef{c}}))
	require.NoError(t, b.reg.Touch(b.ctx, "http-1", registry.Touch{Drop: []registry.JobRef{c}}))
	require.Equal(t, []registry.JobRef{a, d}, b.list(t).Workers[0].Jobs)

	// A registration keeps the queues learned from claims beside its own.
	_, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "http-1", Host: "h", Queues: []string{"q3", "q1"}}})
	require.NoError(t, err)
	w = b.list(t).Workers[0]
	require.Equal(t, []string{"q3", "q1", "q2"}, w.Queues)
	require.Equal(t, "h", w.Host)
	require.Equal(t, []registry.JobRef{a, d}, w.Jobs)

	// Add and drop in one call; a refresh keeps the worker past its old
	// expiry.
	b.clock.Advance(50 * time.Second)
	require.NoError(t, b.reg.Touch(b.ctx, "http-1", registry.Touch{Add: []registry.JobRef{c}, Drop: []registry.JobRef{a}}))
	b.clock.Advance(50 * time.Second)
	require.Equal(t, []registry.JobRef{d, c}, b.list(t).Workers[0].Jobs)

	ok, err := b.reg.Deregister(b.ctx, "http-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, b.list(t).Workers)
	ok, err = b.reg.Deregister(b.ctx, "http-1")
	require.NoError(t, err)
	require.False(t, ok)
}

// The held list stops at MaxHeldJobs: more are not recorded.
func TestHeldJobsCap(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	jobs := make([]registry.JobRef, registry.MaxHeldJobs)
	for i := range jobs {
		jobs[i] = registry.JobRef{Queue: "q1", ID: fmt.Sprintf("j%d", i)}
	}
	require.NoError(t, b.reg.Touch(b.ctx, "w", registry.Touch{Add: jobs}))
	require.NoError(t, b.reg.Touch(b.ctx, "w", registry.Touch{Add: []registry.JobRef{{Queue: "q1", ID: "more"}}}))
	w := b.list(t).Workers[0]
	require.Len(t, w.Jobs, registry.MaxHeldJobs)
	require.Equal(t, jobs, w.Jobs)
	_, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "w"}, Jobs: append(jobs, registry.JobRef{Queue: "q1", ID: "x"})})
	require.ErrorIs(t, err, queue.ErrInvalid)
}

func TestPaging(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("w%02d", i)
		want = append(want, id)
		_, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: id}})
		require.NoError(t, err)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		p, err := b.reg.List(b.ctx, registry.ListOptions{Cursor: cursor, Limit: 3})
		require.NoError(t, err)
		require.Equal(t, 7, p.Live)
		for _, w := range p.Workers {
			got = append(got, w.ID)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	require.Equal(t, want, got)
}

func TestMaxWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{MaxWorkers: 2})
	_, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "a"}, TTL: 10 * time.Second})
	require.NoError(t, err)
	require.NoError(t, b.reg.Touch(b.ctx, "b", registry.Touch{TTL: time.Minute}))
	_, err = b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "c"}})
	require.ErrorIs(t, err, registry.ErrTooManyWorkers)
	require.ErrorIs(t, b.reg.Touch(b.ctx, "c", registry.Touch{}), registry.ErrTooManyWorkers)
	require.Equal(t, []string{"a", "b"}, b.ids(t), "nothing written")
	// Those registered refresh as ever.
	require.NoError(t, b.reg.Touch(b.ctx, "b", registry.Touch{}))
	// One expires: room for another.
	b.clock.Advance(11 * time.Second)
	require.NoError(t, b.reg.Touch(b.ctx, "c", registry.Touch{}))
	require.Equal(t, []string{"b", "c"}, b.ids(t))
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	long := func(n int) string { return string(make([]byte, n)) }
	many := func(n int, f func(int) string) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = f(i)
		}
		return s
	}
	for _, c := range []struct {
		name  string
		reg   registry.Registration
		field string
	}{
		{"empty id", registry.Registration{}, "id"},
		{"bad id", registry.Registration{Info: registry.Info{ID: "-x"}}, "id"},
		{"space id", registry.Registration{Info: registry.Info{ID: "a b"}}, "id"},
		{"long id", registry.Registration{Info: registry.Info{ID: "a" + string(make([]byte, registry.MaxIDBytes))}}, "id"},
		{"host", registry.Registration{Info: registry.Info{ID: "a", Host: "x\ny"}}, "host"},
		{"long host", registry.Registration{Info: registry.Info{ID: "a", Host: long(registry.MaxHostBytes + 1)}}, "host"},
		{"version", registry.Registration{Info: registry.Info{ID: "a", Version: "\x00"}}, "version"},
		{"label", registry.Registration{Info: registry.Info{ID: "a", Labels: []string{"ok", "not ok"}}}, "labels[1]"},
		{"empty label", registry.Registration{Info: registry.Info{ID: "a", Labels: []string{""}}}, "labels[0]"},
		{"labels", registry.Registration{Info: registry.Info{ID: "a", Labels: many(registry.MaxLabels+1, func(i int) string { return fmt.Sprint(i) })}}, "labels"},
		{"queue", registry.Registration{Info: registry.Info{ID: "a", Queues: []string{"Q"}}}, "queues[0]"},
		{"queues", registry.Registration{Info: registry.Info{ID: "a", Queues: many(registry.MaxQueues+1, func(i int) string { return fmt.Sprint("q", i) })}}, "queues"},
		{"job queue", registry.Registration{Info: registry.Info{ID: "a"}, Jobs: []registry.JobRef{{Queue: "q/1", ID: "x"}}}, "jobs[0].queue"},
		{"job id", registry.Registration{Info: registry.Info{ID: "a"}, Jobs: []registry.JobRef{{Queue: "q", ID: "x y"}}}, "jobs[0].id"},
		{"ttl", registry.Registration{Info: registry.Info{ID: "a"}, TTL: time.Millisecond}, "ttl"},
		{"long ttl", registry.Registration{Info: registry.Info{ID: "a"}, TTL: registry.MaxTTL + 1}, "ttl"},
	} {
		_, err := b.reg.Register(b.ctx, c.reg)
		require.ErrorIs(t, err, queue.ErrInvalid, c.name)
		var fe *queue.FieldError
		require.True(t, errors.As(err, &fe), c.name)
		require.Equal(t, c.field, fe.Field, c.name)
	}
	_, err := b.reg.List(b.ctx, registry.ListOptions{Limit: registry.MaxListLimit + 1})
	require.ErrorIs(t, err, queue.ErrInvalid)
	_, err = b.reg.List(b.ctx, registry.ListOptions{Cursor: "a b"})
	require.ErrorIs(t, err, queue.ErrInvalid)
	require.ErrorIs(t, b.reg.Touch(b.ctx, "a", registry.Touch{Queue: "Q"}), queue.ErrInvalid)
	require.Empty(t, b.list(t).Workers, "nothing written")
}

func TestSanitizeID(t *testing.T) {
	t.Parallel()
	require.Equal(t, "my-host.example", registry.SanitizeID("my host.example", 0))
	require.Equal(t, "box", registry.SanitizeID("--box", 0))
	require.Empty(t, registry.SanitizeID("---", 0))
	require.Equal(t, "x", registry.SanitizeID(string(make([]byte, 300))+"x", 10))
	require.Len(t, registry.SanitizeID("a"+string(make([]byte, 300)), 10), registry.MaxIDBytes-10)
	require.NoError(t, registry.ValidateID(registry.SanitizeID("a"+string(make([]byte, 300)), 10)))
}

// Once a worker has registered, every key of the registry exists, and no
// script empties one: the last worker gone, expired or deregistered,
// leaves the sentinels (see keys.go), which nothing lists or counts.
func TestKeysStay(t *testing.T) {
	t.Parallel()
	rdb := testutil.Redis(t)
	b := setupOn(t, rdb, registry.Config{})
	ns := b.reg.Namespace()
	keys := registry.Keys(ns) // info, state, queues, held, expiry, ids
	require.Len(t, keys, 6)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, ns+":{"+ns+":workers}:"), "%s: in the registry's slot", k)
	}
	require.NoError(t, b.reg.Touch(b.ctx, "a", registry.Touch{TTL: time.Second}))
	_, err := b.reg.Register(b.ctx, registry.Registration{Info: registry.Info{ID: "b"}})
	require.NoError(t, err)
	require.EqualValues(t, 6, rdb.Exists(b.ctx, keys...).Val())
	b.clock.Advance(2 * time.Second)
	ok, err := b.reg.Deregister(b.ctx, "b")
	require.NoError(t, err)
	require.True(t, ok)
	p := b.list(t) // sweeps a
	require.Empty(t, p.Workers)
	require.Zero(t, p.Live)
	require.EqualValues(t, 6, rdb.Exists(b.ctx, keys...).Val())
	for _, k := range keys[:4] {
		require.EqualValues(t, 1, rdb.HLen(b.ctx, k).Val(), k)
	}
	require.EqualValues(t, 1, rdb.ZCard(b.ctx, keys[4]).Val())
	require.EqualValues(t, 1, rdb.ZCard(b.ctx, keys[5]).Val())
}

// TestRegistrySharesTheClientsClock: the registry reads Redis's clock
// through its queue client's one estimate, not one of its own.
func TestRegistrySharesTheClientsClock(t *testing.T) {
	t.Parallel()
	rdb := testutil.Redis(t)
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: testutil.SkewedClock(-time.Minute)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	reg, err := registry.New(c, registry.Config{})
	require.NoError(t, err)
	require.Same(t, plumbing.Of(c).Engine().Clock(), registry.ClockOf(reg))
	_, err = plumbing.Of(c).MeasureRedisClock(t.Context())
	require.NoError(t, err)
	require.InDelta(t, time.Minute.Seconds(), registry.ClockOf(reg).Offset().Seconds(), 0.5, "this instance's clock is a minute behind")
	require.Equal(t, plumbing.Of(c).RedisClock().Offset, registry.ClockOf(reg).Offset())
}
