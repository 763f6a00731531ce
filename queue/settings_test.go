package queue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Settings live in the queue's meta hash: written in one script, read back,
// unset with "", gone with the queue; a name that is no setting is refused.
func TestSettings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)

	got, err := plumbing.Of(c).Settings(ctx, "q")
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, plumbing.Of(c).SetSettings(ctx, "q", map[string]string{queue.SettingPush: `{"url":"https://x"}`}))
	got, err = plumbing.Of(c).Settings(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, map[string]string{queue.SettingPush: `{"url":"https://x"}`}, got)
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	require.Contains(t, qs, "q", "setting a queue creates it")
	of, err := plumbing.Of(c).SettingsOf(ctx, queue.SettingPush, []string{"q", "other"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"q": `{"url":"https://x"}`}, of)

	err = plumbing.Of(c).SetSettings(ctx, "q", map[string]string{"paused": "1"})
	require.ErrorIs(t, err, queue.ErrInvalid)

	require.NoError(t, plumbing.Of(c).SetSettings(ctx, "q", map[string]string{queue.SettingPush: ""}))
	got, err = plumbing.Of(c).Settings(ctx, "q")
	require.NoError(t, err)
	require.Empty(t, got)

	require.NoError(t, plumbing.Of(c).SetSettings(ctx, "q", map[string]string{queue.SettingPush: "v"}))
	require.NoError(t, c.DeleteQueue(ctx, "q", false))
	got, err = plumbing.Of(c).Settings(ctx, "q")
	require.NoError(t, err)
	require.Empty(t, got, "deleting a queue deletes its settings")
	// A queue deleted behind this client's back is made again.
	require.NoError(t, plumbing.Of(c).SetSettings(ctx, "q", map[string]string{queue.SettingPush: "w"}))
	got, err = plumbing.Of(c).Settings(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, "w", got[queue.SettingPush])
}

// Notes are fenced by the claim token, capped at MaxNotes, and a retried
// note adds nothing.
func TestNotes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	j := jobs[0]

	notes, err := plumbing.Of(c).Notes(ctx, "q", j.ID)
	require.NoError(t, err)
	require.Empty(t, notes)
	require.NoError(t, plumbing.Of(c).Note(ctx, "q", j.ID, j.Token, "first"))
	require.NoError(t, plumbing.Of(c).Note(ctx, "q", j.ID, j.Token, "first"), "a retried note")
	notes, err = plumbing.Of(c).Notes(ctx, "q", j.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"first"}, notes)

	err = plumbing.Of(c).Note(ctx, "q", j.ID, "stale.1", "late")
	require.True(t, errors.Is(err, queue.ErrLeaseLost), "%v", err)
	require.ErrorIs(t, plumbing.Of(c).Note(ctx, "q", j.ID, j.Token, "two\nlines"), queue.ErrInvalid)

	for i := range queue.MaxNotes + 5 {
		require.NoError(t, plumbing.Of(c).Note(ctx, "q", j.ID, j.Token, "n"+string(rune('a'+i))))
	}
	notes, err = plumbing.Of(c).Notes(ctx, "q", j.ID)
	require.NoError(t, err)
	require.Len(t, notes, queue.MaxNotes)
	require.Equal(t, "n"+string(rune('a'+queue.MaxNotes+4)), notes[len(notes)-1])

	require.NoError(t, c.Complete(ctx, "q", j.ID, j.Token, queue.CompleteOptions{}))
	require.ErrorIs(t, plumbing.Of(c).Note(ctx, "q", j.ID, j.Token, "after"), queue.ErrLeaseLost, "only a processing job takes notes")
}

// A deleted job takes its notes with it: no "<id>.n" field is left in the
// queue's data hash (drop deletes the payload, the result and the notes).
func TestNotesGoWithTheJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := testutil.Namespace(t)
	rdb := testutil.Redis(t)
	// Retention < 0: a completed job is deleted at once.
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, Retention: -1, RetryWindow: -1})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k", Payload: []byte(`{"a":1}`)})
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	j := jobs[0]
	require.NoError(t, plumbing.Of(c).Note(ctx, "q", j.ID, j.Token, "attempt 1"))
	keys := store.QueueKeys(ns, "q").All()
	var data string
	for _, k := range keys {
		if strings.HasSuffix(k, ":data") {
			data = k
		}
	}
	require.NotEmpty(t, data)
	fields, err := rdb.HKeys(ctx, data).Result()
	require.NoError(t, err)
	require.Contains(t, fields, j.ID+".n", "the note is where this test looks")

	require.NoError(t, c.Complete(ctx, "q", j.ID, j.Token, queue.CompleteOptions{Result: []byte(`{"ok":true}`)}))
	_, err = c.Get(ctx, "q", j.ID)
	require.ErrorIs(t, err, queue.ErrNotFound, "the job is deleted at completion")
	fields, err = rdb.HKeys(ctx, data).Result()
	require.NoError(t, err)
	for _, f := range fields {
		require.False(t, strings.HasPrefix(f, j.ID), "field %q of the deleted job is left", f)
	}
}

// NoteMany writes a batch in one call, answering per item: a stale token
// writes nothing for its job and does not stop the others.
func TestNoteMany(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	for range 2 {
		_, err = c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "k"})
		require.NoError(t, err)
	}
	jobs, err := c.Claim(ctx, "q", queue.ClaimOptions{Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	a, b := jobs[0], jobs[1]
	errs, err := plumbing.Of(c).NoteMany(ctx, "q", []plumbing.NoteItem{
		{ID: a.ID, Token: a.Token, Line: "a1"},
		{ID: b.ID, Token: "stale.1", Line: "b1"},
		{ID: "0123456789abcdef0123456789abcdef", Token: "x.1", Line: "none"},
		{ID: a.ID, Token: a.Token, Line: "a2"},
	})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], queue.ErrLeaseLost)
	require.ErrorIs(t, errs[2], queue.ErrNotFound)
	require.NoError(t, errs[3])
	notes, err := plumbing.Of(c).Notes(ctx, "q", a.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"a1", "a2"}, notes)
	notes, err = plumbing.Of(c).Notes(ctx, "q", b.ID)
	require.NoError(t, err)
	require.Empty(t, notes)
	_, err = plumbing.Of(c).NoteMany(ctx, "q", nil)
	require.ErrorIs(t, err, queue.ErrInvalid)
}
