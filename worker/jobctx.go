package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/chronoq/chronoq/queue"
)

// What a handler leaves beside its result, through its context: log lines
// ([Log], [Logger]), progress ([Progress]) and artifacts ([Attach]). Each
// goes to the store fenced by the run's claim token, so a handler whose
// lease was lost changes nothing.

// ErrNotInJob is the error of Progress and Attach called with a context
// that is not a running job's (not a handler's, or derived from one).
var ErrNotInJob = errors.New("worker: not a running job's context")

type runKey struct{}

// runOf answers the run of a handler's context, nil when it has none.
func runOf(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// Log answers a writer to the job's log: each line written (up to a
// newline; a line longer than queue.MaxLogLineBytes is cut) is appended
// to the log with the run's claim token. Lines are sent in the background,
// those written while an append is in flight together in the next one, and
// all of them before the job completes or fails: the worker waits for the
// last append when the handler returns (a last line without its newline
// too). Lines written once the handler has returned, past queue.MaxLogLines,
// or after the lease was lost are dropped. Writes never fail and never
// block on Redis. With a context that is not a running job's, the writer
// discards what it is given.
func Log(ctx context.Context) io.Writer {
	r := runOf(ctx)
	if r == nil {
		return io.Discard
	}
	return r.log
}

// Logger answers a logger that writes to the job's log (see [Log]), one
// line of text (slog.TextHandler) a record, at Info and above.
func Logger(ctx context.Context) *slog.Logger {
	return slog.New(slog.NewTextHandler(Log(ctx), nil))
}

// Progress records how far the job is: percent, 0 to 100, and a message
// (cut at queue.MaxProgressMessageBytes). It is sent at once with a
// heartbeat of the lease (which then extends it too): while that heartbeat
// is in flight, later calls wait for the next, and only the last of them
// is sent; the last one is sent before the job completes or fails. It
// answers an error wrapping queue.ErrInvalid for a percent out of range,
// and ErrNotInJob with a context that is not a running job's.
func Progress(ctx context.Context, percent float64, msg string) error {
	r := runOf(ctx)
	if r == nil {
		return ErrNotInJob
	}
	if !(percent >= 0 && percent <= 100) {
		return fmt.Errorf("worker: progress: %w: percent must be in [0, 100], got %v", queue.ErrInvalid, percent)
	}
	r.progMu.Lock()
	r.progress = &queue.Progress{Percent: percent, Message: msg}
	r.progMu.Unlock()
	signal(r.beat)
	return nil
}

// Attach sets an artifact of the job now: value is marshalled as JSON (a
// json.RawMessage as it is). A name given again replaces its value. It
// answers queue.ErrLeaseLost when the lease was lost, an error wrapping
// queue.ErrPayloadTooLarge past the caps (queue.MaxArtifacts, ...), and
// ErrNotInJob with a context that is not a running job's.
func Attach(ctx context.Context, name string, value any) error {
	r := runOf(ctx)
	if r == nil {
		return ErrNotInJob
	}
	v, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("worker: attach %s: %w: %w", name, queue.ErrInvalid, err)
	}
	return r.w.client.AttachArtifacts(ctx, r.job.Queue, r.job.ID, r.job.Token, map[string]json.RawMessage{name: v})
}

// takeProgress answers the progress not sent yet, nil when none.
func (r *run) takeProgress() *queue.Progress {
	r.progMu.Lock()
	defer r.progMu.Unlock()
	p := r.progress
	r.progress = nil
	return p
}

// flushProgress sends the progress not sent yet, with a heartbeat, after
// any heartbeat in flight.
func (r *run) flushProgress() {
	r.beatMu.Lock()
	defer r.beatMu.Unlock()
	if p := r.takeProgress(); p != nil {
		if _, err := r.w.client.Heartbeat(r.w.bg, r.job.Queue, r.job.ID, r.job.Token, queue.HeartbeatOptions{Progress: p}); err != nil &&
			!errors.Is(err, queue.ErrLeaseLost) {
			r.w.log.Warn("worker: sending the job's last progress failed", "queue", r.job.Queue, "id", r.job.ID, "err", err)
		}
	}
}

// jobLog is a run's log writer (see Log).
type jobLog struct {
	w   *Worker
	job *queue.Job

	mu      sync.Mutex
	idle    *sync.Cond // broadcast when a sender ends
	partial []byte     // the line being written, without its newline
	skip    bool       // dropping the rest of a line cut at MaxLogLineBytes
	pending []string   // lines to send
	queued  int        // lines ever queued: at most MaxLogLines
	busy    bool       // a sender is running
	closed  bool       // the handler returned: drop what comes
	lost    bool       // the lease was lost: drop everything
}

func newJobLog(w *Worker, job *queue.Job) *jobLog {
	l := &jobLog{w: w, job: job}
	l.idle = sync.NewCond(&l.mu)
	return l
}

func (l *jobLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.lost {
		return len(p), nil
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if !l.skip {
			l.partial = append(l.partial, chunk...)
		}
		switch {
		case i >= 0:
			if !l.skip {
				l.queue(strings.TrimSuffix(string(l.partial), "\r"))
			}
			l.partial, l.skip = l.partial[:0], false
			rest = rest[i+1:]
		default:
			rest = nil
		}
		if len(l.partial) > queue.MaxLogLineBytes {
			l.queue(string(l.partial)) // cut by the client, marked
			l.partial, l.skip = l.partial[:0], true
		}
	}
	l.kick()
	return len(p), nil
}

// queue adds a line to send. Call with l.mu held.
func (l *jobLog) queue(line string) {
	if l.queued >= queue.MaxLogLines {
		return // the store would drop it
	}
	l.queued++
	l.pending = append(l.pending, line)
}

// kick starts a sender when lines wait and none runs. Call with l.mu held.
func (l *jobLog) kick() {
	if l.busy || len(l.pending) == 0 || l.lost {
		return
	}
	l.busy = true
	go l.send()
}

// send appends the waiting lines, up to queue.MaxLogBatch a call, until
// none waits.
func (l *jobLog) send() {
	for {
		l.mu.Lock()
		if len(l.pending) == 0 || l.lost {
			l.pending = nil
			l.busy = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		n := min(len(l.pending), queue.MaxLogBatch)
		batch := l.pending[:n:n]
		l.pending = l.pending[n:]
		l.mu.Unlock()
		_, err := l.w.client.AppendLog(l.w.bg, l.job.Queue, l.job.ID, l.job.Token, batch)
		switch {
		case errors.Is(err, queue.ErrLeaseLost), errors.Is(err, queue.ErrNotFound):
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
		case err != nil:
			l.w.log.Warn("worker: appending to the job's log failed; lines dropped", "queue", l.job.Queue, "id", l.job.ID,
				"lines", len(batch), "err", err)
		}
	}
}

// close sends the last line (without its newline), drops what is written
// after, and waits for the sends under way.
func (l *jobLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		if len(l.partial) > 0 && !l.skip {
			l.queue(string(l.partial))
		}
		l.partial = nil
		l.kick()
	}
	for l.busy {
		l.idle.Wait()
	}
}
