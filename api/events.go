package api

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
)

// maxEventQueues caps the queues one event stream names.
const maxEventQueues = 100

type eventJSON struct {
	Queue    string       `json:"queue"`
	ID       string       `json:"id"`
	Kind     string       `json:"kind"`
	Status   queue.Status `json:"status"`
	Attempts int          `json:"attempts"`
	At       *string      `json:"at"`
}

// events: GET /v1/events?queue=Q — Server-Sent Events of the jobs of the
// queues named (repeated, or comma-separated), or of every queue. Each
// event's "event:" is its type and its "data:" the job's
// {"queue","id","kind","status","attempts","at"}. A comment line is sent
// every SSEHeartbeat so that proxies keep the stream open. A job's log,
// progress and artifact events are left out: its own stream (jobStream)
// carries them.
func (s *Server) events(c echo.Context) error {
	var queues []string
	for _, v := range c.QueryParams()["queue"] {
		for q := range strings.SplitSeq(v, ",") {
			if q = strings.TrimSpace(q); q == "" {
				continue
			}
			if err := names.ValidateQueue(q); err != nil {
				return invalidArg("queue", "%v", err)
			}
			queues = append(queues, q)
		}
	}
	if len(queues) > maxEventQueues {
		return invalidArg("queue", "at most %d queues, got %d", maxEventQueues, len(queues))
	}
	if err := s.openStream(); err != nil {
		return err
	}
	defer s.streams.Add(-1)
	ctx, cancel := s.streamContext(c)
	defer cancel()
	evs, err := s.subscribe.Subscribe(ctx, queues...)
	if err != nil {
		return err
	}
	w := c.Response()
	if !openSSE(w) {
		return nil
	}
	var buf []byte
	s.sseLoop(ctx, w, evs, func(ev *queue.Event) bool {
		if ev == nil || ev.Type == "log" || ev.Type == "progress" || ev.Type == "artifact" {
			return true // a ping; or not a change of status: a job's own stream carries them
		}
		data, err := json.Marshal(eventJSON{Queue: ev.Queue, ID: ev.ID, Kind: ev.Kind, Status: ev.Status,
			Attempts: ev.Attempts, At: wire.Time(ev.At)})
		if err != nil {
			return false
		}
		buf = append(buf[:0], "event: "...)
		buf = append(buf, ev.Type...)
		buf = append(buf, "\ndata: "...)
		buf = append(buf, data...)
		buf = append(buf, "\n\n"...)
		_, err = w.Write(buf)
		return err == nil
	})
	return nil
}

// sseLoop runs an opened event stream on w until ctx ends, evs closes (a
// nil evs never sends), a write fails or each answers false: it writes a
// ping comment every SSEHeartbeat, so that proxies keep the stream open,
// and calls each after it (ev nil) and for every event; w is flushed after
// each turn. ev is valid only during the call: the next event overwrites it.
func (s *Server) sseLoop(ctx context.Context, w *echo.Response, evs <-chan queue.Event, each func(ev *queue.Event) bool) {
	tick := s.clock.NewTicker(s.cfg.SSEHeartbeat)
	defer tick.Stop()
	var cur queue.Event // each event is copied here: &e would move e to the heap at every event
	for {
		var ev *queue.Event
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
		case e, ok := <-evs:
			if !ok {
				return
			}
			cur = e
			ev = &cur
		}
		if !each(ev) {
			return
		}
		w.Flush()
	}
}

// openStream counts an event stream opening (/v1/events, a job's stream),
// or answers 503 past Config.MaxEventStreams. The caller counts it closed
// with s.streams.Add(-1).
func (s *Server) openStream() error {
	if n := s.streams.Add(1); n > int64(s.cfg.MaxEventStreams) {
		s.streams.Add(-1)
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: fmt.Sprintf("too many event streams open (%d); retry later", s.cfg.MaxEventStreams)}
	}
	return nil
}

// openSSE answers 200 with an event stream's headers and its opening
// comment, sent at once: the subscription is live, so a client knows that
// every later event reaches it. False when the client is gone.
func openSSE(w *echo.Response) bool {
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte(": connected\n\n")); err != nil {
		return false
	}
	w.Flush()
	return true
}
