package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// eventWait bounds the wait for one event: pub/sub on loopback takes
// microseconds, so only a lost event waits this long.
const eventWait = 5 * time.Second

func nextEvent(t *testing.T, ch <-chan queue.Event) queue.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "events channel closed")
		return ev
	case <-time.After(eventWait):
		t.Fatal("no event within", eventWait)
		return queue.Event{}
	}
}

// requireEvent checks got against want, whose At is the fake clock's
// time: an event's time is Redis's, which runs a little ahead of it (see
// queue.Config.Clock).
func requireEvent(t *testing.T, want, got queue.Event) {
	t.Helper()
	requireSoonAfter(t, want.At, got.At, "the event's time")
	got.At = want.At
	require.Equal(t, want, got)
}

type eventsBundle struct {
	ctx    context.Context
	client *queue.Client
	clock  *clockwork.FakeClock
}

func setupEvents(t *testing.T, rdb redis.UniversalClient) *eventsBundle {
	t.Helper()
	clock := testutil.FakeClock()
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: clock, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &eventsBundle{ctx: t.Context(), client: c, clock: clock}
}

func TestSubscribe(t *testing.T) {
	t.Parallel()
	for name, connect := range map[string]func(*testing.T) redis.UniversalClient{
		"single":  func(t *testing.T) redis.UniversalClient { return testutil.Redis(t) },
		"cluster": func(t *testing.T) redis.UniversalClient { return testutil.Cluster(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "cluster" && testing.Short() {
				t.Skip("cluster skipped in -short mode")
			}

			t.Run("a job's life", func(t *testing.T) {
				t.Parallel()
				b := setupEvents(t, connect(t))
				events, err := b.client.Subscribe(b.ctx, "mail")
				require.NoError(t, err)

				e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "mail", Kind: "send:welcome"})
				require.NoError(t, err)
				id := e.Job.ID
				at := testutil.FakeClock().Now()
				requireEvent(t, queue.Event{Type: "enqueued", Queue: "mail", ID: id, Kind: "send:welcome",
					Status: queue.StatusPending, Attempts: 0, At: at}, nextEvent(t, events))

				b.clock.Advance(time.Second)
				jobs, err := b.client.Claim(b.ctx, "mail", queue.ClaimOptions{})
				require.NoError(t, err)
				require.Len(t, jobs, 1)
				requireEvent(t, queue.Event{Type: "claimed", Queue: "mail", ID: id, Kind: "send:welcome",
					Status: queue.StatusProcessing, Attempts: 1, At: at.Add(time.Second)}, nextEvent(t, events))

				_, err = b.client.Fail(b.ctx, "mail", id, jobs[0].Token, queue.FailOptions{Error: "smtp down"})
				require.NoError(t, err)
				ev := nextEvent(t, events)
				require.Equal(t, "retried", ev.Type)
				require.Equal(t, "send:welcome", ev.Kind)
				require.Equal(t, queue.StatusScheduled, ev.Status)
				require.Equal(t, 1, ev.Attempts)

				b.clock.Advance(time.Hour)
				n, _, err := b.client.Promote(b.ctx, "mail", 0)
				require.NoError(t, err)
				require.Equal(t, 1, n)
				ev = nextEvent(t, events)
				require.Equal(t, "promoted", ev.Type)
				require.Equal(t, queue.StatusPending, ev.Status)

				jobs, err = b.client.Claim(b.ctx, "mail", queue.ClaimOptions{})
				require.NoError(t, err)
				require.Equal(t, "claimed", nextEvent(t, events).Type)
				require.NoError(t, b.client.Complete(b.ctx, "mail", id, jobs[0].Token, queue.CompleteOptions{}))
				ev = nextEvent(t, events)
				require.Equal(t, "completed", ev.Type)
				require.Equal(t, queue.StatusCompleted, ev.Status)
				require.Equal(t, 2, ev.Attempts)
			})

			t.Run("only the queues asked for", func(t *testing.T) {
				t.Parallel()
				b := setupEvents(t, connect(t))
				// Several queues, so that on the cluster they sit on more
				// than one node.
				qs := []string{"q0", "q1", "q2", "q3", "q4", "q5"}
				events, err := b.client.Subscribe(b.ctx, qs...)
				require.NoError(t, err)
				_, err = b.client.Enqueue(b.ctx, queue.NewJob{Queue: "other", Kind: "k"})
				require.NoError(t, err)
				want := map[string]string{}
				for _, q := range qs {
					e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: q, Kind: "k"})
					require.NoError(t, err)
					want[q] = e.Job.ID
				}
				got := map[string]string{}
				for range qs {
					ev := nextEvent(t, events)
					got[ev.Queue] = ev.ID
				}
				require.Equal(t, want, got)
			})

			t.Run("channel closes with the context", func(t *testing.T) {
				t.Parallel()
				b := setupEvents(t, connect(t))
				ctx, cancel := context.WithCancel(b.ctx)
				events, err := b.client.Subscribe(ctx, "q")
				require.NoError(t, err)
				cancel()
				select {
				case _, ok := <-events:
					for ok {
						_, ok = <-events
					}
				case <-time.After(eventWait):
					t.Fatal("channel still open")
				}
			})

			t.Run("invalid queue", func(t *testing.T) {
				t.Parallel()
				b := setupEvents(t, connect(t))
				_, err := b.client.Subscribe(b.ctx, "ok", "Bad{name}")
				require.ErrorIs(t, err, queue.ErrInvalidQueue)
			})
		})
	}
}

