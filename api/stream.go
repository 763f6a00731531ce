package api

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
)

// jobStatusJSON is the data of a job stream's status event.
type jobStatusJSON struct {
	Queue    string       `json:"queue"`
	ID       string       `json:"id"`
	Kind     string       `json:"kind"`
	Status   queue.Status `json:"status"`
	Attempts int          `json:"attempts"`
}

// artifactJSON is the data of a job stream's artifact event.
type artifactJSON struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// logTruncatedJSON is the data of a job stream's log_truncated event.
type logTruncatedJSON struct {
	Lines int64 `json:"lines"`
}

// finished reports whether a job of status st will change no more by
// itself: its stream ends.
func finished(st queue.Status) bool {
	return st == queue.StatusCompleted || st == queue.StatusDead || st == queue.StatusCanceled
}

// jobStream: GET /v1/queues/{queue}/jobs/{id}/stream[?after=<seq>] —
// Server-Sent Events of one job: `status` (the job's status, first at
// once, then at each change), `progress` (its progress, when it has any
// and at each change), `log` (each line of its log after seq `after`, or
// after the Last-Event-ID a reconnecting client sends: a log event's id is
// its seq), `log_truncated` (once, when the log is or becomes truncated:
// it reached its cap and lines were dropped), `artifact` (each artifact,
// at once, then each one attached or replaced). The stream ends after the
// status event of a finished job (completed, dead or canceled), or when
// the job is deleted.
//
// Nothing is lost between the read and the subscription: the stream
// subscribes to the queue's events first, then reads the job and its log;
// every event then makes it read the store again from the last seq it
// sent, and so does every SSEHeartbeat, in case an event was missed (pub/
// sub is at most once).
func (s *Server) jobStream(c echo.Context) error {
	q, id, err := pathJob(c)
	if err != nil {
		return err
	}
	after, err := seqParam(c, "after")
	if err != nil {
		return err
	}
	if v := c.Request().Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return invalidArg("Last-Event-ID", "must be a log seq, an integer from 0, got %q", v)
		}
		after = max(after, n)
	}
	if err := s.openStream(); err != nil {
		return err
	}
	defer s.streams.Add(-1)
	// ctx ends with the request or at the server's drain; the store is
	// read with the request's, so that a drained stream still answers
	// what the job is, once.
	ctx, cancel := s.streamContext(c)
	defer cancel()
	rctx := c.Request().Context()
	evs, err := s.subscribe.Subscribe(ctx, q)
	if err != nil {
		if ctx.Err() == nil || rctx.Err() != nil {
			return err
		}
		evs = nil // drained: the job as it is now, and the end
	}
	js := &jobStreamer{s: s, c: c, q: q, id: id, seq: after}
	j, err := s.read.Get(rctx, q, id)
	if err != nil {
		return err // 404 before the stream opens
	}
	w := c.Response()
	if !openSSE(w) {
		return nil
	}
	if done, err := js.catchUp(rctx, j); done || err != nil || evs == nil {
		return nil
	}
	s.sseLoop(ctx, w, evs, func(ev *queue.Event) bool {
		if ev != nil && ev.ID != id {
			return true
		}
		// An event of this job, or a ping: read the store again.
		j, err := s.read.Get(rctx, q, id)
		if err != nil {
			// Deleted (or the store is away: the client reconnects with
			// its Last-Event-ID).
			return false
		}
		done, err := js.catchUp(rctx, j)
		return !done && err == nil
	})
	return nil
}

// jobStreamer is what a job stream has sent.
type jobStreamer struct {
	s     *Server
	c     echo.Context
	q, id string
	seq   int64 // the last log line sent
	sent  *jobStatusJSON
	prog  *queue.Progress
	buf   []byte
	// truncated: log_truncated was sent; arts: the artifacts as last read,
	// and artSent each one's value as sent, by name.
	truncated bool
	arts      []byte
	artSent   map[string]string
}

// catchUp sends what changed since the last call, j being the job as read
// now: its log lines since, then its progress and its status when they
// changed. done: the job is finished and its stream has ended.
func (js *jobStreamer) catchUp(ctx context.Context, j *queue.Job) (done bool, err error) {
	for {
		page, err := js.s.outputs.Logs(ctx, js.q, js.id, js.seq, queue.MaxLogPage)
		if err != nil {
			return true, err
		}
		for _, l := range page.Lines {
			if err := js.send("log", strconv.FormatInt(l.Seq, 10), toLogLineJSON(l)); err != nil {
				return true, err
			}
			js.seq = l.Seq
		}
		if len(page.Lines) < queue.MaxLogPage {
			if page.Truncated && !js.truncated {
				js.truncated = true
				if err := js.send("log_truncated", "", logTruncatedJSON{Lines: page.Total}); err != nil {
					return true, err
				}
			}
			break
		}
	}
	if p := j.Progress; p != nil && (js.prog == nil || *js.prog != *p) {
		js.prog = p
		pct := p.Percent
		if err := js.send("progress", "", progressJSON{Percent: &pct, Message: p.Message, UpdatedAt: wire.Time(p.UpdatedAt)}); err != nil {
			return true, err
		}
	}
	if err := js.artifacts(j.Artifacts); err != nil {
		return true, err
	}
	st := &jobStatusJSON{Queue: j.Queue, ID: j.ID, Kind: j.Kind, Status: j.Status, Attempts: j.Attempts}
	if js.sent == nil || *js.sent != *st {
		js.sent = st
		if err := js.send("status", "", st); err != nil {
			return true, err
		}
	}
	js.c.Response().Flush()
	return finished(j.Status), nil
}

// artifacts sends an artifact event for each artifact of raw (the job's,
// a JSON object) not sent yet or changed since, in name order.
func (js *jobStreamer) artifacts(raw json.RawMessage) error {
	if len(raw) == 0 || bytes.Equal(raw, js.arts) {
		return nil
	}
	js.arts = append(js.arts[:0], raw...)
	var arts map[string]json.RawMessage
	_ = json.Unmarshal(raw, &arts) // the store writes an object; anything else shows nothing
	if js.artSent == nil {
		js.artSent = make(map[string]string, len(arts))
	}
	for _, name := range slices.Sorted(maps.Keys(arts)) {
		v := arts[name]
		if sent, ok := js.artSent[name]; ok && sent == string(v) {
			continue
		}
		js.artSent[name] = string(v)
		if err := js.send("artifact", "", artifactJSON{Name: name, Value: v}); err != nil {
			return err
		}
	}
	return nil
}

// send writes one event; id is its SSE id ("" for none).
func (js *jobStreamer) send(event, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b := append(js.buf[:0], "event: "...)
	b = append(b, event...)
	if id != "" {
		b = append(b, "\nid: "...)
		b = append(b, id...)
	}
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	js.buf = b
	_, err = js.c.Response().Write(b)
	return err
}
