package queue_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// Worker labels: a claim receives only jobs whose labels are all among the
// claimer's; every path that makes a job pending again keeps it on its
// label set's list.
func contractLabels(t *testing.T, setup setupFunc) {
	// claimAs claims up to n jobs of the bundle's queue as a claimer
	// with labels.
	claimAs := func(t *testing.T, b *testBundle, n int, labels ...string) []*queue.Job {
		t.Helper()
		jobs, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Max: n, Labels: labels})
		require.NoError(t, err)
		return jobs
	}
	ids := func(jobs []*queue.Job) []string {
		out := make([]string, len(jobs))
		for i, j := range jobs {
			out[i] = j.ID
		}
		return out
	}

	t.Run("LabelsMatchAsSubsets", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		gpu := b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}})
		both := b.enqueue(t, queue.NewJob{Labels: []string{"linux", "gpu", "gpu"}})
		plain := b.enqueue(t, queue.NewJob{})
		require.Equal(t, []string{"gpu"}, gpu.Labels)
		require.Equal(t, []string{"gpu", "linux"}, both.Labels, "sorted, without duplicates")
		require.Nil(t, plain.Labels)
		require.Equal(t, []string{"gpu", "linux"}, b.get(t, both.ID).Labels, "as stored")

		require.Equal(t, []string{plain.ID}, ids(claimAs(t, b, 10)), "a claimer without labels takes only jobs without")
		require.Empty(t, claimAs(t, b, 10, "linux"), "linux alone is not gpu+linux")
		require.Equal(t, []string{gpu.ID}, ids(claimAs(t, b, 10, "gpu")), "gpu is not gpu+linux")
		got := claimAs(t, b, 10, "x86", "linux", "gpu")
		require.Equal(t, []string{both.ID}, ids(got), "a superset takes it")
		require.Equal(t, []string{"gpu", "linux"}, got[0].Labels)
		sets, err := plumbing.Of(b.client).LabelSets(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, [][]string{{"gpu"}, {"gpu", "linux"}}, sets)
	})

	t.Run("UnmatchedJobsWaitForTheRightWorker", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		arm := b.enqueue(t, queue.NewJob{Labels: []string{"arch=arm64"}})
		require.Empty(t, claimAs(t, b, 10))
		require.Empty(t, claimAs(t, b, 10, "arch=amd64", "gpu"))
		ok, err := plumbing.Of(b.client).WaitClaimable(b.ctx, b.queue, time.Millisecond, []string{"gpu"})
		require.NoError(t, err)
		require.False(t, ok, "nothing a gpu claimer may take")
		ok, err = plumbing.Of(b.client).WaitClaimable(b.ctx, b.queue, time.Millisecond, []string{"arch=arm64"})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(1), b.stats(t).Pending, "pending counts every label set's list")
		listed, _, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusPending})
		require.NoError(t, err)
		require.Equal(t, []string{arm.ID}, ids(listed))
		raw, err := plumbing.Of(b.client).Dump(b.ctx, b.queue)
		d, _ := raw.(*queue.Dump)
		require.NoError(t, err)
		require.Equal(t, []string{arm.ID}, d.Pending)
		require.Equal(t, []string{arm.ID}, ids(claimAs(t, b, 10, "arch=arm64")))
		require.Zero(t, b.stats(t).Pending)
	})

	t.Run("PendingListingsPageThroughEveryList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var want []string // the queue's own list first, then each set's in the order the queue saw them
		byList := map[string][]string{}
		for i := range 9 {
			labels := [][]string{nil, {"gpu"}, {"arm"}}[i%3]
			byList[strings.Join(labels, ",")] = append(byList[strings.Join(labels, ",")], b.enqueue(t, queue.NewJob{Labels: labels}).ID)
		}
		for _, l := range []string{"", "gpu", "arm"} {
			want = append(want, byList[l]...)
		}
		var got []string
		cursor := ""
		for page := 0; ; page++ {
			require.Less(t, page, 10)
			jobs, next, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusPending, Limit: 2, Cursor: cursor})
			require.NoError(t, err)
			got = append(got, ids(jobs)...)
			if next == "" {
				break
			}
			cursor = next
		}
		require.Equal(t, want, got)
	})

	t.Run("AClaimTakesTheOldestOfItsListsFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var want []string
		for i := range 6 {
			var labels []string
			switch i % 3 {
			case 1:
				labels = []string{"gpu"}
			case 2:
				labels = []string{"big", "gpu"}
			}
			want = append(want, b.enqueue(t, queue.NewJob{Labels: labels}).ID)
		}
		var got []string
		for range 6 {
			got = append(got, ids(claimAs(t, b, 1, "big", "gpu"))...)
		}
		require.Equal(t, want, got, "one at a time, in enqueue order across the lists")
	})

	t.Run("EveryPathBackToPendingKeepsTheLabels", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// onlyGPU checks that the job is pending again for a gpu claimer
		// only, and claims it.
		onlyGPU := func(t *testing.T, id, path string) *queue.Job {
			t.Helper()
			require.Equal(t, queue.StatusPending, b.get(t, id).Status, path)
			require.Empty(t, claimAs(t, b, 10, "cpu"), path+": not for a claimer without gpu")
			got := claimAs(t, b, 10, "gpu")
			require.Equal(t, []string{id}, ids(got), path)
			return got[0]
		}
		j := b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}, MaxAttempts: 10, Visibility: time.Second})
		c := onlyGPU(t, j.ID, "enqueue")

		_, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now().Add(-time.Second)})
		require.NoError(t, err)
		c = onlyGPU(t, j.ID, "fail, retried now")

		require.NoError(t, b.client.Release(b.ctx, b.queue, c.ID, c.Token))
		onlyGPU(t, j.ID, "release") // its lease lapses below

		b.clock.Advance(2 * time.Second) // the lease lapses
		back, err := b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, []string{j.ID}, back)
		c = onlyGPU(t, j.ID, "reclaim")

		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
		require.NoError(t, err)
		n, err := b.client.RequeueDead(b.ctx, b.queue, "")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		c = onlyGPU(t, j.ID, "requeue dead")

		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
		require.NoError(t, err)
		_, err = b.client.RunNow(b.ctx, b.queue, j.ID)
		require.NoError(t, err)
		c = onlyGPU(t, j.ID, "run now of a dead job")

		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now().Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, queue.StatusScheduled, b.get(t, j.ID).Status)
		_, err = b.client.RunNow(b.ctx, b.queue, j.ID)
		require.NoError(t, err)
		c = onlyGPU(t, j.ID, "run now of a scheduled job")

		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now().Add(time.Minute)})
		require.NoError(t, err)
		_, err = b.client.Reschedule(b.ctx, b.queue, j.ID, b.clock.Now().Add(-time.Second))
		require.NoError(t, err)
		c = onlyGPU(t, j.ID, "reschedule to now")

		// Promoted by the promoter, then by a claim (of a claimer that
		// cannot take it: it promotes it all the same, for the right one).
		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now().Add(time.Minute)})
		require.NoError(t, err)
		b.clock.Advance(time.Minute)
		moved, _, err := b.client.Promote(b.ctx, b.queue, 0)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		c = onlyGPU(t, j.ID, "promote")

		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", RetryAt: b.clock.Now().Add(time.Minute)})
		require.NoError(t, err)
		b.clock.Advance(time.Minute)
		require.Empty(t, claimAs(t, b, 10, "cpu"))
		onlyGPU(t, j.ID, "promoted by a claim")

		// A pending labeled job canceled leaves a stale id in its list:
		// counted out, dropped by the next claim.
		k := b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}})
		_, err = b.client.Cancel(b.ctx, b.queue, k.ID)
		require.NoError(t, err)
		require.Zero(t, b.stats(t).Pending)
		require.Empty(t, claimAs(t, b, 10, "gpu"))
		require.Zero(t, b.stats(t).Pending)
	})

	t.Run("ScheduledLabeledJobsArePromotedToTheirList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		later := b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}, Delay: time.Minute})
		require.Equal(t, queue.StatusScheduled, later.Status)
		b.clock.Advance(time.Minute)
		got := claimAs(t, b, 10, "gpu")
		require.Equal(t, []string{later.ID}, ids(got), "the claim promotes it and takes it")
	})

	t.Run("AClaimThatPromotesAJobItCannotTakeWakesItsClaimers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}, Delay: 5 * time.Second}) // due within the wait
		_, wake := queue.LabelSetKeys(b.ns, b.queue, "gpu")
		lastWake := func() string {
			e, err := b.rdb.XRevRangeN(b.ctx, wake, "+", "-", 1).Result()
			require.NoError(t, err)
			require.Len(t, e, 1, "the stream keeps its last entry")
			return e[0].ID
		}
		waited := make(chan bool, 1)
		go func() {
			ok, err := plumbing.Of(b.client).WaitClaimable(b.ctx, b.queue, 20*time.Second, []string{"gpu"})
			assert.NoError(t, err)
			waited <- ok
		}()
		require.Eventually(t, func() bool {
			v, err := b.rdb.HGet(b.ctx, b.key(queue.KeyMeta), "waiting_until").Int64()
			return err == nil && v > b.clock.Now().UnixMilli()
		}, 10*time.Second, time.Millisecond, "a gpu claimer waits")
		before := lastWake()
		b.clock.Advance(5 * time.Second)
		require.Empty(t, claimAs(t, b, 10, "cpu"), "a claim that cannot take it promotes it")
		require.Equal(t, queue.StatusPending, b.get(t, j.ID).Status)
		require.NotEqual(t, before, lastWake(), "and wakes the gpu set's claimers")
		require.True(t, <-waited)
		require.Equal(t, []string{j.ID}, ids(claimAs(t, b, 10, "gpu")))
	})

	t.Run("AStaleViewOfTheLabelSetsIsReadAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Empty(t, claimAs(t, b, 10, "gpu")) // this client knows the queue has no sets
		other, err := queue.NewClient(queue.Config{Redis: b.newRDB(t), Namespace: b.ns, Clock: b.clock, FollowClock: true})
		require.NoError(t, err)
		defer func() { _ = other.Close() }()
		e, err := other.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", Labels: []string{"gpu"}})
		require.NoError(t, err)
		require.Equal(t, int64(1), b.stats(t).Pending)
		require.Equal(t, []string{e.Job.ID}, ids(claimAs(t, b, 10, "gpu")))
	})

	t.Run("DistinctLabelSetsAreCapped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i := range queue.MaxLabelSets {
			b.enqueue(t, queue.NewJob{Labels: []string{fmt.Sprintf("l%d", i)}})
		}
		_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", Labels: []string{"one-more"}})
		require.ErrorIs(t, err, queue.ErrTooManyLabelSets)
		require.Contains(t, err.Error(), "one-more")
		var fe *queue.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "labels", fe.Field)
		_, err = b.client.EnqueueBatch(b.ctx, []queue.NewJob{{Queue: b.queue, Kind: "k"}, {Queue: b.queue, Kind: "k", Labels: []string{"two-more"}}})
		require.ErrorIs(t, err, queue.ErrTooManyLabelSets, "a batch is refused whole")
		require.ErrorAs(t, err, &fe)
		require.Equal(t, 1, fe.Index, "naming the job")
		require.Equal(t, int64(queue.MaxLabelSets), b.stats(t).Pending, "nothing of the refused batch was written")
		b.enqueue(t, queue.NewJob{Labels: []string{"l7"}}) // a set the queue has
		b.enqueue(t, queue.NewJob{})
		require.Len(t, claimAs(t, b, 10, "l7"), 3)
	})

	t.Run("BadLabelsAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, labels := range [][]string{{""}, {"a b"}, {"a,b"}, {"é"}, {"a\x00"}, {strings.Repeat("l", queue.MaxLabelBytes+1)},
			make([]string, queue.MaxJobLabels+1)} {
			for i := range labels {
				if labels[i] == "" && len(labels) > 1 {
					labels[i] = fmt.Sprintf("l%d", i)
				}
			}
			_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: b.queue, Kind: "k", Labels: labels})
			require.ErrorIs(t, err, queue.ErrInvalidLabels, "%q", labels)
			require.ErrorIs(t, err, queue.ErrInvalid)
			var fe *queue.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "labels", fe.Field)
		}
		_, err := b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Labels: []string{"a|b"}})
		require.ErrorIs(t, err, queue.ErrInvalidLabels)
		_, err = b.client.Claim(b.ctx, b.queue, queue.ClaimOptions{Labels: make([]string, queue.MaxClaimLabels+1)})
		require.ErrorIs(t, err, queue.ErrInvalidLabels)
		require.Equal(t, strings.Repeat("l", queue.MaxLabelBytes), b.enqueue(t, queue.NewJob{Labels: []string{strings.Repeat("l", queue.MaxLabelBytes)}}).Labels[0])
	})

	t.Run("AJobRecordWrittenBeforeLabelsReadsWithout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{}) // the queue exists
		first := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, first.ID, first.Token, queue.CompleteOptions{}))
		const id = "0192f3c4a1b27c9e8d1f0a3b4c5d6e7f"
		spec := queue.EncodeSpec(3, 30*time.Second, queue.DefaultBackoff.Encode())
		require.NoError(t, b.rdb.HSet(b.ctx, b.key(queue.KeyJobs), id, queue.FirstRecord("old", spec, b.clock.Now().UnixMilli())).Err())
		require.NoError(t, b.rdb.HSet(b.ctx, b.key(queue.KeyData), id, `{"old":true}`).Err())
		require.NoError(t, b.rdb.LPush(b.ctx, b.key(queue.KeyPending), id).Err())
		j := b.get(t, id)
		require.Equal(t, "old", j.Kind)
		require.Nil(t, j.Labels)
		got := claimAs(t, b, 10)
		require.Equal(t, []string{id}, ids(got), "a claimer without labels takes it")
		require.Nil(t, got[0].Labels)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, id, got[0].Token, queue.CompleteOptions{}))
	})

	t.Run("DeletingTheQueueDeletesItsLabelSets", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}})
		list, wake := queue.LabelSetKeys(b.ns, b.queue, "gpu")
		require.Equal(t, int64(2), b.rdb.Exists(b.ctx, list).Val()+b.rdb.Exists(b.ctx, wake).Val())
		require.NoError(t, b.client.DeleteQueue(b.ctx, b.queue, false))
		require.Zero(t, b.rdb.Exists(b.ctx, list).Val()+b.rdb.Exists(b.ctx, wake).Val()+b.rdb.Exists(b.ctx, b.key(queue.KeyLsets)).Val())
		// Made anew, with no label set until a job requires one.
		plain := b.enqueue(t, queue.NewJob{})
		sets, err := plumbing.Of(b.client).LabelSets(b.ctx, b.queue)
		require.NoError(t, err)
		require.Empty(t, sets)
		j := b.enqueue(t, queue.NewJob{Labels: []string{"gpu"}})
		require.Equal(t, []string{plain.ID, j.ID}, ids(claimAs(t, b, 10, "gpu")))
	})
}
