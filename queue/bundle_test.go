package queue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// testBundle is what a test of the engine works with: a client on a fresh
// namespace of one Redis (a server or the Cluster), on a fake clock, with a
// queue name and helpers. newBundle builds it; the suites that run on both
// kinds of Redis (contract, manage, promise) get theirs through a setupFunc.
type testBundle struct {
	ctx    context.Context
	rdb    redis.UniversalClient
	client *queue.Client
	clock  *clockwork.FakeClock
	ns     string
	queue  string
	// newRDB connects to the same Redis again: for a second instance.
	newRDB func(t *testing.T) redis.UniversalClient
}

// dropping is a second client on the bundle's Redis and namespace that
// keeps no finished job (Retention -1): it deletes a job as it ends.
func (b *testBundle) dropping(t *testing.T) *queue.Client {
	t.Helper()
	c, err := queue.NewClient(queue.Config{Redis: b.rdb, Namespace: b.ns, Clock: b.clock, Retention: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// key is a raw key of the bundle's queue (a queue.Key* name), for checks
// below the API.
func (b *testBundle) key(name string) string { return queue.QueueKey(b.ns, b.queue, name) }

// events is the bundle's queue's events channel.
func (b *testBundle) events() string { return b.ns + ":{" + b.queue + "}:events" }

// expiresIn is how long until the sweep deletes job id (by Redis's clock,
// which runs with the fake clock): its score in the expiry set.
func (b *testBundle) expiresIn(t *testing.T, id string) time.Duration {
	t.Helper()
	at, err := b.rdb.ZScore(b.ctx, b.key(queue.KeyExpiry), id).Result()
	require.NoError(t, err)
	return time.UnixMilli(int64(at)).Sub(b.clock.Now())
}

// requireSoonAfter checks that got, a time Redis's clock decided, is want
// (on the fake clock) or a little after: Redis's now runs ahead of the fake
// clock by the time a script takes to arrive (see queue.Config.Clock).
func requireSoonAfter(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.False(t, got.Before(want.Truncate(time.Millisecond)), msgAndArgs...)
	require.Less(t, got.Sub(want), time.Second, msgAndArgs...)
}

func (b *testBundle) enqueue(t *testing.T, nj queue.NewJob) *queue.Job {
	t.Helper()
	if nj.Queue == "" {
		nj.Queue = b.queue
	}
	if nj.Kind == "" {
		nj.Kind = "test"
	}
	e, err := b.client.Enqueue(b.ctx, nj)
	require.NoError(t, err)
	require.False(t, e.Replayed)
	return e.Job
}

func (b *testBundle) claimOne(t *testing.T) *queue.Job {
	t.Helper()
	jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}

// running enqueues n jobs (of the defaults) and claims them all, in one
// claim.
func (b *testBundle) running(t *testing.T, n int) []*queue.Job {
	t.Helper()
	for range n {
		b.enqueue(t, queue.NewJob{})
	}
	jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: n})
	require.NoError(t, err)
	require.Len(t, jobs, n)
	return jobs
}

func (b *testBundle) claimNone(t *testing.T) {
	t.Helper()
	jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, jobs)
}

func (b *testBundle) get(t *testing.T, id string) *queue.Job {
	t.Helper()
	j, err := b.client.Get(b.ctx, b.queue, id)
	require.NoError(t, err)
	return j
}

// get2 reads job id of queue q.
func (b *testBundle) get2(t *testing.T, q, id string) *queue.Job {
	t.Helper()
	j, err := b.client.Get(b.ctx, q, id)
	require.NoError(t, err)
	return j
}

func (b *testBundle) stats(t *testing.T) queue.Stats {
	t.Helper()
	s, err := b.client.Stats(b.ctx, b.queue)
	require.NoError(t, err)
	return s
}

// newBundle is a client on a fresh namespace of the Redis newRDB connects
// to, on a fake clock, with opts applied to its Config.
func newBundle(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient, opts ...func(*queue.Config)) *testBundle {
	t.Helper()
	rdb := newRDB(t)
	clock := testutil.FakeClock()
	cfg := queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := queue.NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return &testBundle{ctx: ctx, rdb: rdb, client: c, clock: clock, ns: cfg.Namespace, queue: "q1", newRDB: newRDB}
}

// setupFunc builds a test bundle, with opts applied to its client's Config.
type setupFunc func(t *testing.T, opts ...func(*queue.Config)) *testBundle

// setupOn is the setupFunc of bundles on the Redis newRDB connects to.
func setupOn(newRDB func(t *testing.T) redis.UniversalClient) setupFunc {
	return func(t *testing.T, opts ...func(*queue.Config)) *testBundle {
		t.Helper()
		return newBundle(t, newRDB, opts...)
	}
}

// containsCmd reports whether a CLIENT LIST reply shows a client running cmd.
func containsCmd(clientList, cmd string) bool {
	return strings.Contains(clientList, "cmd="+cmd+" ") || strings.Contains(clientList, "cmd="+cmd+"\n")
}

// cmdStat is one command's line of INFO commandstats: how many calls, and
// the µs Redis counted to them (a script's include the commands it calls,
// which are also counted on their own lines).
type cmdStat struct {
	calls int64
	usec  float64
}

// commandStats reads INFO commandstats of rdb's server, by command name in
// lower case ("evalsha", "time", "config|resetstat").
func commandStats(tb testing.TB, ctx context.Context, rdb redis.UniversalClient) map[string]cmdStat {
	tb.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(tb, err)
	out := map[string]cmdStat{}
	for line := range strings.SplitSeq(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		var st cmdStat
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, err = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, err = strconv.ParseFloat(v, 64)
			}
			require.NoError(tb, err, line)
		}
		out[name] = st
	}
	return out
}
