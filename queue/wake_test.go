package queue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// A job that becomes pending wakes one waiting claimer, not all of them:
// the others stay blocked, and no claim runs but the one that takes the
// job (claimers read the wake stream through its group). On a server of
// its own, to count the scripts Redis ran.
func TestAPendingJobWakesOneWaitingClaimer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, info := wakeRig(t, ctx)
	_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"}) // the queue exists
	require.NoError(t, err)
	_, err = c.Claim(ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)

	const waiters = 3
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	got := make(chan int, waiters)
	for range waiters {
		go func() {
			js, _ := c.Claim(wctx, "q", queue.ClaimOptions{Wait: 20 * time.Second})
			got <- len(js)
		}()
	}
	require.Eventually(t, func() bool { return plumbing.Of(c).Waiters() == waiters && info("clients", "blocked_clients") == 1 },
		10*time.Second, time.Millisecond, "the claimers wait, on one connection (their wake hub's)")
	scripts := (info("commandstats", "cmdstat_evalsha") + info("commandstats", "cmdstat_fcall"))
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	require.Equal(t, 1, <-got, "one claimer takes the job")
	require.Eventually(t, func() bool { return plumbing.Of(c).Waiters() == waiters-1 && info("clients", "blocked_clients") == 1 },
		10*time.Second, time.Millisecond, "the others wait on")
	// The enqueue, the one claim, and the claim's mark of the first lease.
	require.LessOrEqual(t, (info("commandstats", "cmdstat_evalsha")+info("commandstats", "cmdstat_fcall"))-scripts, int64(3),
		"no claim ran but the one that took the job")
	stop()
	for range waiters - 1 {
		require.Zero(t, <-got)
	}
}

// A job of a label set wakes a claimer waiting with those labels, never
// one without them, even one that waited first: a claimer that cannot
// take the job is not woken (it would take nothing, and the one that can
// would wait on), and no claim runs but the one that takes it. A job
// without labels still wakes the others. On a server of its own, to count
// the scripts Redis ran.
func TestALabeledJobWakesAClaimerThatCanTakeIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, info := wakeRig(t, ctx)
	// The queue and its gpu set exist, and the client knows them.
	_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", Labels: []string{"gpu"}})
	require.NoError(t, err)
	js, err := c.Claim(ctx, "q", queue.ClaimOptions{Labels: []string{"gpu"}})
	require.NoError(t, err)
	require.Len(t, js, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	plain, gpu := waitingClaimers(t, wctx, c, info, "gpu", "linux")

	scripts := (info("commandstats", "cmdstat_evalsha") + info("commandstats", "cmdstat_fcall"))
	e, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", Labels: []string{"gpu"}})
	require.NoError(t, err)
	js = <-gpu
	require.Len(t, js, 1, "the claimer with the labels takes it")
	require.Equal(t, e.Job.ID, js[0].ID)
	require.Eventually(t, func() bool { return plumbing.Of(c).Waiters() == 2 }, 10*time.Second, time.Millisecond,
		"the others wait on")
	// The enqueue, the one claim, and the claim's mark of the first lease.
	require.LessOrEqual(t, (info("commandstats", "cmdstat_evalsha")+info("commandstats", "cmdstat_fcall"))-scripts, int64(3),
		"no claim ran but the one that took the job")

	e, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	js = <-plain
	require.Len(t, js, 1, "a job without labels wakes a claimer without")
	require.Equal(t, e.Job.ID, js[0].ID)
	stop()
	require.Empty(t, <-plain)
}

// wakeRig is a client on a redis-server of the test's own, so that the
// scripts Redis ran can be counted, whose waits do not end by themselves
// while they are; and info, which reads a field of a section of that
// server's INFO (a command's calls for commandstats).
func wakeRig(t *testing.T, ctx context.Context) (*queue.Client, func(section, field string) int64) {
	t.Helper()
	srv := testutil.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	c.SetWakeChunk(4 * time.Second)
	info := func(section, field string) int64 {
		t.Helper()
		if cmd, ok := strings.CutPrefix(field, "cmdstat_"); ok && section == "commandstats" {
			return commandStats(t, ctx, rdb)[cmd].calls
		}
		s, err := rdb.Info(ctx, section).Result()
		require.NoError(t, err)
		for line := range strings.SplitSeq(s, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				return n
			}
		}
		return 0
	}
	return c, info
}

