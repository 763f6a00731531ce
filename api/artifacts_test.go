package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// running enqueues one job into q and claims it.
func (b *testBundle) running(t *testing.T, q string) jobView {
	t.Helper()
	b.enqueue(t, map[string]any{"queue": q})
	jobs := b.claim(t, q, 1)
	require.Len(t, jobs, 1)
	return jobs[0]
}

func TestArtifactsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "art")
	base := "/v1/queues/art/jobs/" + j.ID

	r := b.do(t, http.MethodGet, base+"/artifacts", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.JSONEq(t, `{"artifacts":{}}`, string(r.body))

	r = b.do(t, http.MethodPut, base+"/artifacts/report.json", map[string]any{"token": j.Token, "value": map[string]any{"rows": 3}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.JSONEq(t, `{"artifacts":{"report.json":{"rows":3}}}`, string(r.body))
	requireError(t, b.do(t, http.MethodPut, base+"/artifacts/x", map[string]any{"token": "stale", "value": 1}), 409, "lease_lost", "")
	requireError(t, b.do(t, http.MethodPut, base+"/artifacts/b%20ad", map[string]any{"token": j.Token, "value": 1}), 400, "invalid_argument", "name")
	requireError(t, b.do(t, http.MethodPut, base+"/artifacts/x", map[string]any{"token": j.Token}), 400, "invalid_argument", "value")
	requireError(t, b.do(t, http.MethodPut, base+"/artifacts/big", map[string]any{"token": j.Token,
		"value": strings.Repeat("x", queue.MaxArtifactBytes)}), 413, "payload_too_large", "artifacts.big")

	// Over the count cap with the complete: 413, and the job stays
	// processing.
	many := map[string]any{}
	for i := range queue.MaxArtifacts {
		many[fmt.Sprintf("a%d", i)] = i
	}
	requireError(t, b.do(t, http.MethodPost, base+"/complete", map[string]any{"token": j.Token, "artifacts": many}),
		413, "payload_too_large", "artifacts")
	r = b.do(t, http.MethodPost, base+"/complete", map[string]any{"token": j.Token, "result": "ok",
		"artifacts": map[string]any{"summary": "all good", "report.json": []int{1, 2}}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := r.object(t)
	require.Equal(t, "completed", got["status"])
	require.Equal(t, map[string]any{"summary": "all good", "report.json": []any{float64(1), float64(2)}}, got["artifacts"])
	r = b.do(t, http.MethodGet, base, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, got["artifacts"], r.object(t)["artifacts"])
	requireError(t, b.do(t, http.MethodGet, "/v1/queues/art/jobs/nosuchjob/artifacts", nil), 404, "not_found", "")
}

func TestLogsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "logs")
	base := "/v1/queues/logs/jobs/" + j.ID

	r := b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"starting", "step 1"}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.JSONEq(t, `{"added":2,"last":2,"truncated":false}`, string(r.body))
	requireError(t, b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": "stale", "lines": []string{"x"}}), 409, "lease_lost", "")
	requireError(t, b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{}}), 400, "invalid_argument", "lines")
	requireError(t, b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token,
		"lines": make([]string, queue.MaxLogBatch+1)}), 400, "invalid_argument", "lines")
	r = b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"step 2"}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	r = b.do(t, http.MethodGet, base+"/logs", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	page := r.object(t)
	lines, _ := page["lines"].([]any)
	require.Len(t, lines, 3)
	first, _ := lines[0].(map[string]any)
	requireStamped(t, first["at"])
	require.Equal(t, float64(1), first["seq"])
	require.Equal(t, "starting", first["line"])
	require.Equal(t, float64(3), page["next"])
	require.Equal(t, false, page["truncated"])

	r = b.do(t, http.MethodGet, base+"/logs?after=1&limit=1", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	page = r.object(t)
	lines, _ = page["lines"].([]any)
	require.Len(t, lines, 1)
	require.Equal(t, "step 1", lines[0].(map[string]any)["line"])
	require.Equal(t, float64(2), page["next"])
	requireError(t, b.do(t, http.MethodGet, base+"/logs?after=-1", nil), 400, "invalid_argument", "after")
	requireError(t, b.do(t, http.MethodGet, base+"/logs?limit=0", nil), 400, "invalid_argument", "limit")

	// Readable after the job ended; appends are refused then.
	r = b.do(t, http.MethodPost, base+"/complete", map[string]any{"token": j.Token})
	require.Equal(t, http.StatusOK, r.status)
	requireError(t, b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"late"}}), 409, "lease_lost", "")
	r = b.do(t, http.MethodGet, base+"/logs?after=2", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, float64(3), r.object(t)["next"])
}

func TestHeartbeatProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "prog")
	base := "/v1/queues/prog/jobs/" + j.ID
	r := b.do(t, http.MethodGet, base, nil)
	require.NotContains(t, r.object(t), "progress", "none yet")
	r = b.do(t, http.MethodPost, base+"/heartbeat", map[string]any{"token": j.Token, "progress": map[string]any{"percent": 40, "message": "4 of 10"}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.do(t, http.MethodGet, base, nil)
	p, _ := r.object(t)["progress"].(map[string]any)
	require.NotNil(t, p, "body: %s", r.body)
	requireStamped(t, p["updated_at"])
	require.Equal(t, float64(40), p["percent"])
	require.Equal(t, "4 of 10", p["message"])
	for _, bad := range []map[string]any{{"percent": 101}, {"percent": -1}, {"message": "no percent"}} {
		requireError(t, b.do(t, http.MethodPost, base+"/heartbeat", map[string]any{"token": j.Token, "progress": bad}), 400, "invalid_argument", "progress.percent")
	}
	requireError(t, b.do(t, http.MethodPost, base+"/heartbeat", map[string]any{"token": j.Token,
		"progress": map[string]any{"percent": 1, "message": strings.Repeat("m", queue.MaxProgressMessageBytes+1)}}), 400, "invalid_argument", "progress.message")
	requireError(t, b.do(t, http.MethodPost, base+"/heartbeat", map[string]any{"token": "stale", "progress": map[string]any{"percent": 1}}), 409, "lease_lost", "")
}

// jobStream is a job's event stream as a test reads it.
type jobStream struct{ *sseStream }

type jobStreamEvent struct {
	typ, id string
	data    map[string]any
}

func (b *testBundle) openJobStream(t *testing.T, q, id string, hdr ...string) *jobStream {
	t.Helper()
	return &jobStream{b.openSSE(t, "/v1/queues/"+q+"/jobs/"+id+"/stream", hdr...)}
}

// streamRunning claims a job of queue q and opens its stream, whose first
// message must be the job, processing.
func (b *testBundle) streamRunning(t *testing.T, q string) (jobView, *jobStream) {
	t.Helper()
	j := b.running(t, q)
	s := b.openJobStream(t, q, j.ID)
	require.Equal(t, "processing", s.event().data["status"])
	return j, s
}

// event reads the next message (skipping comments), within 10 s: the
// stream's pings would keep a wait for a message that never comes alive.
func (s *jobStream) event() jobStreamEvent {
	s.t.Helper()
	var ev jobStreamEvent
	for deadline := time.Now().Add(10 * time.Second); ; {
		require.True(s.t, time.Now().Before(deadline), "no message within 10s")
		l := s.line()
		switch {
		case l == "" && ev.typ != "":
			return ev
		case strings.HasPrefix(l, ":"), l == "":
		case strings.HasPrefix(l, "event: "):
			ev.typ = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "id: "):
			ev.id = strings.TrimPrefix(l, "id: ")
		case strings.HasPrefix(l, "data: "):
			require.NoError(s.t, json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &ev.data))
		default:
			s.t.Fatalf("unexpected line %q", l)
		}
	}
}

// ended checks the stream ends.
func (s *jobStream) ended() {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		require.False(s.t, ok, "stream should end, got %q", l)
	case <-time.After(5 * time.Second):
		s.t.Fatal("stream still open")
	}
}

func TestJobStreamLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "live")
	base := "/v1/queues/live/jobs/" + j.ID
	r := b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"before the stream"}})
	require.Equal(t, http.StatusOK, r.status)

	s := b.openJobStream(t, "live", j.ID)
	ev := s.event()
	require.Equal(t, "log", ev.typ)
	require.Equal(t, "1", ev.id)
	require.Equal(t, "before the stream", ev.data["line"])
	ev = s.event()
	require.Equal(t, jobStreamEvent{typ: "status", data: map[string]any{"queue": "live", "id": j.ID, "kind": "test",
		"status": "processing", "attempts": float64(1)}}, ev)

	r = b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"two", "three"}})
	require.Equal(t, http.StatusOK, r.status)
	for i, want := range []string{"two", "three"} {
		ev = s.event()
		require.Equal(t, "log", ev.typ)
		require.Equal(t, fmt.Sprint(i+2), ev.id)
		require.Equal(t, want, ev.data["line"])
		requireStamped(t, ev.data["at"])
	}
	r = b.do(t, http.MethodPost, base+"/heartbeat", map[string]any{"token": j.Token, "progress": map[string]any{"percent": 50, "message": "half"}})
	require.Equal(t, http.StatusOK, r.status)
	ev = s.event()
	require.Equal(t, "progress", ev.typ)
	require.Equal(t, float64(50), ev.data["percent"])
	require.Equal(t, "half", ev.data["message"])

	r = b.do(t, http.MethodPost, base+"/complete", map[string]any{"token": j.Token})
	require.Equal(t, http.StatusOK, r.status)
	ev = s.event()
	require.Equal(t, "status", ev.typ)
	require.Equal(t, "completed", ev.data["status"])
	s.ended()

	// A stream of a finished job, resumed after seq 2 (Last-Event-ID):
	// the rest of its log, its progress, its status, and the end.
	s = b.openJobStream(t, "live", j.ID, "Last-Event-ID", "2")
	ev = s.event()
	require.Equal(t, "3", ev.id)
	require.Equal(t, "three", ev.data["line"])
	require.Equal(t, "progress", s.event().typ)
	ev = s.event()
	require.Equal(t, "status", ev.typ)
	require.Equal(t, "completed", ev.data["status"])
	s.ended()

	requireError(t, b.do(t, http.MethodGet, "/v1/queues/live/jobs/nosuchjob/stream", nil), 404, "not_found", "")
	requireError(t, b.do(t, http.MethodGet, base+"/stream?after=x", nil), 400, "invalid_argument", "after")
}

// A job that fails and is retried: its stream follows it through
// scheduled, and ends when it dies.
func TestJobStreamFollowsRetriesToDeath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, map[string]any{"queue": "die", "max_attempts": 2})
	j := b.claim(t, "die", 1)[0]
	s := b.openJobStream(t, "die", j.ID)
	require.Equal(t, "processing", s.event().data["status"])
	r := b.do(t, http.MethodPost, "/v1/queues/die/jobs/"+j.ID+"/fail", map[string]any{"token": j.Token, "error": "x", "retry_after": "0s"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	ev := s.event()
	require.Equal(t, "status", ev.typ)
	require.Contains(t, []any{"pending", "scheduled"}, ev.data["status"])
	j2 := b.claim(t, "die", 1)[0]
	for ev = s.event(); ev.data["status"] != "processing"; ev = s.event() {
		require.Equal(t, "status", ev.typ)
	}
	require.Equal(t, float64(2), ev.data["attempts"])
	r = b.do(t, http.MethodPost, "/v1/queues/die/jobs/"+j2.ID+"/fail", map[string]any{"token": j2.Token, "error": "x"})
	require.Equal(t, http.StatusOK, r.status)
	ev = s.event()
	require.Equal(t, "dead", ev.data["status"])
	s.ended()
}

// A stream that misses the job's events (here, the store publishes none)
// catches up from the store at each SSE heartbeat: nothing is lost.
func TestJobStreamCatchesUpWithoutEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, func(sc *setupConfig) { sc.queue.DisableEvents = true })
	j, s := b.streamRunning(t, "quiet")
	base := "/v1/queues/quiet/jobs/" + j.ID
	r := b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"unannounced"}})
	require.Equal(t, http.StatusOK, r.status)
	r = b.do(t, http.MethodPost, base+"/complete", map[string]any{"token": j.Token})
	require.Equal(t, http.StatusOK, r.status)
	// The stream's ticker is the only waiter on the bundle's fake clock.
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
	b.clock.Advance(api.DefaultSSEHeartbeat)
	ev := s.event()
	require.Equal(t, "log", ev.typ)
	require.Equal(t, "unannounced", ev.data["line"])
	require.Equal(t, "completed", s.event().data["status"])
	s.ended()
}

// A job's stream on Redis Cluster (sharded pub/sub), for jobs of queues
// on several nodes.
func TestJobStreamOnRedisCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	b := setup(t, func(sc *setupConfig) { sc.rdb = testutil.Cluster(t) })
	for _, q := range []string{"s0", "s1", "s2"} {
		j, s := b.streamRunning(t, q)
		base := "/v1/queues/" + q + "/jobs/" + j.ID
		r := b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"on " + q}})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, "on "+q, s.event().data["line"])
		r = b.do(t, http.MethodPost, base+"/complete", map[string]any{"token": j.Token, "artifacts": map[string]any{"q": q}})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, artifactEvent("q", q), s.event())
		require.Equal(t, "completed", s.event().data["status"])
		s.ended()
		r = b.do(t, http.MethodGet, base+"/artifacts", nil)
		require.JSONEq(t, `{"artifacts":{"q":"`+q+`"}}`, string(r.body))
	}
}

