package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/worker"
)

// A handler's log lines, progress and artifacts reach the store, fenced by
// its claim, before its completion: all of them, in order, the last line
// without its newline too.
func TestHandlerLogsProgressAndArtifacts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	progressed := make(chan struct{})
	release := make(chan struct{})
	b.mux.HandleFunc("test", func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
		w := worker.Log(ctx)
		for i := range 250 { // more than one append's worth
			fmt.Fprintf(w, "line %d\n", i)
		}
		worker.Logger(ctx).Info("structured", "k", "v")
		_, _ = w.Write([]byte("split "))
		_, _ = w.Write([]byte("line\r\nno newline at the end"))
		if err := worker.Attach(ctx, "summary", map[string]int{"lines": 250}); err != nil {
			return nil, err
		}
		if err := worker.Progress(ctx, 101, ""); err == nil {
			return nil, fmt.Errorf("a percent of 101 was taken")
		}
		if err := worker.Progress(ctx, 30, "a third"); err != nil {
			return nil, err
		}
		close(progressed)
		<-release
		return nil, worker.Progress(ctx, 100, "done") // sent before the completion
	})
	j := b.enqueue(t, queue.NewJob{})
	b.start(t, worker.Config{})
	recv(t, b.ctx, progressed)
	// Sent at once, with a heartbeat, not after the heartbeat interval.
	require.Eventually(t, func() bool {
		p := b.get(t, "q1", j.ID).Progress
		return p != nil && p.Percent == 30 && p.Message == "a third"
	}, 10*time.Second, 5*time.Millisecond)
	close(release)
	o := b.outcome(t)
	require.NoError(t, o.Err)
	require.Equal(t, queue.StatusCompleted, o.Status)

	got := b.get(t, "q1", j.ID)
	require.Equal(t, &queue.Progress{Percent: 100, Message: "done", UpdatedAt: got.Progress.UpdatedAt}, got.Progress)
	require.JSONEq(t, `{"summary":{"lines":250}}`, string(got.Artifacts))
	var lines []string
	for after := int64(0); ; {
		page, err := b.client.Logs(b.ctx, "q1", j.ID, after, 0)
		require.NoError(t, err)
		if len(page.Lines) == 0 {
			break
		}
		for _, l := range page.Lines {
			lines = append(lines, l.Line)
		}
		after = page.Next
	}
	require.Len(t, lines, 253)
	for i := range 250 {
		require.Equal(t, fmt.Sprintf("line %d", i), lines[i])
	}
	require.Contains(t, lines[250], "msg=structured k=v")
	require.Equal(t, "split line", lines[251])
	require.Equal(t, "no newline at the end", lines[252])
}

// Outside a job, the helpers do nothing (the log) or say so.
func TestJobHelpersOutsideAJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, err := worker.Log(ctx).Write([]byte("nowhere\n"))
	require.NoError(t, err)
	require.Equal(t, 8, n)
	worker.Logger(ctx).Info("nowhere")
	require.ErrorIs(t, worker.Progress(ctx, 1, ""), worker.ErrNotInJob)
	require.ErrorIs(t, worker.Attach(ctx, "a", 1), worker.ErrNotInJob)
}

// A line longer than the cap is cut once, with the mark, and the rest of
// it up to its newline dropped.
func TestHandlerLogCutsLongLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mux.HandleFunc("test", func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
		w := worker.Log(ctx)
		long := strings.Repeat("x", 3000)
		for range 10 { // 30,000 bytes of one line, in pieces
			_, _ = w.Write([]byte(long))
		}
		_, _ = w.Write([]byte("\nafter\n"))
		return nil, nil
	})
	j := b.enqueue(t, queue.NewJob{})
	b.start(t, worker.Config{})
	require.Equal(t, queue.StatusCompleted, b.outcome(t).Status)
	page, err := b.client.Logs(b.ctx, "q1", j.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, page.Lines, 2)
	require.LessOrEqual(t, len(page.Lines[0].Line), queue.MaxLogLineBytes)
	require.True(t, strings.HasSuffix(page.Lines[0].Line, queue.LogTruncatedMark))
	require.Equal(t, "after", page.Lines[1].Line)
}

// A job handed back at the stop keeps the lines its handler logged until
// then; what the handler logs after is dropped, and nothing is left
// running (goleak, in TestMain).
func TestHandedBackJobKeepsItsLogUntilTheStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logged := make(chan struct{})
	done := make(chan struct{})
	b.mux.HandleFunc("test", func(ctx context.Context, j *queue.Job) (json.RawMessage, error) {
		defer close(done)
		fmt.Fprintln(worker.Log(ctx), "before the stop")
		close(logged)
		<-ctx.Done()
		fmt.Fprintln(worker.Log(ctx), "after the stop")
		return nil, ctx.Err()
	})
	j := b.enqueue(t, queue.NewJob{})
	run := b.start(t, worker.Config{ShutdownTimeout: -1})
	recv(t, b.ctx, logged)
	require.ErrorIs(t, run.Stop(b.ctx), context.DeadlineExceeded)
	recv(t, b.ctx, done)
	page, err := b.client.Logs(b.ctx, "q1", j.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, page.Lines, 1)
	require.Equal(t, "before the stop", page.Lines[0].Line)
	require.Equal(t, queue.StatusPending, page.Status)
}
