package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
)

// sseStream reads a Server-Sent Events stream line by line.
type sseStream struct {
	t     *testing.T
	lines chan string
	close func() // ends the stream from the client's side
}

type sseEvent struct {
	typ  string
	data map[string]any
}

func (b *testBundle) openEvents(t *testing.T, query string) *sseStream {
	t.Helper()
	return b.openSSE(t, "/v1/events"+query)
}

// openSSE opens the event stream at path (with the headers hdr, name then
// value) and reads its opening comment.
func (b *testBundle) openSSE(t *testing.T, path string, hdr ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.http.URL+path, nil)
	require.NoError(t, err)
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.http.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	s := &sseStream{t: t, lines: make(chan string, 64), close: cancel}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	require.Equal(t, ": connected", s.line())
	require.Equal(t, "", s.line())
	return s
}

func (s *sseStream) line() string {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		require.True(s.t, ok, "stream ended")
		return l
	case <-time.After(5 * time.Second):
		s.t.Fatal("no line within 5s")
		return ""
	}
}

func (s *sseStream) event() sseEvent {
	s.t.Helper()
	typ, ok := strings.CutPrefix(s.line(), "event: ")
	require.True(s.t, ok)
	data, ok := strings.CutPrefix(s.line(), "data: ")
	require.True(s.t, ok)
	require.Equal(s.t, "", s.line())
	var m map[string]any
	require.NoError(s.t, json.Unmarshal([]byte(data), &m))
	return sseEvent{typ: typ, data: m}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.openEvents(t, "?queue=ev")

	b.enqueue(t, map[string]any{"queue": "other"}) // not followed
	j := b.enqueue(t, map[string]any{"queue": "ev", "kind": "mail"})
	first := s.event()
	requireSoonAfter(t, fakeNow, first.data["at"], "an event's time is Redis's")
	first.data["at"] = fakeNow
	require.Equal(t, sseEvent{typ: "enqueued", data: map[string]any{"queue": "ev", "id": j.ID, "kind": "mail",
		"status": "pending", "attempts": float64(0), "at": fakeNow}}, first)

	b.clock.Advance(time.Second)
	tok := b.claim(t, "ev", 1)[0].Token
	ev := s.event()
	require.Equal(t, "claimed", ev.typ)
	require.Equal(t, "processing", ev.data["status"])
	require.Equal(t, float64(1), ev.data["attempts"])
	requireSoonAfter(t, "2030-01-02T03:04:06.000Z", ev.data["at"])

	r := b.do(t, http.MethodPost, "/v1/queues/ev/jobs/"+j.ID+"/complete", map[string]any{"token": tok})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "completed", s.event().typ)

	// A retry (run now) of a scheduled job: its own type, run_now.
	later := b.enqueue(t, map[string]any{"queue": "ev", "delay": "1h"})
	ev = s.event()
	require.Equal(t, "enqueued", ev.typ)
	require.Equal(t, "scheduled", ev.data["status"])
	r = b.do(t, http.MethodPost, "/v1/queues/ev/jobs/"+later.ID+"/retry", nil)
	require.Equal(t, http.StatusOK, r.status)
	ev = s.event()
	require.Equal(t, "run_now", ev.typ)
	require.Equal(t, "pending", ev.data["status"])

	// The heartbeat comment, by the clock: the ticker is the only waiter
	// on this bundle's fake clock.
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
	b.clock.Advance(api.DefaultSSEHeartbeat)
	require.Equal(t, ": ping", s.line())
	require.Equal(t, "", s.line())
}

func TestEventsEveryQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.openEvents(t, "")
	for _, q := range []string{"one", "two"} {
		j := b.enqueue(t, map[string]any{"queue": q})
		ev := s.event()
		require.Equal(t, q, ev.data["queue"])
		require.Equal(t, j.ID, ev.data["id"])
	}
	// Several queues, repeated or comma-separated.
	s = b.openEvents(t, "?queue=x,y&queue=z")
	for _, q := range []string{"z", "x", "y"} {
		b.enqueue(t, map[string]any{"queue": q})
		require.Equal(t, q, s.event().data["queue"])
	}
}

func TestEventsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireError(t, b.do(t, http.MethodGet, "/v1/events?queue=Bad", nil), 400, "invalid_argument", "queue")
	many := strings.Repeat("q,", 101)
	requireError(t, b.do(t, http.MethodGet, "/v1/events?queue="+many+"q", nil), 400, "invalid_argument", "queue")
}

func TestEventsEndOnDrain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.openEvents(t, "?queue=d")
	b.srv.Drain()
	select {
	case _, ok := <-s.lines:
		require.False(t, ok, "stream should end")
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after Drain")
	}
}

func TestEventStreamsAreCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.api.MaxEventStreams = 2 })
	b.openEvents(t, "?queue=a")
	second := b.openEvents(t, "?queue=b")
	requireError(t, b.do(t, http.MethodGet, "/v1/events", nil), 503, "unavailable", "")
	// The streams still work, and a closed one frees its place.
	j := b.enqueue(t, map[string]any{"queue": "b"})
	require.Equal(t, j.ID, second.event().data["id"])
	second.close()
	require.Eventually(t, func() bool {
		// Only the status: a stream that opens would run on.
		ctx, cancel := context.WithCancel(b.ctx)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.http.URL+"/v1/events?queue=c", nil)
		require.NoError(t, err)
		res, err := b.http.Client().Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
}