// requireStamped checks that got, a time as the API writes it and as
// Redis's clock decided it, is not before the fake clock's start and not
// absurdly after it (Redis's clock runs ahead of the fake one by the real
// time the test has taken, however slow the machine: no timing assert).
func requireStamped(t *testing.T, got any) {
	t.Helper()
	s, ok := got.(string)
	require.True(t, ok, "want a time, got %v", got)
	g, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	w, err := time.Parse(time.RFC3339Nano, fakeNow)
	require.NoError(t, err)
	require.False(t, g.Before(w), "got %s, before %s", g, w)
	require.Less(t, g.Sub(w), 10*time.Minute)
}

// A drained server ends the job streams under way, and a stream opened
// after the drain answers the job as it is, once.
func TestJobStreamEndsOnDrain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j, s := b.streamRunning(t, "dr")
	b.srv.Drain()
	s.ended()
	s = b.openJobStream(t, "dr", j.ID)
	require.Equal(t, "processing", s.event().data["status"])
	s.ended()
}

// A job's stream shows an artifact as it is attached (PUT
// .../artifacts/{name}) or replaced, and those given with its complete
// before its status; and the log's truncation, also by an append that
// adds no line. A stream opened later sends them at once.
func TestJobStreamArtifactsAndTruncation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.running(t, "arts")
	base := "/v1/queues/arts/jobs/" + j.ID
	s := b.openJobStream(t, "arts", j.ID)
	require.Equal(t, "status", s.event().typ)

	put := func(name string, v any) {
		t.Helper()
		r := b.do(t, http.MethodPut, base+"/artifacts/"+name, map[string]any{"token": j.Token, "value": v})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	}
	put("report", map[string]any{"rows": 3})
	require.Equal(t, artifactEvent("report", map[string]any{"rows": float64(3)}), s.event())
	put("report", map[string]any{"rows": 3}) // the same again: nothing new
	put("report", map[string]any{"rows": 4})
	require.Equal(t, artifactEvent("report", map[string]any{"rows": float64(4)}), s.event())

	// The log up to its cap of lines, then an append none of whose lines fit.
	batch := make([]string, queue.MaxLogBatch)
	for i := range batch {
		batch[i] = "l"
	}
	for range queue.MaxLogLines / queue.MaxLogBatch {
		r := b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": batch})
		require.Equal(t, http.StatusOK, r.status)
		for range batch {
			require.Equal(t, "log", s.event().typ)
		}
	}
	r := b.do(t, http.MethodPost, base+"/logs", map[string]any{"token": j.Token, "lines": []string{"dropped"}})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, float64(0), r.object(t)["added"])
	require.Equal(t, jobStreamEvent{typ: "log_truncated", data: map[string]any{"lines": float64(queue.MaxLogLines)}}, s.event())

	r = b.do(t, http.MethodPost, base+"/complete", map[string]any{"token": j.Token, "artifacts": map[string]any{"final": "yes"}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, artifactEvent("final", "yes"), s.event())
	ev := s.event()
	require.Equal(t, "status", ev.typ)
	require.Equal(t, "completed", ev.data["status"])
	s.ended()

	// Opened after the end, past the log's lines: the truncation, each
	// artifact by name, the status.
	s = b.openJobStream(t, "arts", j.ID, "Last-Event-ID", fmt.Sprint(queue.MaxLogLines))
	require.Equal(t, "log_truncated", s.event().typ)
	require.Equal(t, artifactEvent("final", "yes"), s.event())
	require.Equal(t, artifactEvent("report", map[string]any{"rows": float64(4)}), s.event())
	require.Equal(t, "completed", s.event().data["status"])
	s.ended()
}

// A job's stream sends its ping comment when nothing changed, as
// /v1/events does (a proxy would otherwise close a quiet stream).
func TestJobStreamPings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, s := b.streamRunning(t, "pings")
	// The stream's ticker is the only waiter on the bundle's fake clock.
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
	b.clock.Advance(api.DefaultSSEHeartbeat)
	require.Equal(t, ": ping", s.line())
	require.Equal(t, "", s.line())
}

// artifactEvent is a job stream's event for artifact name set to v, as
// the stream decodes it (numbers as float64).
func artifactEvent(name string, v any) jobStreamEvent {
	return jobStreamEvent{typ: "artifact", data: map[string]any{"name": name, "value": v}}
}
