package queue_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// How a job's record is stored (see the record's doc in
// internal/store/layout.go): trailing empty fields left out, a small payload in the
// record, the default spec and the status as codes; and records of the
// earlier form, in full with the payload in the data hash, still read and
// run.
func contractRecords(t *testing.T, setup setupFunc) {
	// raw answers job id's stored record, and whether the data hash holds
	// a payload for it.
	raw := func(t *testing.T, b *testBundle, id string) (string, bool) {
		t.Helper()
		rec, err := b.rdb.HGet(b.ctx, b.key(queue.KeyJobs), id).Result()
		require.NoError(t, err)
		n, err := b.rdb.HExists(b.ctx, b.key(queue.KeyData), id).Result()
		require.NoError(t, err)
		return rec, n
	}

	// Every reader of a payload gets it, wherever it is stored: Get, a
	// page of the list, a claim, Dump, and a job that was retried and
	// completed keeps it.
	runs := func(t *testing.T, b *testBundle, j *queue.Job, payload json.RawMessage) {
		t.Helper()
		require.JSONEq(t, string(payload), string(b.get(t, j.ID).Payload))
		page, _, err := b.client.List(b.ctx, b.queue, queue.ListOptions{Status: queue.StatusScheduled})
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.JSONEq(t, string(payload), string(page[0].Payload))
		_, err = b.client.Reschedule(b.ctx, b.queue, j.ID, b.clock.Now())
		require.NoError(t, err)
		c := b.claimOne(t)
		require.Equal(t, j.ID, c.ID)
		require.JSONEq(t, string(payload), string(c.Payload))
		_, err = b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "again", RetryAt: b.clock.Now()})
		require.NoError(t, err)
		c = b.claimOne(t)
		require.JSONEq(t, string(payload), string(c.Payload))
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{Result: json.RawMessage(`"ok"`)}))
		got := b.get(t, j.ID)
		require.Equal(t, queue.StatusCompleted, got.Status)
		require.JSONEq(t, string(payload), string(got.Payload))
		require.JSONEq(t, `"ok"`, string(got.Result))
		raw, err := plumbing.Of(b.client).Dump(b.ctx, b.queue)
		d, _ := raw.(*queue.Dump)
		require.NoError(t, err)
		require.JSONEq(t, string(payload), string(d.Jobs[j.ID].Payload))
	}

	t.Run("ASmallPayloadIsKeptInTheRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		payload := json.RawMessage(`{"n":"` + strings.Repeat("x", queue.InlinePayloadMax-8) + `"}`)
		require.Len(t, payload, queue.InlinePayloadMax)
		j := b.enqueue(t, queue.NewJob{Kind: "k", Payload: payload, Delay: time.Hour})
		rec, inData := raw(t, b, j.ID)
		require.False(t, inData, "no field of its own in the data hash")
		require.True(t, strings.HasPrefix(rec, queue.RecInline+string(payload)+"\x00"), "%q", rec)
		f := strings.Split(strings.TrimPrefix(rec, queue.RecInline+string(payload)+"\x00"), "\x00")
		require.NotEmpty(t, f[len(f)-1], "no trailing empty field: %q", rec)
		require.Equal(t, "s", f[0], "the status's code")
		require.Equal(t, queue.SpecDefaultCode, f[2], "the default spec's code")
		runs(t, b, j, payload)
	})

	// enqueue.lua writes a new job's record directly, without the table
	// of fields the other scripts encode: each combination of the fields
	// a new job may carry reads back, stored without trailing empty
	// fields, and runs.
	t.Run("EveryFieldOfANewJobReadsBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		for mask := range 1 << 5 {
			nj := queue.NewJob{Kind: "k" + strconv.Itoa(mask), Payload: json.RawMessage(`{"m":` + strconv.Itoa(mask) + `}`)}
			if mask&1 != 0 {
				nj.Delay = time.Hour
			}
			if mask&2 != 0 {
				nj.IdempotencyKey = "idem-" + strconv.Itoa(mask)
			}
			if mask&4 != 0 {
				nj.ResultTTL = 3 * time.Minute
			}
			if mask&8 != 0 {
				nj.Labels = []string{"gpu", "eu"}
			}
			if mask&16 != 0 {
				nj.TraceParent = trace
			}
			j := b.enqueue(t, nj)
			got := b.get(t, j.ID)
			require.Equal(t, nj.Kind, got.Kind)
			require.JSONEq(t, string(nj.Payload), string(got.Payload))
			require.Equal(t, nj.IdempotencyKey, got.IdempotencyKey, "mask %b", mask)
			require.Equal(t, nj.ResultTTL, got.ResultTTL, "mask %b", mask)
			require.Equal(t, got.EnqueuedAt, got.RunAt.Add(-nj.Delay).Truncate(time.Millisecond), "mask %b", mask)
			require.Zero(t, got.Attempts)
			if mask&8 != 0 {
				require.Equal(t, []string{"eu", "gpu"}, got.Labels, "mask %b", mask)
			} else {
				require.Empty(t, got.Labels, "mask %b", mask)
			}
			if mask&16 != 0 {
				require.Equal(t, trace, got.TraceParent, "mask %b", mask)
			} else {
				require.Empty(t, got.TraceParent, "mask %b", mask)
			}
			want := queue.StatusPending
			if mask&1 != 0 {
				want = queue.StatusScheduled
			}
			require.Equal(t, want, got.Status, "mask %b", mask)
			rec, _ := raw(t, b, j.ID)
			require.False(t, strings.HasSuffix(rec, "\x00"), "no trailing empty field: %q", rec)
		}
	})

	t.Run("ALargerPayloadIsKeptInTheDataHash", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		payload := json.RawMessage(`{"n":"` + strings.Repeat("x", queue.InlinePayloadMax-7) + `"}`)
		require.Len(t, payload, queue.InlinePayloadMax+1)
		j := b.enqueue(t, queue.NewJob{Payload: payload, Delay: time.Hour})
		rec, inData := raw(t, b, j.ID)
		require.True(t, inData)
		require.False(t, strings.HasPrefix(rec, queue.RecInline), "%q", rec)
		runs(t, b, j, payload)
	})

	// run_at is stored as the ms after enqueued_at ("+<ms>") by enqueue,
	// as "" when it is enqueued_at, and attempts and fence as "" for 0:
	// every reader, Go and the scripts, reads them spelled out.
	t.Run("RunAtAttemptsAndFenceReadThroughTheirShortForms", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		later := b.enqueue(t, queue.NewJob{Delay: time.Hour})
		now := b.enqueue(t, queue.NewJob{})
		fieldsOf := func(id string) []string {
			rec, _ := raw(t, b, id)
			return strings.Split(rec[strings.IndexByte(rec, 0)+1:], "\x00")
		}
		f := fieldsOf(later.ID)
		require.Len(t, f, 5, "status, kind, spec, enqueued_at, run_at: %q", f)
		require.Equal(t, "+"+itoa(later.RunAt.Sub(later.EnqueuedAt).Milliseconds()), f[4])
		f = fieldsOf(now.ID)
		require.Len(t, f, 4, "status, kind, spec, enqueued_at: %q", f)
		for _, j := range []*queue.Job{later, now} {
			got := b.get(t, j.ID)
			require.Equal(t, j.RunAt, got.RunAt)
			require.Equal(t, j.EnqueuedAt, got.EnqueuedAt)
			require.Zero(t, got.Attempts)
			require.Zero(t, got.Fence)
		}
		c := b.claimOne(t)
		require.Equal(t, now.ID, c.ID)
		require.Equal(t, now.RunAt, c.RunAt)
		require.Equal(t, 1, c.Attempts)
		require.Equal(t, int64(1), c.Fence)
		// Promoted and claimed: the scripts read its run_at, and write it
		// back spelled out.
		b.clock.Advance(time.Hour + time.Second)
		c = b.claimOne(t)
		require.Equal(t, later.ID, c.ID)
		require.Equal(t, later.RunAt, c.RunAt)
		require.Equal(t, 1, c.Attempts)
		require.Equal(t, itoa(later.RunAt.UnixMilli()), fieldsOf(later.ID)[4])
		require.Equal(t, later.RunAt, b.get(t, later.ID).RunAt)
		res, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "x", Dead: true})
		require.NoError(t, err)
		require.Equal(t, queue.StatusDead, res.Status)
	})

	t.Run("ASpecOtherThanTheDefaultIsSpelledOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{MaxAttempts: 4, Delay: time.Hour})
		rec, _ := raw(t, b, j.ID)
		f := strings.Split(rec[strings.IndexByte(rec, 0)+1:], "\x00")
		require.True(t, strings.HasPrefix(f[2], "4|30000|"), "%q", rec)
		require.Equal(t, 4, b.get(t, j.ID).MaxAttempts)
	})

	// The default spec's code is read as that spec: its attempts, its
	// lease and its backoff.
	t.Run("TheDefaultSpecCodeReadsAsTheDefaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{})
		got := b.get(t, j.ID)
		require.Equal(t, queue.DefaultMaxAttempts, got.MaxAttempts)
		require.Equal(t, queue.DefaultVisibility, got.Visibility)
		require.Equal(t, queue.DefaultBackoff, got.Backoff)
		for attempt := 1; attempt <= queue.DefaultMaxAttempts; attempt++ {
			c := b.claimOne(t)
			requireSoonAfter(t, b.clock.Now().Add(queue.DefaultVisibility), c.LeaseUntil)
			res, err := b.client.Fail(b.ctx, b.queue, c.ID, c.Token, queue.FailOptions{Error: "no"})
			require.NoError(t, err)
			if attempt == queue.DefaultMaxAttempts {
				require.Equal(t, queue.StatusDead, res.Status, "dead after the default's attempts")
				break
			}
			require.Equal(t, queue.StatusScheduled, res.Status)
			lo, hi := queue.DefaultBackoff.Bounds(attempt)
			wait := res.RunAt.Sub(b.clock.Now())
			require.GreaterOrEqual(t, wait, lo-time.Millisecond, "the default backoff")
			require.LessOrEqual(t, wait, hi+time.Second)
			b.clock.Advance(hi + time.Second)
		}
	})

	// A record of the form written before: every field spelled out, the
	// status and spec in full, the payload in the data hash. It reads,
	// runs and keeps its payload once rewritten in the new form.
	t.Run("ARecordOfTheEarlierFormReadsAndRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{}) // the queue exists
		first := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, first.ID, first.Token, queue.CompleteOptions{}))
		const id = "0192f3c4a1b27c9e8d1f0a3b4c5d6e80"
		at := b.clock.Now().UnixMilli()
		f := make([]string, 23) // the record before compact records: 23 fields
		f[0], f[1], f[2] = "scheduled", "old", "3|30000|1000:2:3600000:0.2"
		f[3], f[4], f[5], f[6] = itoa(at), itoa(at+1000), "0", "0"
		require.NoError(t, b.rdb.HSet(b.ctx, b.key(queue.KeyJobs), id, strings.Join(f, "\x00")).Err())
		require.NoError(t, b.rdb.HSet(b.ctx, b.key(queue.KeyData), id, `{"old":true}`).Err())
		require.NoError(t, b.rdb.ZAdd(b.ctx, b.key(queue.KeySched), redis.Z{Score: float64(at + 1000), Member: id}).Err())
		j := b.get(t, id)
		require.Equal(t, queue.StatusScheduled, j.Status)
		require.Equal(t, at+1000, j.RunAt.UnixMilli())
		require.Equal(t, at, j.EnqueuedAt.UnixMilli())
		require.JSONEq(t, `{"old":true}`, string(j.Payload))
		require.Equal(t, queue.DefaultBackoff, j.Backoff)
		b.clock.Advance(2 * time.Second)
		c := b.claimOne(t)
		require.Equal(t, id, c.ID)
		require.JSONEq(t, `{"old":true}`, string(c.Payload))
		rec, inData := raw(t, b, id)
		require.True(t, inData, "its payload stays where it was")
		require.True(t, strings.HasPrefix(rec, "r\x00old\x00"), "rewritten in the new form: %q", rec)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, id, c.Token, queue.CompleteOptions{}))
		got := b.get(t, id)
		require.Equal(t, queue.StatusCompleted, got.Status)
		require.JSONEq(t, `{"old":true}`, string(got.Payload))
	})

	// A record shorter than the first version's (as stored now: trailing
	// empty fields left out) is read with those fields empty, by Go and
	// by the scripts.
	t.Run("AShortRecordReadsWithItsMissingFieldsEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{Delay: time.Hour})
		rec, _ := raw(t, b, j.ID)
		require.Less(t, strings.Count(rec, "\x00"), queue.NRecFirst-1, "%q", rec)
		got, err := queue.DecodeRecord(b.queue, j.ID, rec, "", "")
		require.NoError(t, err)
		require.Equal(t, queue.StatusScheduled, got.Status)
		require.JSONEq(t, `{}`, string(got.Payload))
		require.Empty(t, got.Token)
		require.Empty(t, got.IdempotencyKey)
		require.Nil(t, got.Labels)
		_, err = b.client.RunNow(b.ctx, b.queue, j.ID)
		require.NoError(t, err)
		c := b.claimOne(t)
		_, err = b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 5, Message: "m"}})
		require.NoError(t, err)
		require.Equal(t, "m", b.get(t, c.ID).Progress.Message)
		_, err = queue.DecodeRecord(b.queue, j.ID, "s\x00k", "", "")
		require.Error(t, err, "a record without a spec is malformed")
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