func TestSubscribeBatchEvents(t *testing.T) {
	t.Parallel()
	b := setupEvents(t, testutil.Redis(t))
	events, err := b.client.Subscribe(b.ctx, "batch")
	require.NoError(t, err)
	njs := make([]queue.NewJob, 50)
	for i := range njs {
		njs[i] = queue.NewJob{Queue: "batch", Kind: fmt.Sprint("k", i)}
	}
	res, err := b.client.EnqueueBatch(b.ctx, njs)
	require.NoError(t, err)
	for i := range njs {
		ev := nextEvent(t, events)
		require.Equal(t, "enqueued", ev.Type)
		require.Equal(t, res[i].Job.ID, ev.ID)
		require.Equal(t, fmt.Sprint("k", i), ev.Kind)
	}
	jobs, err := b.client.Claim(b.ctx, "batch", queue.ClaimOptions{Max: 50})
	require.NoError(t, err)
	require.Len(t, jobs, 50)
	for range jobs {
		require.Equal(t, "claimed", nextEvent(t, events).Type)
	}
}

func TestSubscribeEveryQueueSingle(t *testing.T) {
	t.Parallel()
	b := setupEvents(t, testutil.Redis(t))
	events, err := b.client.Subscribe(b.ctx)
	require.NoError(t, err)
	// Queues that did not exist when the subscription began.
	for i := range 3 {
		q := fmt.Sprintf("new-%d", i)
		e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: q, Kind: "k"})
		require.NoError(t, err)
		ev := nextEvent(t, events)
		require.Equal(t, q, ev.Queue)
		require.Equal(t, e.Job.ID, ev.ID)
	}
	// A batch, which asks whether anyone listens: the pattern does.
	res, err := b.client.EnqueueBatch(b.ctx, []queue.NewJob{{Queue: "new-b", Kind: "k"}, {Queue: "new-b", Kind: "k"}})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, r.Job.ID, nextEvent(t, events).ID)
	}
}

// TestBatchEventsOnlyWhenListened: a batch script builds and publishes its
// events only when the channel has a subscriber (or a pattern exists), on a
// server of its own so that no other test's subscription counts.
func TestBatchEventsOnlyWhenListened(t *testing.T) {
	t.Parallel()
	rs := testutil.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	b := setupEvents(t, rdb)
	publishes := func() int { return int(commandStats(t, b.ctx, rdb)["publish"].calls) }
	// Jobs due now: a new earliest scheduled job would publish a nudge
	// to the promoters, which this counts too.
	batch := []queue.NewJob{{Queue: "q", Kind: "k"}, {Queue: "q", Kind: "k"}}
	_, err := b.client.EnqueueBatch(b.ctx, batch)
	require.NoError(t, err)
	require.Zero(t, publishes(), "a batch nobody listens to publishes nothing")

	events, err := b.client.Subscribe(b.ctx, "q")
	require.NoError(t, err)
	res, err := b.client.EnqueueBatch(b.ctx, batch)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, r.Job.ID, nextEvent(t, events).ID)
	}
	require.Equal(t, 1, publishes(), "one message for the whole batch")
}

func TestSubscribeEveryQueueCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	b := setupEvents(t, testutil.Cluster(t))
	_, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "known", Kind: "k"})
	require.NoError(t, err)

	events, err := b.client.Subscribe(b.ctx)
	require.NoError(t, err)
	e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "known", Kind: "k"})
	require.NoError(t, err)
	require.Equal(t, e.Job.ID, nextEvent(t, events).ID)

	// A queue created later is followed from the next refresh on: the
	// refresh loop parks on its timer again only after it subscribed.
	_, err = b.client.Enqueue(b.ctx, queue.NewJob{Queue: "later", Kind: "k"})
	require.NoError(t, err)
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
	b.clock.Advance(queue.EventsRefresh)
	require.NoError(t, b.clock.BlockUntilContext(b.ctx, 1))
	e, err = b.client.Enqueue(b.ctx, queue.NewJob{Queue: "later", Kind: "k"})
	require.NoError(t, err)
	ev := nextEvent(t, events)
	require.Equal(t, "later", ev.Queue)
	require.Equal(t, e.Job.ID, ev.ID)
}

func TestParseEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2000, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	for _, tt := range []struct {
		payload string
		want    queue.Event
		ok      bool
	}{
		{"claimed|abc|mail:send|processing|2|" + fmt.Sprint(at.UnixMilli()),
			queue.Event{Type: "claimed", Queue: "q", ID: "abc", Kind: "mail:send", Status: queue.StatusProcessing, Attempts: 2, At: at}, true},
		{"enqueued|abc||pending|0|1", queue.Event{Type: "enqueued", Queue: "q", ID: "abc", Status: queue.StatusPending, At: time.UnixMilli(1).UTC()}, true},
		{"", queue.Event{}, false},
		{"claimed|abc|k|processing|x|1", queue.Event{}, false},
		{"claimed|abc|k|processing|1|x", queue.Event{}, false},
		{"claimed|abc|k|processing|1", queue.Event{}, false},
		{"|abc|k|processing|1|1", queue.Event{}, false},
	} {
		got, ok := queue.ParseEvent("q", tt.payload)
		require.Equal(t, tt.ok, ok, tt.payload)
		require.Equal(t, tt.want, got, tt.payload)
	}
}

// Attaching artifacts to a running job publishes an "artifact" event, and
// an append to its log that only marks it truncated (none of its lines
// fit) publishes a "log" event; a later append to a log truncated
// already publishes nothing.
func TestArtifactAndLogTruncatedEvents(t *testing.T) {
	t.Parallel()
	b := setupEvents(t, testutil.Redis(t))
	events, err := b.client.Subscribe(b.ctx, "q")
	require.NoError(t, err)
	e, err := b.client.Enqueue(b.ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	require.Equal(t, "enqueued", nextEvent(t, events).Type)
	js, err := b.client.Claim(b.ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, js, 1)
	require.Equal(t, "claimed", nextEvent(t, events).Type)
	id, token := e.Job.ID, js[0].Token

	require.NoError(t, b.client.AttachArtifacts(b.ctx, "q", id, token, map[string]json.RawMessage{"report": json.RawMessage(`{"ok":true}`)}))
	ev := nextEvent(t, events)
	require.Equal(t, "artifact", ev.Type)
	require.Equal(t, id, ev.ID)
	require.Equal(t, queue.StatusProcessing, ev.Status)
	require.Equal(t, 1, ev.Attempts)

	// Fill the log to its cap of lines: an event an append.
	batch := make([]string, queue.MaxLogBatch)
	for i := range batch {
		batch[i] = "line"
	}
	for range queue.MaxLogLines / queue.MaxLogBatch {
		a, err := b.client.AppendLog(b.ctx, "q", id, token, batch)
		require.NoError(t, err)
		require.False(t, a.Truncated)
		require.Equal(t, "log", nextEvent(t, events).Type)
	}
	a, err := b.client.AppendLog(b.ctx, "q", id, token, []string{"one too many"})
	require.NoError(t, err)
	require.Zero(t, a.Added)
	require.True(t, a.Truncated)
	ev = nextEvent(t, events)
	require.Equal(t, "log", ev.Type, "the log was marked truncated")
	require.Equal(t, id, ev.ID)

	// Truncated already: nothing; the next event is the artifact's.
	_, err = b.client.AppendLog(b.ctx, "q", id, token, []string{"dropped"})
	require.NoError(t, err)
	require.NoError(t, b.client.AttachArtifacts(b.ctx, "q", id, token, map[string]json.RawMessage{"n": json.RawMessage(`2`)}))
	require.Equal(t, "artifact", nextEvent(t, events).Type)
}
