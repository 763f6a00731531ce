package queue_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// The engine on the embedded in-memory Redis `chronoq serve` runs when it
// is given none (miniredis, whose scripts run on gopher-lua): the places
// where its Lua differs from redis-server's, each checked on both. (`make
// test-embedded` runs the whole single-Redis contract there too.)

// onBoth runs f against redis-server and against an embedded Redis of the
// test's own.
func onBoth(t *testing.T, f func(t *testing.T, setup setupFunc)) {
	t.Run("RedisServer", func(t *testing.T) {
		t.Parallel()
		f(t, setupOn(func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) }))
	})
	t.Run("Embedded", func(t *testing.T) {
		t.Parallel()
		addr := testutil.EmbeddedRedis(t).Options().Addr
		f(t, setupOn(func(t *testing.T) redis.UniversalClient {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb
		}))
	})
}

// The dead set's sentinel is scored +inf, which gopher-lua's tonumber
// reads as nil: requeueing and purging must stop at it without comparing
// its score.
func TestDeadSetSweepStopsAtItsSentinel(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, setup setupFunc) {
		b := setup(t)
		kill := func() string {
			j := b.enqueue(t, queue.NewJob{Kind: "k"})
			c := b.claimOne(t)
			require.Equal(t, j.ID, c.ID)
			_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
			require.NoError(t, err)
			return j.ID
		}
		id := kill()
		n, err := b.client.RequeueDead(b.ctx, b.queue, "")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, id, b.claimOne(t).ID, "the requeued job is claimable")

		id = kill()
		n, err = b.client.PurgeDead(b.ctx, b.queue, "")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, err = b.client.Get(b.ctx, b.queue, id)
		require.ErrorIs(t, err, queue.ErrNotFound)
		require.Zero(t, b.stats(t).Dead)
	})
}

// A backoff whose jitter or factor Go would write with an exponent
// ("1e-05") must still retry; one stored that way by an earlier version
// too.
func TestBackoffWithTinyJitterRetries(t *testing.T) {
	t.Parallel()
	bo := queue.Backoff{Initial: time.Second, Factor: 1.00001, Max: time.Minute, Jitter: 0.00001}
	require.NotContains(t, bo.Encode(), "e", "written in decimals")
	onBoth(t, func(t *testing.T, setup setupFunc) {
		b := setup(t)
		for _, old := range []bool{false, true} {
			j := b.enqueue(t, queue.NewJob{Kind: "k", MaxAttempts: 5, Backoff: &bo})
			if old { // the record as a version writing %g stored it
				jobs := b.key(queue.KeyJobs)
				rec, err := b.rdb.HGet(b.ctx, jobs, j.ID).Result()
				require.NoError(t, err)
				enc := bo.Encode()
				require.Contains(t, rec, enc)
				rec = strings.Replace(rec, enc, "1000:1.00001:60000:1e-05", 1)
				require.NoError(t, b.rdb.HSet(b.ctx, jobs, j.ID, rec).Err())
			}
			c := b.claimOne(t)
			r, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x"})
			require.NoError(t, err, "old form: %v", old)
			require.Equal(t, queue.StatusScheduled, r.Status)
			wait := r.Due.Sub(c.ClaimedAt)
			require.Greater(t, wait, 900*time.Millisecond, "the backoff's initial second")
			require.Less(t, wait, 1100*time.Millisecond+time.Second, "the backoff's initial second")
		}
	})
}

// A rate Go would write with an exponent (1e-05 jobs a second) must still
// hold claims back, and one stored that way by an earlier version too.
func TestTinyRateLimitHolds(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, setup setupFunc) {
		b := setup(t)
		for _, old := range []bool{false, true} {
			q := map[bool]string{false: "decimal", true: "exponent"}[old]
			_, err := b.client.SetLimits(b.ctx, q, queue.Limits{Rate: 0.00001, Burst: 1})
			require.NoError(t, err)
			meta := queue.QueueKey(b.ns, q, queue.KeyMeta)
			rate, err := b.rdb.HGet(b.ctx, meta, "limit_rate").Result()
			require.NoError(t, err)
			require.Equal(t, "0.00001", rate)
			if old {
				require.NoError(t, b.rdb.HSet(b.ctx, meta, "limit_rate", "1e-05").Err())
			}
			for range 3 {
				b.enqueue(t, queue.NewJob{Queue: q, Kind: "k"})
			}
			got, err := b.client.Claim(b.ctx, q, queue.ClaimOptions{Max: 3})
			require.NoError(t, err)
			require.Len(t, got, 1, "%s: a burst of one", q)
		}
	})
}

// claim.lua remembers the lease deadline of each visibility in a claim;
// keyed by the number, gopher-lua would make it an array as long as the
// visibility in ms (an hour: 3.6 million slots, tens of MB a claim). Not
// parallel: it reads the process's allocations, and the embedded Redis
// runs in this process.
func TestEmbeddedClaimWithALongLeaseAllocatesLittle(t *testing.T) {
	addr := testutil.EmbeddedRedis(t).Options().Addr
	b := setupOn(func(t *testing.T) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	})(t)
	claim := func(vis time.Duration) uint64 {
		b.enqueue(t, queue.NewJob{Kind: "k", Visibility: vis})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.claimOne(t)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	claim(time.Second) // the script compiled, the connection made
	short := claim(time.Second)
	long := claim(time.Hour)
	require.Less(t, long, short+16<<20, "a claim with an hour's lease allocated %d bytes, one with a second's %d", long, short)
}

// Batches at their cap (enqueue, claim and complete MaxBatch jobs, with
// labels) fit the embedded Redis's Lua too, whose registry (the stack
// unpack fills) is a fixed 5,120 slots.
func TestBatchesAtTheCapOnBoth(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, setup setupFunc) {
		b := setup(t)
		nj := make([]queue.NewJob, queue.MaxBatch)
		for i := range nj {
			nj[i] = queue.NewJob{Queue: b.queue, Kind: "k", Labels: []string{"a"}, Payload: []byte(`{"i":1}`)}
		}
		_, err := b.client.EnqueueBatch(b.ctx, nj)
		require.NoError(t, err)
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: queue.MaxBatch, Labels: []string{"a"}})
		require.NoError(t, err)
		require.Len(t, jobs, queue.MaxBatch)
		acks := make([]queue.Ack, len(jobs))
		for i, j := range jobs {
			acks[i] = queue.Ack{ID: j.ID, Token: j.Token}
		}
		_, errs, err := b.client.CompleteMany(b.ctx, b.queue, acks)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
		require.EqualValues(t, queue.MaxBatch, b.stats(t).CompletedTotal)
	})
}
