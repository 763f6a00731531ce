package workflow

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/testutil"
)

// A releaser that dies after recording the end that ends a workflow, or
// after applying what it needs, before the outbox entry's ack, leaves the
// entry: the next records it again and its ack writes the workflow.ended
// event, once, to the hooks outbox of the queue of that end's job. On one
// Redis and on a Redis Cluster.
func TestWorkflowEndedEventOnceAcrossCrashes(t *testing.T) {
	t.Parallel()
	for name, newRDB := range map[string]func(t *testing.T) redis.UniversalClient{
		"single":  func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) },
		"cluster": func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) },
	} {
		for _, step := range []string{"recorded", "applied"} {
			t.Run(name+"/DiesAfter_"+step, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				rdb := newRDB(t)
				e := newEnv(t, rdb)
				for _, q := range []string{"he-a", "he-b"} {
					require.NoError(t, plumbing.Of(e.q).SetSettings(ctx, q, map[string]string{store.SettingHooks: "1"}))
				}
				w, err := e.wf.Enqueue(ctx, Spec{Nodes: []Node{node("a", "he-a"), node("b", "he-b", "a")}})
				require.NoError(t, err)
				// Every other handling of a batch dies at step: each end's,
				// the one that ends the workflow too, dies once first.
				calls, crashes := 0, 0
				dieAt(t, e.r, func(s string) bool {
					if s != step {
						return false
					}
					calls++
					if calls%2 == 1 {
						crashes++
						return true
					}
					return false
				})
				claimed := e.drive(ctx, []string{"he-a", "he-b"}, echo)
				require.Len(t, claimed, 2)
				require.Equal(t, 2, crashes)
				e.r.Pass(ctx)
				got := e.requireStatus(ctx, w.ID, StatusCompleted)

				ns := plumbing.Of(e.q).Namespace()
				for q, want := range map[string]int{"he-a": 0, "he-b": 1} {
					ms, err := rdb.XRange(ctx, store.QueueKeys(ns, q).Hooks, "("+store.HookSentinelID, "+").Result()
					require.NoError(t, err)
					var ended []redis.XMessage
					for _, m := range ms {
						if m.Values[store.HookType] == "wf_ended" {
							ended = append(ended, m)
						}
					}
					require.Len(t, ended, want, "workflow.ended events in %s's hooks outbox", q)
					if want == 1 {
						v := ended[0].Values
						require.Equal(t, w.ID, v[store.HookWorkflow])
						require.Equal(t, "completed", v[store.HookWFStatus])
						require.Equal(t, "completed", v[store.HookStatus])
						require.Equal(t, got.Nodes[1].JobID, v[store.HookID])
						require.Equal(t, "step", v[store.HookKind])
						require.Equal(t, strconv.FormatInt(got.EndedAt.UnixMilli(), 10), v[store.HookAt])
					}
				}
			})
		}
	}
}
