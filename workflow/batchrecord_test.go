package workflow

import (
	"context"
	"encoding/json"
	"github.com/chronoq/chronoq/internal/plumbing"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// A child's last two parents end in one batch of records (one
// wf_record.lua call): the child is planned once, after both are
// recorded, and released once with both parents in its upstream; so it
// is when the releaser dies after recording the batch and records it
// again.
func TestBatchRecordFanInSingle(t *testing.T) {
	t.Parallel()
	runBatchRecord(t, func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) })
}

func TestBatchRecordFanInCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	runBatchRecord(t, func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) })
}

func runBatchRecord(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
	ctx := context.Background()
	for _, crashed := range []bool{false, true} {
		name := "Once"
		if crashed {
			name = "DiesAfterRecording"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, newRDB(t))
			w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "br-p"), node("b", "br-p"), node("c", "br-c", "a", "b")}})
			require.NoError(t, err)
			e.r.Pass(ctx) // nothing ended yet
			jobs, err := e.q.Claim(ctx, "br-p", queue.ClaimOptions{Max: 10})
			require.NoError(t, err)
			require.Len(t, jobs, 2)
			for _, j := range jobs {
				require.NoError(t, e.q.Complete(ctx, "br-p", j.ID, j.Token, queue.CompleteOptions{Result: json.RawMessage(`{"node":"` + j.Workflow.Node + `"}`)}))
			}

			// The script itself: both ends in one call answer one release
			// of c, whose upstream holds both.
			es, _, _, err := plumbing.Of(e.q).ReadOutbox(ctx, "br-p", "0", 100)
			require.NoError(t, err)
			require.Len(t, es, 2, "both ends in one page of the outbox")
			ends := make([]plumbing.NodeEnd, len(es))
			for i, x := range es {
				up, brief := endJSON(x)
				ends[i] = plumbing.NodeEnd{Node: x.Refs[0].Node, Gen: x.Refs[0].Gen, Outcome: x.Outcome, Up: up, Brief: brief}
			}
			if crashed {
				// recorded before, by a releaser that died: recorded again
				// (nothing changes), planned the same
				_, _, _, err := plumbing.Of(e.q).RecordNodeEnds(ctx, w.ID, ends, e.wf.ret)
				require.NoError(t, err)
			}
			codes, _, acts, err := plumbing.Of(e.q).RecordNodeEnds(ctx, w.ID, ends, e.wf.ret)
			require.NoError(t, err)
			require.Equal(t, []int{1, 1}, codes)
			require.Len(t, acts, 1, "c planned once")
			require.Equal(t, "release", acts[0].Mode)
			require.Equal(t, "c", acts[0].Node)
			var up map[string]upstreamEntry
			require.NoError(t, json.Unmarshal([]byte(acts[0].Upstream), &up))
			require.Equal(t, []string{"a", "b"}, keysOf(up))
			if !crashed {
				// an end of another gen is stale (2), a node or a workflow
				// that is not there -1; a batch holds 1 to MaxBatch (the
				// queue's contract: checked once, not per subtest)
				stale, none := ends[0], ends[1]
				stale.Gen++
				none.Node = "zz"
				codes, _, acts, err = plumbing.Of(e.q).RecordNodeEnds(ctx, w.ID, []plumbing.NodeEnd{stale, none}, e.wf.ret)
				require.NoError(t, err)
				require.Equal(t, []int{2, -1}, codes)
				require.Empty(t, acts)
				codes, _, _, err = plumbing.Of(e.q).RecordNodeEnds(ctx, "00000000000000000000000000000000", ends, e.wf.ret)
				require.NoError(t, err)
				require.Equal(t, []int{-1, -1}, codes)
				_, _, _, err = plumbing.Of(e.q).RecordNodeEnds(ctx, w.ID, nil, e.wf.ret)
				require.ErrorIs(t, err, queue.ErrInvalid)
				_, _, _, err = plumbing.Of(e.q).RecordNodeEnds(ctx, w.ID, make([]plumbing.NodeEnd, queue.MaxBatch+1), e.wf.ret)
				require.ErrorIs(t, err, queue.ErrInvalid)
			}

			// The releaser: one pass reads both entries, records them in
			// one call (one workflow: no later batch), dies after it when
			// crashed (the next pass does it all again), and releases c
			// once.
			steps := map[string]int{}
			dieAt(t, e.r, func(s string) bool {
				steps[s]++
				return crashed && s == "recorded" && steps[s] == 1
			})
			e.r.Pass(ctx)
			if crashed {
				e.r.Pass(ctx) // the entries left are read again
			}
			require.Zero(t, steps["ref"], "one workflow's ends: one batch")
			if crashed {
				require.Equal(t, 2, steps["recorded"], "died after recording, then recorded again")
			} else {
				require.Equal(t, 1, steps["recorded"])
			}
			left, err := plumbing.Of(e.q).OutboxDue(ctx, 1)
			require.NoError(t, err)
			require.Empty(t, left, "both entries acked")
			cj, err := e.q.Claim(ctx, "br-c", queue.ClaimOptions{Max: 10})
			require.NoError(t, err)
			require.Len(t, cj, 1)
			require.Equal(t, 1, e.count(cj[0].ID, "release"), "c released once")
			got := upstreamOf(t, cj[0])
			require.Equal(t, []string{"a", "b"}, keysOf(got))
			for _, n := range []string{"a", "b"} {
				require.Equal(t, queue.StatusCompleted, got[n].Status)
				require.JSONEq(t, `{"node":"`+n+`"}`, string(got[n].Result))
			}
		})
	}
}