// At MaxInFlight, a lease that ends wakes the claimers that can use the
// room: a claimer with the labels of the pending job is woken on its
// set's stream at once (not at the end of its wait's chunk), and the
// claimers without them, who could take nothing, stay blocked, even
// though they waited first. On a server of its own, to count the scripts
// Redis ran.
func TestAnEndedLeaseWakesALabeledClaimerAtMaxInFlight(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, info := wakeRig(t, ctx)
	rdb := plumbing.Of(c).Redis()
	_, err := c.SetLimits(ctx, "q", queue.Limits{MaxInFlight: 1})
	require.NoError(t, err)
	// The one lease the limit allows, held; then a gpu job waits behind it.
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	held, err := c.Claim(ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, held, 1)
	e, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", Labels: []string{"gpu"}})
	require.NoError(t, err)
	_, setWake := queue.LabelSetKeys(plumbing.Of(c).Namespace(), "q", "gpu")

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	plain, gpu := waitingClaimers(t, wctx, c, info, "gpu")

	added := func() int64 {
		s, err := rdb.XInfoStream(ctx, setWake).Result()
		require.NoError(t, err)
		return s.EntriesAdded
	}
	before := added()
	scripts := (info("commandstats", "cmdstat_evalsha") + info("commandstats", "cmdstat_fcall"))
	require.NoError(t, c.Complete(ctx, "q", held[0].ID, held[0].Token, queue.CompleteOptions{}))
	require.Greater(t, added(), before, "the ended lease wrote the gpu set's wake stream")
	js := <-gpu
	require.Len(t, js, 1, "the claimer with the labels takes the job")
	require.Equal(t, e.Job.ID, js[0].ID)
	require.Equal(t, 2, plumbing.Of(c).Waiters(), "the others wait on")
	// The complete and its mark of the job's retention, the one claim and
	// its mark of its lease.
	require.LessOrEqual(t, (info("commandstats", "cmdstat_evalsha")+info("commandstats", "cmdstat_fcall"))-scripts, int64(4),
		"no claim ran but the one that took the job")
	stop()
	for range 2 {
		require.Empty(t, <-plain)
	}
}

// waitingClaimers starts three claims of queue q that wait (20 s, until
// ctx ends), and answers once all three are blocked: two without labels
// first, whose answers come on plain, then one with labels, on gpu. The
// claimers without the labels wait first: a wake-up of the queue's own
// stream would go to one of them.
func waitingClaimers(t *testing.T, ctx context.Context, c *queue.Client, info func(section, field string) int64,
	labels ...string,
) (plain, gpu chan []*queue.Job) {
	t.Helper()
	plain, gpu = make(chan []*queue.Job, 2), make(chan []*queue.Job, 1)
	claim := func(to chan []*queue.Job, labels ...string) {
		js, _ := c.Claim(ctx, "q", queue.ClaimOptions{Wait: 20 * time.Second, Labels: labels})
		to <- js
	}
	go claim(plain)
	go claim(plain)
	// One blocked connection a wake hub: the claimers without labels
	// share one, the claimer with them has its own.
	require.Eventually(t, func() bool { return plumbing.Of(c).Waiters() == 2 && info("clients", "blocked_clients") == 1 },
		10*time.Second, time.Millisecond)
	go claim(gpu, labels...)
	require.Eventually(t, func() bool { return plumbing.Of(c).Waiters() == 3 && info("clients", "blocked_clients") == 2 },
		10*time.Second, time.Millisecond, "the claimer with the labels waits")
	return plain, gpu
}
