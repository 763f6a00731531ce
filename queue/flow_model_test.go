package queue_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// TestFlowKeysKeepTheirBooks runs a seeded random mix of every operation
// that moves a keyed job (enqueue now and later, claim, complete, fail
// with a retry or to the dead set, release, cancel, reschedule, run now,
// a lapsed lease reclaimed, limits and rates changed) and checks after each step
// that the flow keys' sets say what the jobs' records say: a key's
// pending and processing jobs are exactly its members of fpend and frun,
// fcount counts them, no key is over its max in flight, and every key
// that has a pending job and room is in the ring or waits for a token (a
// key left out of both would strand its jobs).
func TestFlowKeysKeepTheirBooks(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runFlowModel(t, seed)
		})
	}
}

func runFlowModel(t *testing.T, seed uint64) {
	b := newBundle(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
	rng := rand.New(rand.NewPCG(seed, 7))
	keys := []string{"a", "b", "c", "d"}
	caps := map[string]int{"a": 3, "b": 2, "c": 2, "d": 2}
	allowed := map[string]int{}
	_, err := b.client.SetFlowLimits(b.ctx, b.queue, queue.FlowLimits{MaxInFlight: 2})
	require.NoError(t, err)
	_, err = b.client.SetFlowOverride(b.ctx, b.queue, queue.FlowOverride{Key: "a", MaxInFlight: 3, Weight: 2})
	require.NoError(t, err)

	var ids []string                // every job made
	held := map[string]*queue.Job{} // claimed, by id, with its token
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	heldIDs := func() []string {
		out := make([]string, 0, len(held))
		for id := range held {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}

	for step := range 300 {
		op := rng.IntN(12)
		switch {
		case op < 3: // enqueue, now or a little later
			nj := queue.NewJob{Queue: b.queue, Kind: "k", FlowKey: pick(keys)}
			if rng.IntN(3) == 0 {
				nj.Delay = time.Duration(1+rng.IntN(3)) * time.Second
			}
			e, err := b.client.Enqueue(b.ctx, nj)
			require.NoError(t, err)
			ids = append(ids, e.Job.ID)
		case op < 5: // claim
			jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: 1 + rng.IntN(5)})
			require.NoError(t, err)
			for _, j := range jobs {
				held[j.ID] = j
			}
		case op < 7 && len(held) > 0: // complete
			j := held[pick(heldIDs())]
			require.NoError(t, b.client.Complete(b.ctx, b.queue, j.ID, j.Token, queue.CompleteOptions{}))
			delete(held, j.ID)
		case op == 7 && len(held) > 0: // fail: retry now, later, or die
			j := held[pick(heldIDs())]
			o := queue.FailOptions{Error: "x", Dead: rng.IntN(4) == 0}
			if rng.IntN(2) == 0 {
				o.RetryAt = b.clock.Now()
			}
			_, err := b.client.Fail(b.ctx, b.queue, j.ID, j.Token, o)
			require.NoError(t, err)
			delete(held, j.ID)
		case op == 8 && len(held) > 0: // release
			j := held[pick(heldIDs())]
			require.NoError(t, b.client.Release(b.ctx, b.queue, j.ID, j.Token))
			delete(held, j.ID)
		case op == 9 && len(ids) > 0: // cancel, reschedule or run now any job
			id := pick(ids)
			var err error
			switch rng.IntN(3) {
			case 0:
				_, err = b.client.Cancel(b.ctx, b.queue, id)
			case 1:
				_, err = b.client.Reschedule(b.ctx, b.queue, id, b.clock.Now().Add(time.Second))
			default:
				_, err = b.client.RunNow(b.ctx, b.queue, id)
			}
			if err != nil && !errors.Is(err, queue.ErrNotFound) {
				require.ErrorIs(t, err, queue.ErrConflict, "step %d", step) // not in a state that allows it
			}
		case op == 10: // time passes; now and then past every lease
			d := time.Duration(rng.IntN(2000)) * time.Millisecond
			if rng.IntN(8) == 0 {
				d = queue.DefaultVisibility + time.Second
				held = map[string]*queue.Job{} // their workers are gone
			}
			b.clock.Advance(d)
			_, err := b.client.Reclaim(b.ctx, b.queue)
			require.NoError(t, err)
		case op == 11: // the limits change
			if rng.IntN(2) == 0 {
				s, err := b.client.FlowKey(b.ctx, b.queue, "b")
				require.NoError(t, err)
				allowed["b"] = int(s.InFlight)
				caps["b"] = 1 + rng.IntN(3)
				_, err = b.client.SetFlowOverride(b.ctx, b.queue, queue.FlowOverride{Key: "b", MaxInFlight: caps["b"]})
				require.NoError(t, err)
			} else { // key c gets a rate, or loses it
				o := queue.FlowOverride{Key: "c", MaxInFlight: caps["c"]}
				if rng.IntN(2) == 0 {
					o.Rate, o.Burst = 2, 1
				}
				_, err := b.client.SetFlowOverride(b.ctx, b.queue, o)
				require.NoError(t, err)
			}
		}
		checkFlowBooks(t, b, ids, caps, allowed, step)
	}
}

