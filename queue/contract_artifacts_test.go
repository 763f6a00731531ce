package queue_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// contractArtifacts holds the contract of what a running job leaves beside
// its result: artifacts, its log and its progress, each fenced by the
// claim token, capped, and deleted with the job.
func contractArtifacts(t *testing.T, setup setupFunc) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }

	t.Run("ArtifactsAttachedFencedAndWithComplete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{})
		arts, err := b.client.Artifacts(b.ctx, b.queue, j.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{}`, string(arts))
		require.ErrorIs(t, b.client.AttachArtifacts(b.ctx, b.queue, j.ID, "t", map[string]json.RawMessage{"a": raw("1")}),
			queue.ErrLeaseLost, "a pending job has no claim")
		c := b.claimOne(t)
		require.NoError(t, b.client.AttachArtifacts(b.ctx, b.queue, c.ID, c.Token,
			map[string]json.RawMessage{"a": raw(`1`), "report.v1": raw(`{"s": "x\"}]", "n": [1, {"k": null}]}`)}))
		require.ErrorIs(t, b.client.AttachArtifacts(b.ctx, b.queue, c.ID, "stale",
			map[string]json.RawMessage{"a": raw("99"), "z": raw("0")}), queue.ErrLeaseLost)
		// A name given again replaces its value; the others stay.
		require.NoError(t, b.client.AttachArtifacts(b.ctx, b.queue, c.ID, c.Token,
			map[string]json.RawMessage{"a": raw(`"two"`), "b": raw(`[true,false]`)}))
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{
			Result: raw(`{"ok":true}`), Artifacts: map[string]json.RawMessage{"c": raw(`-1.5e3`), "b": raw(`"b2"`)}}))
		want := `{"a":"two","b":"b2","c":-1.5e3,"report.v1":{"s":"x\"}]","n":[1,{"k":null}]}}`
		arts, err = b.client.Artifacts(b.ctx, b.queue, c.ID)
		require.NoError(t, err)
		require.JSONEq(t, want, string(arts))
		got := b.get(t, c.ID)
		require.Equal(t, queue.StatusCompleted, got.Status)
		require.JSONEq(t, want, string(got.Artifacts))
		require.JSONEq(t, `{"ok":true}`, string(got.Result))
		// Completed: no more artifacts; a repeated complete changes nothing.
		require.ErrorIs(t, b.client.AttachArtifacts(b.ctx, b.queue, c.ID, c.Token,
			map[string]json.RawMessage{"d": raw("1")}), queue.ErrLeaseLost)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{
			Artifacts: map[string]json.RawMessage{"e": raw("1")}}))
		arts, err = b.client.Artifacts(b.ctx, b.queue, c.ID)
		require.NoError(t, err)
		require.JSONEq(t, want, string(arts))
		_, err = b.client.Artifacts(b.ctx, b.queue, "nosuchjob")
		require.ErrorIs(t, err, queue.ErrNotFound)
	})

	// The script merges artifacts by scanning the stored JSON: values of
	// every shape, with quotes, escapes and brackets in strings, survive
	// any number of merges unchanged.
	t.Run("ArtifactValuesSurviveMerges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		values := []string{`{}`, `[]`, `""`, `"a\\"`, `"q\"}],{["`, `"\u00e9\n\t"`, `0`, `-1.25e-3`, `true`, `false`, `null`,
			`[[],{},[{"a":[1,{"b":"]}"}]}]]`, `{"k":{"k":{"k":["\\\"",1e2]}}}`, `"é 😀"`, `[1,2,3]`}
		want := map[string]any{}
		for round := range 2 {
			for i, v := range values {
				name := fmt.Sprintf("v%d", i)
				if round == 1 {
					v = values[len(values)-1-i] // replace each with another shape
				}
				require.NoError(t, b.client.AttachArtifacts(b.ctx, b.queue, c.ID, c.Token, map[string]json.RawMessage{name: raw(v)}), v)
				var x any
				require.NoError(t, json.Unmarshal([]byte(v), &x))
				want[name] = x
				arts, err := b.client.Artifacts(b.ctx, b.queue, c.ID)
				require.NoError(t, err)
				var got map[string]any
				require.NoError(t, json.Unmarshal(arts, &got), "%s", arts)
				require.Equal(t, want, got)
			}
		}
	})

	t.Run("ArtifactCapsRefuseAndChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		attach := func(arts map[string]json.RawMessage) error {
			return b.client.AttachArtifacts(b.ctx, b.queue, c.ID, c.Token, arts)
		}
		var fe *queue.FieldError
		require.ErrorIs(t, attach(map[string]json.RawMessage{"bad/name": raw("1")}), queue.ErrInvalid)
		require.ErrorIs(t, attach(map[string]json.RawMessage{strings.Repeat("n", queue.MaxArtifactNameBytes+1): raw("1")}), queue.ErrInvalid)
		require.ErrorIs(t, attach(map[string]json.RawMessage{"x": raw("{")}), queue.ErrInvalid)
		err := attach(map[string]json.RawMessage{"big": raw(`"` + strings.Repeat("x", queue.MaxArtifactBytes) + `"`)})
		require.ErrorIs(t, err, queue.ErrPayloadTooLarge)
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "artifacts.big", fe.Field)
		many := map[string]json.RawMessage{}
		for i := range queue.MaxArtifacts + 1 {
			many[fmt.Sprintf("a%d", i)] = raw("1")
		}
		require.ErrorIs(t, attach(many), queue.ErrPayloadTooLarge)
		// One at a time, up to the cap: the next is refused by the script.
		for i := range queue.MaxArtifacts {
			require.NoError(t, attach(map[string]json.RawMessage{fmt.Sprintf("a%d", i): raw("1")}))
		}
		require.NoError(t, attach(map[string]json.RawMessage{"a0": raw("2")}), "replacing one is no new artifact")
		err = attach(map[string]json.RawMessage{"one.more": raw("1")})
		require.ErrorIs(t, err, queue.ErrPayloadTooLarge)
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "artifacts", fe.Field)
		require.Contains(t, err.Error(), fmt.Sprint(queue.MaxArtifacts))

		// The total: values of 250 KiB, the fifth passes 1 MiB, with the
		// complete too: that job stays processing.
		b.enqueue(t, queue.NewJob{})
		c2 := b.claimOne(t)
		value := raw(`"` + strings.Repeat("v", 250<<10) + `"`)
		for i := range 4 {
			require.NoError(t, b.client.AttachArtifacts(b.ctx, b.queue, c2.ID, c2.Token, map[string]json.RawMessage{fmt.Sprintf("v%d", i): value}))
		}
		err = b.client.Complete(b.ctx, b.queue, c2.ID, c2.Token, queue.CompleteOptions{Artifacts: map[string]json.RawMessage{"v4": value}})
		require.ErrorIs(t, err, queue.ErrPayloadTooLarge)
		require.Equal(t, queue.StatusProcessing, b.get(t, c2.ID).Status)
		arts, err := b.client.Artifacts(b.ctx, b.queue, c2.ID)
		require.NoError(t, err)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(arts, &m))
		require.Len(t, m, 4)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c2.ID, c2.Token, queue.CompleteOptions{}))
	})

	t.Run("LogAppendFencedCappedAndRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{})
		_, err := b.client.AppendLog(b.ctx, b.queue, j.ID, "t", []string{"early"})
		require.ErrorIs(t, err, queue.ErrLeaseLost)
		c := b.claimOne(t)
		a, err := b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, []string{"one", "two", "three"})
		require.NoError(t, err)
		require.Equal(t, queue.LogAppend{Added: 3, Last: 3}, a)
		_, err = b.client.AppendLog(b.ctx, b.queue, c.ID, "stale", []string{"not mine"})
		require.ErrorIs(t, err, queue.ErrLeaseLost)
		long := strings.Repeat("é", queue.MaxLogLineBytes) // 2 bytes a rune: cut on a rune
		a, err = b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, []string{"four", long})
		require.NoError(t, err)
		require.Equal(t, int64(5), a.Last)

		page, err := b.client.Logs(b.ctx, b.queue, c.ID, 0, 0)
		require.NoError(t, err)
		require.Len(t, page.Lines, 5)
		require.Equal(t, []string{"one", "two", "three", "four"}, []string{page.Lines[0].Line, page.Lines[1].Line, page.Lines[2].Line, page.Lines[3].Line})
		for i, l := range page.Lines {
			require.Equal(t, int64(i+1), l.Seq)
			requireStamped(t, b.clock.Now(), l.At)
		}
		cut := page.Lines[4].Line
		require.LessOrEqual(t, len(cut), queue.MaxLogLineBytes)
		require.True(t, strings.HasSuffix(cut, queue.LogTruncatedMark))
		require.True(t, strings.HasPrefix(cut, "éé"))
		require.Equal(t, int64(5), page.Next)
		require.Equal(t, int64(5), page.Total)
		require.False(t, page.Truncated)
		page, err = b.client.Logs(b.ctx, b.queue, c.ID, 2, 2)
		require.NoError(t, err)
		require.Len(t, page.Lines, 2)
		require.Equal(t, "three", page.Lines[0].Line)
		require.Equal(t, int64(4), page.Next)
		page, err = b.client.Logs(b.ctx, b.queue, c.ID, 5, 0)
		require.NoError(t, err)
		require.Empty(t, page.Lines)
		require.Equal(t, int64(5), page.Next)
		_, err = b.client.Logs(b.ctx, b.queue, c.ID, 0, queue.MaxLogPage+1)
		require.ErrorIs(t, err, queue.ErrInvalid)
		_, err = b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, make([]string, queue.MaxLogBatch+1))
		require.ErrorIs(t, err, queue.ErrInvalid)

		// The line cap: the lines past it are dropped, the log says so.
		batch := make([]string, queue.MaxLogBatch)
		for i := range batch {
			batch[i] = "x"
		}
		for range (queue.MaxLogLines - 5) / queue.MaxLogBatch {
			_, err = b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, batch)
			require.NoError(t, err)
		}
		a, err = b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, batch)
		require.NoError(t, err)
		require.Equal(t, queue.LogAppend{Added: (queue.MaxLogLines - 5) % queue.MaxLogBatch, Last: queue.MaxLogLines, Truncated: true}, a)
		a, err = b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, []string{"more"})
		require.NoError(t, err)
		require.Equal(t, queue.LogAppend{Added: 0, Last: queue.MaxLogLines, Truncated: true}, a)
		page, err = b.client.Logs(b.ctx, b.queue, c.ID, queue.MaxLogLines-1, 0)
		require.NoError(t, err)
		require.Len(t, page.Lines, 1)
		require.True(t, page.Truncated)
		require.Equal(t, queue.StatusProcessing, page.Status)

		// The byte cap: lines of 8 KiB, the 129th passes 1 MiB.
		b.enqueue(t, queue.NewJob{})
		c2 := b.claimOne(t)
		big := strings.Repeat("b", queue.MaxLogLineBytes)
		bigs := []string{big, big, big, big, big, big, big, big, big, big}
		total := 0
		for range 13 {
			a, err = b.client.AppendLog(b.ctx, b.queue, c2.ID, c2.Token, bigs)
			require.NoError(t, err)
			total += a.Added
		}
		require.Equal(t, queue.MaxLogBytes/queue.MaxLogLineBytes, total)
		require.True(t, a.Truncated)
	})

	t.Run("LogAppendRerunAddsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		// The same call twice, as go-redis resends a command whose reply
		// was lost: the same batch id.
		args := []any{c.ID, c.Token, "batch1", queue.MaxLogLines, queue.MaxLogBytes, 2, "a", "b"}
		first, err := b.client.RunScript(b.ctx, "log", b.queue, args...)
		require.NoError(t, err)
		again, err := b.client.RunScript(b.ctx, "log", b.queue, args...)
		require.NoError(t, err)
		require.Equal(t, first, again)
		page, err := b.client.Logs(b.ctx, b.queue, c.ID, 0, 0)
		require.NoError(t, err)
		require.Len(t, page.Lines, 2)
		_, err = b.client.RunScript(b.ctx, "log", b.queue, c.ID, c.Token, "", 10, 10, 1, "x")
		require.ErrorContains(t, err, "malformed")
	})

	t.Run("ProgressRidesHeartbeats", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.enqueue(t, queue.NewJob{})
		require.Nil(t, j.Progress)
		c := b.claimOne(t)
		for _, bad := range []float64{-1, 100.5} {
			_, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: bad}})
			require.ErrorIs(t, err, queue.ErrInvalid)
		}
		_, err := b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 42.5, Message: "half | way\x00" + strings.Repeat("m", 2000)}})
		require.NoError(t, err)
		got := b.get(t, c.ID).Progress
		require.NotNil(t, got)
		require.Equal(t, 42.5, got.Percent)
		require.True(t, strings.HasPrefix(got.Message, "half | way\uFFFD"))
		require.Len(t, got.Message, queue.MaxProgressMessageBytes)
		requireStamped(t, b.clock.Now(), got.UpdatedAt)
		// A stale token changes nothing; a heartbeat without progress
		// keeps it.
		_, err = b.client.Heartbeat(b.ctx, b.queue, c.ID, "stale", queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 1}})
		require.ErrorIs(t, err, queue.ErrLeaseLost)
		b.clock.Advance(time.Second)
		_, err = b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{})
		require.NoError(t, err)
		require.Equal(t, 42.5, b.get(t, c.ID).Progress.Percent)
		_, err = b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 100}})
		require.NoError(t, err)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		got = b.get(t, c.ID).Progress
		require.Equal(t, &queue.Progress{Percent: 100, UpdatedAt: got.UpdatedAt}, got, "kept once the job ended")
	})

	t.Run("LogAndProgressArePublished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		evs, err := b.client.Subscribe(b.ctx, b.queue)
		require.NoError(t, err)
		_, err = b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, []string{"a"})
		require.NoError(t, err)
		_, err = b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 5}})
		require.NoError(t, err)
		for _, want := range []string{"log", "progress"} {
			ev := <-evs
			require.Equal(t, want, ev.Type)
			require.Equal(t, c.ID, ev.ID)
			require.Equal(t, queue.StatusProcessing, ev.Status)
		}
	})

	// Every way a job's data is deleted takes its artifacts and log too:
	// deleted at completion, at the end of its retention, purged from the
	// dead set, canceled.
	t.Run("DeletingAJobDeletesItsArtifactsAndLog", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.RetryWindow = time.Millisecond })
		run := func(t *testing.T, nj queue.NewJob) *queue.Job {
			t.Helper()
			// a payload past the inline cap: in the data hash, as the rest
			nj.Payload = json.RawMessage(`"` + strings.Repeat("p", queue.InlinePayloadMax) + `"`)
			b.enqueue(t, nj)
			c := b.claimOne(t)
			require.NoError(t, b.client.AttachArtifacts(b.ctx, b.queue, c.ID, c.Token, map[string]json.RawMessage{"a": raw("1")}))
			_, err := b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, []string{"l1", "l2", "l3"})
			require.NoError(t, err)
			return c
		}
		fieldsOf := func(id string) []string {
			keys, err := b.rdb.HKeys(b.ctx, b.key(queue.KeyData)).Result()
			require.NoError(t, err)
			var out []string
			for _, k := range keys {
				if k == id || strings.HasPrefix(k, id+".") {
					out = append(out, k)
				}
			}
			return out
		}
		// Kept for its retention, then swept.
		kept := run(t, queue.NewJob{ResultTTL: time.Minute})
		require.NoError(t, b.client.Complete(b.ctx, b.queue, kept.ID, kept.Token, queue.CompleteOptions{Result: raw("1")}))
		require.ElementsMatch(t, []string{kept.ID, kept.ID + ".r", kept.ID + ".a", kept.ID + ".l.1", kept.ID + ".l.2", kept.ID + ".l.3"}, fieldsOf(kept.ID))
		// Dead, then purged.
		dead := run(t, queue.NewJob{})
		_, err := b.client.Fail(b.ctx, b.queue, dead.ID, dead.Token, queue.FailOptions{Error: "x", Dead: true})
		require.NoError(t, err)
		n, err := b.client.PurgeDead(b.ctx, b.queue, "")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Empty(t, fieldsOf(dead.ID))
		// Canceled while processing, kept for its retention.
		canceled := run(t, queue.NewJob{ResultTTL: time.Minute})
		_, err = b.client.Cancel(b.ctx, b.queue, canceled.ID)
		require.NoError(t, err)
		require.NoError(t, b.client.CancelClaimed(b.ctx, b.queue, canceled.ID, canceled.Token))
		b.clock.Advance(2 * time.Minute)
		_, err = b.client.Reclaim(b.ctx, b.queue)
		require.NoError(t, err)
		require.Empty(t, fieldsOf(kept.ID))
		require.Empty(t, fieldsOf(canceled.ID))
		_, err = b.client.Logs(b.ctx, b.queue, kept.ID, 0, 0)
		require.ErrorIs(t, err, queue.ErrNotFound)
	})

	t.Run("DeletedAtCompletionTakesArtifactsAndLog", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *queue.Config) { c.Retention = -1; c.RetryWindow = time.Millisecond })
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		_, err := b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, []string{"l1", "l2"})
		require.NoError(t, err)
		b.clock.Advance(time.Second) // past the retry window: no tombstone
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{
			Artifacts: map[string]json.RawMessage{"a": raw("1")}}))
		n, err := b.rdb.HLen(b.ctx, b.key(queue.KeyData)).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "only the sentinel is left")
	})

	// A record written before the progress and log fields existed reads
	// with none, and takes a log and progress.
	t.Run("OldRecordTakesLogAndProgress", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		c := b.claimOne(t)
		rec, err := b.rdb.HGet(b.ctx, b.key(queue.KeyJobs), c.ID).Result()
		require.NoError(t, err)
		// As the first version stored it: every field, the status and
		// spec spelled out, the payload in the data hash.
		f, payload := queue.SpelledRecord(rec)
		require.Equal(t, string(queue.StatusProcessing), f[0])
		require.Equal(t, "{}", payload)
		require.NoError(t, b.rdb.HSet(b.ctx, b.key(queue.KeyJobs), c.ID, strings.Join(f[:queue.NRecFirst], "\x00")).Err())
		require.NoError(t, b.rdb.HSet(b.ctx, b.key(queue.KeyData), c.ID, payload).Err())
		j := b.get(t, c.ID)
		require.Nil(t, j.Progress)
		page, err := b.client.Logs(b.ctx, b.queue, c.ID, 0, 0)
		require.NoError(t, err)
		require.Empty(t, page.Lines)
		a, err := b.client.AppendLog(b.ctx, b.queue, c.ID, c.Token, []string{"hi"})
		require.NoError(t, err)
		require.Equal(t, int64(1), a.Last)
		_, err = b.client.Heartbeat(b.ctx, b.queue, c.ID, c.Token, queue.HeartbeatOptions{Progress: &queue.Progress{Percent: 7, Message: "m"}})
		require.NoError(t, err)
		require.Equal(t, "m", b.get(t, c.ID).Progress.Message)
	})
}

// requireStamped checks that got, a time Redis's clock decided, is not
// before start (on the fake clock) and not absurdly after it: Redis's
// clock runs ahead of the fake one by the real time the test has taken,
// however slow the machine (no timing assert).
func requireStamped(t *testing.T, start, got time.Time) {
	t.Helper()
	require.False(t, got.Before(start.Truncate(time.Millisecond)), "got %s, before %s", got, start)
	require.Less(t, got.Sub(start), 10*time.Minute)
}