// checkFlowBooks holds the flow keys' sets to the jobs' records.
// allowed is, by key, how many of its jobs may be processing beside its
// max after a lower max: those claimed before it (they finish).
func checkFlowBooks(t *testing.T, b *testBundle, ids []string, caps, allowed map[string]int, step int) {
	t.Helper()
	pending, running := map[string][]string{}, map[string][]string{}
	if len(ids) > 0 {
		// The records as stored, in one call: status code first (after an
		// inline payload), the flow key last (see store.RecFields).
		recs, err := b.rdb.HMGet(b.ctx, b.key("jobs"), ids...).Result()
		require.NoError(t, err)
		for i, r := range recs {
			rec, _ := r.(string)
			if rec == "" || rec[0] == '-' {
				continue // gone, or a tombstone
			}
			if rec[0] == 2 {
				_, rec, _ = strings.Cut(rec, "\x00")
			}
			f := strings.Split(rec, "\x00")
			flow := ""
			if len(f) > store.RFlow {
				flow = f[store.RFlow]
			}
			switch f[store.RStatus] {
			case "p":
				pending[flow] = append(pending[flow], ids[i])
			case "r":
				running[flow] = append(running[flow], ids[i])
			}
		}
	}
	members := func(name string) map[string][]string {
		all, err := b.rdb.ZRange(b.ctx, b.key(name), 0, -1).Result()
		require.NoError(t, err)
		out := map[string][]string{}
		for _, m := range all {
			if k, id, ok := strings.Cut(m, "\x00"); ok {
				out[k] = append(out[k], id)
			}
		}
		return out
	}
	sorted := func(m map[string][]string) map[string][]string {
		for k := range m {
			slices.Sort(m[k])
		}
		return m
	}
	require.Equal(t, sorted(pending), members("fpend"), "step %d: fpend is the keys' pending jobs", step)
	require.Equal(t, sorted(running), members("frun"), "step %d: frun is the keys' processing jobs", step)

	counts, err := b.rdb.ZRangeWithScores(b.ctx, b.key("fcount"), 0, -1).Result()
	require.NoError(t, err)
	got := map[string]int{}
	for _, z := range counts {
		if k := z.Member.(string); k != "\x01" {
			got[k] = int(z.Score)
		}
	}
	want := map[string]int{}
	for k, v := range pending {
		want[k] += len(v)
	}
	for k, v := range running {
		want[k] += len(v)
	}
	require.Equal(t, want, got, "step %d: fcount counts each key's jobs, and forgets a key with none", step)

	ring, err := b.rdb.ZRange(b.ctx, b.key("fring"), 0, -1).Result()
	require.NoError(t, err)
	wait, err := b.rdb.ZRange(b.ctx, b.key("fwait"), 0, -1).Result()
	require.NoError(t, err)
	for k := range caps {
		// A lowered max lets the jobs over it finish: no claim adds to them.
		require.LessOrEqual(t, len(running[k]), max(caps[k], allowed[k]), "step %d: key %s over its max in flight", step, k)
		allowed[k] = min(allowed[k], len(running[k]))
		ready := len(pending[k]) > 0 && len(running[k]) < caps[k]
		if ready {
			require.True(t, slices.Contains(ring, k) || slices.Contains(wait, k),
				"step %d: key %s has pending jobs and room but is neither in the ring nor waiting", step, k)
		}
		if slices.Contains(ring, k) {
			require.NotEmpty(t, pending[k], "step %d: key %s is in the ring with nothing pending", step, k)
		}
	}
}
