package dispatch_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	testutilprom "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// hookRig is a client and a dispatcher on a fake clock whose event
// webhook passes the test runs itself (pass), so that a minute of a
// hookReceiver's absence is sixty passes, not a minute.
type hookRig struct {
	t     *testing.T
	ctx   context.Context
	clock *clockwork.FakeClock
	c     *queue.Client
	d     *dispatch.Dispatcher
	hooks *dispatch.Hooks
}

func newHookRig(t *testing.T) *hookRig { return newHookRigOn(t, testutil.Redis(t)) }

// newHookRigOn is newHookRig on rdb (a Redis Cluster's client).
func newHookRigOn(t *testing.T, rdb redis.UniversalClient) *hookRig {
	t.Helper()
	fc := testutil.FakeClock()
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: testutil.Namespace(t), Clock: fc, FollowClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	d, err := dispatch.New(dispatch.Config{Client: c, Guard: loopback})
	require.NoError(t, err)
	return &hookRig{t: t, ctx: t.Context(), clock: fc, c: c, d: d, hooks: d.Hooks()}
}

// pass advances the clock by step and runs a pass.
func (r *hookRig) pass(step time.Duration) {
	r.t.Helper()
	r.clock.Advance(step)
	require.NoError(r.t, dispatch.HookPass(r.ctx, r.d))
}

// end runs a job of q through the given ends: "retried" (a failure
// retried at once), "completed", "dead" (a failure sent to the dead set)
// or "canceled" (of the pending job).
func (r *hookRig) end(q, kind string, steps ...string) string {
	r.t.Helper()
	e, err := r.c.Enqueue(r.ctx, queue.NewJob{Queue: q, Kind: kind, MaxAttempts: 10})
	require.NoError(r.t, err)
	id := e.Job.ID
	for _, s := range steps {
		if s == "canceled" {
			_, err := r.c.Cancel(r.ctx, q, id)
			require.NoError(r.t, err)
			continue
		}
		jobs, err := r.c.Claim(r.ctx, q, queue.ClaimOptions{})
		require.NoError(r.t, err)
		require.Len(r.t, jobs, 1)
		require.Equal(r.t, id, jobs[0].ID)
		switch s {
		case "retried":
			_, err = r.c.Fail(r.ctx, q, id, jobs[0].Token, queue.FailOptions{Error: "boom", RetryAt: r.clock.Now()})
		case "dead":
			_, err = r.c.Fail(r.ctx, q, id, jobs[0].Token, queue.FailOptions{Error: "fatal", Dead: true})
		case "completed":
			err = r.c.Complete(r.ctx, q, id, jobs[0].Token, queue.CompleteOptions{})
		}
		require.NoError(r.t, err)
	}
	return id
}

// hookReceiver records the events it is sent, verifying each signature with
// the Standard Webhooks library (and its timestamp against now, the
// dispatcher's clock; nil: the library checks it against the real one);
// while down it answers 503.
type hookReceiver struct {
	t       *testing.T
	srv     *httptest.Server
	down    atomic.Bool
	secrets atomic.Pointer[[]string] // each must verify the request alone
	refuse  atomic.Pointer[[]string] // none of these may verify it
	now     func() time.Time

	mu       sync.Mutex
	events   []dispatch.HookEvent // accepted, in arrival order
	ids      []string             // their webhook-ids
	attempts int                  // every request
}

func newHookReceiver(t *testing.T, now func() time.Time, secrets ...string) *hookReceiver {
	rc := &hookReceiver{t: t, now: now}
	rc.secrets.Store(&secrets)
	rc.refuse.Store(&[]string{})
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts++
	if rc.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	ok := true
	for _, s := range *rc.secrets.Load() {
		wh, err := standardwebhooks.NewWebhook(s)
		switch {
		case err != nil:
		case rc.now == nil:
			err = wh.Verify(body, r.Header)
		default:
			// The library checks the timestamp against the real clock;
			// the dispatcher's is the test's fake one, checked below.
			err = wh.VerifyIgnoringTimestamp(body, r.Header)
		}
		if err != nil {
			rc.t.Errorf("a request does not verify with %s: %v", s, err)
			ok = false
		}
	}
	for _, s := range *rc.refuse.Load() {
		wh, err := standardwebhooks.NewWebhook(s)
		if err == nil && wh.VerifyIgnoringTimestamp(body, r.Header) == nil {
			rc.t.Errorf("a request verifies with %s, a secret dropped", s)
			ok = false
		}
	}
	if rc.now != nil && r.Header.Get("webhook-timestamp") != strconv.FormatInt(rc.now().Unix(), 10) {
		ts := r.Header.Get("webhook-timestamp")
		rc.t.Errorf("webhook-timestamp %s, want the dispatcher's clock %d", ts, rc.now().Unix())
	}
	var ev dispatch.HookEvent
	if err := json.Unmarshal(body, &ev); err != nil || !ok {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if r.Header.Get("chronoq-event") != ev.Type || r.Header.Get("chronoq-job-id") != ev.Data.ID {
		rc.t.Errorf("headers %v do not match the event %+v", r.Header, ev)
	}
	rc.events = append(rc.events, ev)
	rc.ids = append(rc.ids, r.Header.Get("webhook-id"))
	w.WriteHeader(http.StatusNoContent)
}

// byJob is the types of the events received, per job, in arrival order.
func (rc *hookReceiver) byJob() map[string][]string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string][]string{}
	for _, e := range rc.events {
		out[e.Data.ID] = append(out[e.Data.ID], e.Type)
	}
	return out
}

func (rc *hookReceiver) count() (events, attempts int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.events), rc.attempts
}

// A receiver that answers 503 for a simulated minute, and then one that
// is closed (connection refused), misses nothing: once it is back it gets
// every event, each once, in order for each job, signed. On one Redis and
// on a Redis Cluster, where the queues and the hooks sit in slots of
// their own.
func TestHooksReceiverDownForAMinuteMissesNothing(t *testing.T) {
	t.Parallel()
	onSingleAndCluster(t, receiverDownForAMinute)
}

// onSingleAndCluster runs f in parallel subtests on one Redis ("single")
// and on the Redis Cluster ("cluster").
func onSingleAndCluster(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		f(t, testutil.Redis(t))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		f(t, testutil.Cluster(t))
	})
}

func receiverDownForAMinute(t *testing.T, rdb redis.UniversalClient) {
	r := newHookRigOn(t, rdb)
	secret := dispatch.NewSecret()
	rc := newHookReceiver(t, r.clock.Now, secret)
	sub, err := r.hooks.Create(r.ctx, dispatch.Subscription{URL: rc.srv.URL, Queues: []string{"emails"}, Secrets: []string{secret}})
	require.NoError(t, err)
	require.Equal(t, []string{secret}, sub.Secrets)

	rc.down.Store(true)
	want := map[string][]string{}
	plan := [][]string{
		{"retried", "retried", "completed"},
		{"retried", "dead"},
		{"canceled"},
		{"completed"},
		{"retried", "retried", "retried", "completed"},
	}
	for range 3 {
		for _, steps := range plan {
			id := r.end("emails", "send", steps...)
			for _, s := range steps {
				want[id] = append(want[id], "job."+s)
			}
		}
		// Events of a queue the subscription does not name are not sent.
		r.end("other", "send", "completed")
		r.pass(time.Second)
	}
	for range 60 { // a minute down
		r.pass(time.Second)
	}
	got, attempts := rc.count()
	require.Zero(t, got)
	require.Positive(t, attempts, "the dispatcher tried while the hookReceiver was down")
	pending, dead, err := r.hooks.Backlog(r.ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, int64(countAll(want)), pending)
	require.Zero(t, dead)

	// Then closed: the connection is refused for another minute.
	url := rc.srv.URL
	rc.srv.Close()
	for range 60 {
		r.pass(time.Second)
	}
	// Back, on the same address.
	rc.down.Store(false)
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	ln, err := listenOn(url)
	require.NoError(t, err)
	rc.srv.Listener = ln
	rc.srv.Start()
	t.Cleanup(rc.srv.Close)
	for range 20 * 60 { // at most 20 simulated minutes: the longest backoff is 10
		if got, _ := rc.count(); got == countAll(want) {
			break
		}
		r.pass(time.Second)
	}
	_, reqs := rc.count()
	t.Logf("%d events, %d requests", countAll(want), reqs)
	require.Equal(t, want, rc.byJob())
	got, _ = rc.count()
	require.Equal(t, countAll(want), got, "each event once")
	pending, dead, err = r.hooks.Backlog(r.ctx, sub.ID)
	require.NoError(t, err)
	require.Zero(t, pending)
	require.Zero(t, dead)
	// webhook-id names the delivery: one each.
	rc.mu.Lock()
	ids := slices.Clone(rc.ids)
	rc.mu.Unlock()
	slices.Sort(ids)
	require.Len(t, slices.Compact(ids), countAll(want))
}

// listenOn listens again on the address of a closed test server's URL.
func listenOn(url string) (net.Listener, error) {
	return net.Listen("tcp", strings.TrimPrefix(url, "http://"))
}

func countAll(m map[string][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// Each subscription gets the events its filters take: queue, kind and
// event type, each empty for every one.
func TestHooksFilters(t *testing.T) {
	t.Parallel()
	r := newHookRig(t)
	mk := func(s dispatch.Subscription) *hookReceiver {
		rc := newHookReceiver(t, r.clock.Now)
		s.URL = rc.srv.URL
		_, err := r.hooks.Create(r.ctx, s)
		require.NoError(t, err)
		return rc
	}
	all := mk(dispatch.Subscription{})
	deadOfA := mk(dispatch.Subscription{Queues: []string{"a"}, Events: []string{dispatch.EventJobDead}})
	kindX := mk(dispatch.Subscription{Kinds: []string{"x"}})
	aOrBEnds := mk(dispatch.Subscription{Queues: []string{"b", "a"}, Events: []string{dispatch.EventJobCompleted, dispatch.EventJobCanceled}})

	a1 := r.end("a", "x", "retried", "dead")
	a2 := r.end("a", "y", "completed")
	b1 := r.end("b", "x", "canceled")
	c1 := r.end("c", "y", "retried", "completed")
	for range 3 {
		r.pass(time.Second)
	}
	require.Equal(t, map[string][]string{a1: {"job.retried", "job.dead"}, a2: {"job.completed"}, b1: {"job.canceled"},
		c1: {"job.retried", "job.completed"}}, all.byJob())
	require.Equal(t, map[string][]string{a1: {"job.dead"}}, deadOfA.byJob())
	require.Equal(t, map[string][]string{a1: {"job.retried", "job.dead"}, b1: {"job.canceled"}}, kindX.byJob())
	require.Equal(t, map[string][]string{a2: {"job.completed"}, b1: {"job.canceled"}}, aOrBEnds.byJob())

	// The event's body says what happened to the job.
	all.mu.Lock()
	var dead dispatch.HookEvent
	for _, e := range all.events {
		if e.Type == dispatch.EventJobDead {
			dead = e
		}
	}
	all.mu.Unlock()
	require.Equal(t, dispatch.HookEventData{Queue: "a", ID: a1, Kind: "x", Status: "dead", Attempts: 2, Error: "fatal"}, dead.Data)
	// When the job died, by Redis's clock, which follows the fake one (plus
	// the real time gone by since the test began).
	require.WithinRange(t, dead.Timestamp, r.clock.Now().Add(-3*time.Second).Truncate(time.Millisecond), r.clock.Now().Add(time.Minute))
}

// A delivery the receiver never takes is dead after HookMaxAttempts, kept
// in the subscription's dead list; a redrive sends it again, and the job's
// next delivery waits for none of it meanwhile.
func TestHooksDeadListAndRedrive(t *testing.T) {
	t.Parallel()
	r := newHookRig(t)
	rc := newHookReceiver(t, r.clock.Now)
	var fail atomic.Bool
	fail.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if fail.Load() {
			http.Error(w, "no thanks", http.StatusInternalServerError)
			return
		}
		rc.serve(w, req)
	}))
	t.Cleanup(srv.Close)
	var attempts []dispatch.HookAttempt
	var mu sync.Mutex
	reg := prometheus.NewRegistry()
	d, err := dispatch.New(dispatch.Config{Client: r.c, Guard: loopback, Registerer: reg, OnHookAttempt: func(a dispatch.HookAttempt) {
		mu.Lock()
		attempts = append(attempts, a)
		mu.Unlock()
	}})
	require.NoError(t, err)
	r.d, r.hooks = d, d.Hooks()
	sub, err := r.hooks.Create(r.ctx, dispatch.Subscription{URL: srv.URL})
	require.NoError(t, err)

	id := r.end("q", "k", "completed")
	for range 2 * 60 * 60 { // bounded: the backoffs add up to about 27 min
		if _, dead, err := r.hooks.Backlog(r.ctx, sub.ID); err == nil && dead > 0 {
			break
		}
		r.pass(time.Second)
	}
	mu.Lock()
	t.Logf("attempts %+v", attempts)
	mu.Unlock()
	dl, err := r.hooks.Dead(r.ctx, sub.ID, 10)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, dispatch.HookMaxAttempts, dl[0].Attempts)
	require.Contains(t, dl[0].Error, "HTTP 500")
	require.Contains(t, dl[0].Error, "no thanks")
	var ev dispatch.HookEvent
	require.NoError(t, json.Unmarshal(dl[0].Event, &ev))
	require.Equal(t, id, ev.Data.ID)
	mu.Lock()
	require.Len(t, attempts, dispatch.HookMaxAttempts)
	for i, a := range attempts {
		require.Equal(t, i+1, a.Attempt)
		require.Equal(t, 500, a.Status)
		require.Equal(t, dl[0].ID, a.ID)
	}
	require.Equal(t, "dead", attempts[len(attempts)-1].Outcome)
	mu.Unlock()
	require.NoError(t, testutilprom.GatherAndCompare(reg, strings.NewReader(`
# HELP chronoq_webhook_requests_total Event webhook requests by outcome: delivered (2xx), retry (sent again after a backoff), dead (no more attempts).
# TYPE chronoq_webhook_requests_total counter
chronoq_webhook_requests_total{outcome="dead"} 1
chronoq_webhook_requests_total{outcome="retry"} 11
`), "chronoq_webhook_requests_total"))

	// The backoff doubled from a second up to its cap: the first death
	// came after at least the sum of the waits.
	// A redrive of an id that is not dead moves nothing.
	n, err := r.hooks.Redrive(r.ctx, sub.ID, []string{"q/1-1"})
	require.NoError(t, err)
	require.Zero(t, n)
	fail.Store(false)
	n, err = r.hooks.Redrive(r.ctx, sub.ID, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r.pass(time.Second)
	require.Equal(t, map[string][]string{id: {"job.completed"}}, rc.byJob())
	pending, dead, err := r.hooks.Backlog(r.ctx, sub.ID)
	require.NoError(t, err)
	require.Zero(t, pending)
	require.Zero(t, dead)
}

// Rotation: with two secrets every request carries both signatures, each
// verifying alone; after the old one is dropped, only the new verifies.
func TestHooksSecretRotation(t *testing.T) {
	t.Parallel()
	r := newHookRig(t)
	oldS, newS := dispatch.NewSecret(), dispatch.NewSecret()
	rc := newHookReceiver(t, r.clock.Now, oldS)
	rc.refuse.Store(&[]string{newS})
	sub, err := r.hooks.Create(r.ctx, dispatch.Subscription{URL: rc.srv.URL, Secrets: []string{oldS}})
	require.NoError(t, err)
	r.end("q", "k", "completed")
	r.pass(time.Second)

	// Both: the receiver can move to the new one with no request failing.
	up, err := r.hooks.Update(r.ctx, sub.ID, dispatch.Subscription{URL: rc.srv.URL, Secrets: []string{oldS, newS}})
	require.NoError(t, err)
	require.Equal(t, []string{oldS, newS}, up.Secrets)
	require.Equal(t, sub.CreatedAt, up.CreatedAt)
	rc.secrets.Store(&[]string{oldS, newS})
	rc.refuse.Store(&[]string{})
	r.end("q", "k", "completed")
	r.pass(time.Second)

	// An update that names no secret keeps them.
	up, err = r.hooks.Update(r.ctx, sub.ID, dispatch.Subscription{URL: rc.srv.URL, Kinds: []string{"k"}})
	require.NoError(t, err)
	require.Equal(t, []string{oldS, newS}, up.Secrets)

	// The old one dropped.
	_, err = r.hooks.Update(r.ctx, sub.ID, dispatch.Subscription{URL: rc.srv.URL, Secrets: []string{newS}})
	require.NoError(t, err)
	rc.secrets.Store(&[]string{newS})
	rc.refuse.Store(&[]string{oldS})
	r.end("q", "k", "completed")
	r.pass(time.Second)
	got, attempts := rc.count()
	require.Equal(t, 3, got)
	require.Equal(t, 3, attempts)
}

// Bad subscriptions are refused naming the field; the caps hold.
func TestHooksValidationAndCaps(t *testing.T) {
	t.Parallel()
	r := newHookRig(t)
	ok := "http://127.0.0.1:9/x"
	for _, c := range []struct {
		s     dispatch.Subscription
		field string
	}{
		{dispatch.Subscription{}, "url"},
		{dispatch.Subscription{URL: "ftp://example.com/"}, "url"},
		{dispatch.Subscription{URL: "http://10.0.0.1/"}, "url"},
		{dispatch.Subscription{URL: ok, Events: []string{"job.done"}}, "events[0]"},
		{dispatch.Subscription{URL: ok, Queues: []string{"a", "bad queue"}}, "queues[1]"},
		{dispatch.Subscription{URL: ok, Kinds: []string{""}}, "kinds[0]"},
		{dispatch.Subscription{URL: ok, Secrets: []string{"whsec_short"}}, "secrets[0]"},
		{dispatch.Subscription{URL: ok, Secrets: []string{dispatch.NewSecret(), dispatch.NewSecret(), dispatch.NewSecret()}}, "secrets"},
		{dispatch.Subscription{URL: ok, Timeout: time.Minute}, "timeout"},
		{dispatch.Subscription{URL: ok, Headers: map[string]string{"webhook-id": "x"}}, "headers"},
	} {
		_, err := r.hooks.Create(r.ctx, c.s)
		var fe *queue.FieldError
		require.ErrorAs(t, err, &fe, "%+v", c.s)
		require.Equal(t, c.field, fe.Field, "%v", err)
		require.ErrorIs(t, err, queue.ErrInvalid)
	}
	_, err := r.hooks.Get(r.ctx, "0123456789abcdef")
	require.ErrorIs(t, err, dispatch.ErrNoSubscription)
	_, err = r.hooks.Get(r.ctx, "../x")
	require.ErrorIs(t, err, dispatch.ErrNoSubscription)
	require.ErrorIs(t, r.hooks.Delete(r.ctx, "0123456789abcdef"), dispatch.ErrNoSubscription)

	for range dispatch.MaxSubscriptions {
		_, err := r.hooks.Create(r.ctx, dispatch.Subscription{URL: ok, Queues: []string{"q"}})
		require.NoError(t, err)
	}
	_, err = r.hooks.Create(r.ctx, dispatch.Subscription{URL: ok})
	require.ErrorIs(t, err, dispatch.ErrTooManySubscribers)
	list, err := r.hooks.List(r.ctx)
	require.NoError(t, err)
	require.Len(t, list, dispatch.MaxSubscriptions)
	// Deleting one makes room, and takes its deliveries with it.
	// (Past the cap of queues, a subscription naming a new one is not
	// made: it would send nothing.)
	require.NoError(t, r.hooks.Delete(r.ctx, list[0].ID))
	_, err = r.hooks.Create(r.ctx, dispatch.Subscription{URL: ok})
	require.NoError(t, err)
}

// A running dispatcher (Run, on the real clock) delivers the events of a
// subscription made while it runs, to every queue: one made after the
// subscription too, from its first event.
func TestHooksDispatcherRunDelivers(t *testing.T) {
	t.Parallel()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	d, err := dispatch.New(dispatch.Config{Client: c, Guard: loopback, HookInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	dh := lifecycle.Start(t.Context(), d)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, dh.Stop(sctx))
	})
	rc := newHookReceiver(t, nil) // the real clock: the library checks the timestamp
	_, err = d.Hooks().Create(t.Context(), dispatch.Subscription{URL: rc.srv.URL, Secrets: []string{dispatch.NewSecret()}})
	require.NoError(t, err)
	// A queue new since the subscription.
	e, err := c.Enqueue(t.Context(), queue.NewJob{Queue: "fresh", Kind: "k"})
	require.NoError(t, err)
	_, err = c.Cancel(t.Context(), "fresh", e.Job.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { n, _ := rc.count(); return n == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, map[string][]string{e.Job.ID: {"job.canceled"}}, rc.byJob())
}

// The dead list keeps the newest MaxHookDead: an older one is dropped as a
// newer one dies (shown with a cap of 2 through the script itself).
func TestHooksDeadListCap(t *testing.T) {
	t.Parallel()
	r := newHookRig(t)
	sub, err := r.hooks.Create(r.ctx, dispatch.Subscription{URL: "http://127.0.0.1:9/"})
	require.NoError(t, err)
	k := store.HookKeysOf(plumbing.Of(r.c).Namespace(), sub.ID).List()
	eng := plumbing.Of(r.c).Engine()
	_, err = store.CallGlobal(r.ctx, eng, store.HookFanout, k, &store.HookFanoutArgs{ID: sub.ID, Queue: "q", MaxPending: 2,
		Entries: []store.HookFanoutItem{{SID: "1-0", Job: "q|a", Body: "{}"}, {SID: "2-0", Job: "q|b", Body: "{}"},
			{SID: "3-0", Job: "q|c", Body: "{}"}}})
	require.NoError(t, err)
	pending, _, err := r.hooks.Backlog(r.ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), pending, "the pending cap: the third dropped")
	_, err = store.CallGlobal(r.ctx, eng, store.HookFanout, k, &store.HookFanoutArgs{ID: sub.ID, Queue: "q", MaxPending: 10,
		Entries: []store.HookFanoutItem{{SID: "3-0", Job: "q|c", Body: "{}"}, {SID: "4-0", Job: "q|d", Body: "{}"}}})
	require.NoError(t, err)
	pending, _, err = r.hooks.Backlog(r.ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), pending, "an entry at or before the cursor is not taken again")

	cl, err := store.CallGlobal(r.ctx, eng, store.HookClaim, k, &store.HookClaimArgs{ID: sub.ID, Scan: 10, Max: 10, LeaseMs: 1000})
	require.NoError(t, err)
	require.Len(t, cl.Rows, 9)
	var acks []store.HookAckItem
	for i := 0; i < len(cl.Rows); i += 3 {
		key := cl.Rows[i].(string)
		acks = append(acks, store.HookAckItem{Key: key, Attempts: 1, Outcome: "dead",
			Dead: `{"id":"` + strings.Replace(key, "|", "/", 1) + `","event":{},"attempts":1,"error":"x","died_at":"2030-01-01T00:00:00Z"}`})
	}
	_, err = store.CallGlobal(r.ctx, eng, store.HookAck, k, &store.HookAckArgs{ID: sub.ID, MaxDead: 2, Acks: acks})
	require.NoError(t, err)
	dl, err := r.hooks.Dead(r.ctx, sub.ID, 10)
	require.NoError(t, err)
	require.Len(t, dl, 2)
	pending, dead, err := r.hooks.Backlog(r.ctx, sub.ID)
	require.NoError(t, err)
	require.Zero(t, pending)
	require.Equal(t, int64(2), dead)
}

// The other paths that end a job send their events too: a lease that
// lapsed on the last attempt (the reclaim sweep: dead), and a claimed job
// canceled, then handed back (canceled).
func TestHooksEventsOfReclaimAndRelease(t *testing.T) {
	t.Parallel()
	r := newHookRig(t)
	rc := newHookReceiver(t, r.clock.Now)
	_, err := r.hooks.Create(r.ctx, dispatch.Subscription{URL: rc.srv.URL, Queues: []string{"q"}})
	require.NoError(t, err)

	lost, err := r.c.Enqueue(r.ctx, queue.NewJob{Queue: "q", Kind: "k", MaxAttempts: 1})
	require.NoError(t, err)
	jobs, err := r.c.Claim(r.ctx, "q", queue.ClaimOptions{Visibility: time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	r.clock.Advance(2 * time.Second)
	_, err = r.c.Reclaim(r.ctx, "q")
	require.NoError(t, err)

	held, err := r.c.Enqueue(r.ctx, queue.NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	jobs, err = r.c.Claim(r.ctx, "q", queue.ClaimOptions{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	_, err = r.c.Cancel(r.ctx, "q", held.Job.ID) // running: a cancel requested
	require.NoError(t, err)
	require.NoError(t, r.c.Release(r.ctx, "q", held.Job.ID, jobs[0].Token))

	r.pass(time.Second)
	require.Equal(t, map[string][]string{lost.Job.ID: {"job.dead"}, held.Job.ID: {"job.canceled"}}, rc.byJob())
}

// A cron entry's tick sends cron.fired, naming the entry, with the job it
// enqueued; a subscription to that type alone gets none of the job's own
// events. Real processes: a running scheduler and dispatcher.
func TestHooksCronFired(t *testing.T) {
	t.Parallel()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	d, err := dispatch.New(dispatch.Config{Client: c, Guard: loopback, HookInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	rc := newHookReceiver(t, nil)
	_, err = d.Hooks().Create(t.Context(), dispatch.Subscription{URL: rc.srv.URL, Events: []string{dispatch.EventCronFired}})
	require.NoError(t, err)
	_, err = cron.NewStore(c).Put(t.Context(), cron.Entry{Name: "every.second", Schedule: "* * * * * *", Queue: "ticks", Kind: "tick"})
	require.NoError(t, err)
	sched, err := cron.NewScheduler(cron.Config{Client: c})
	require.NoError(t, err)
	for _, r := range []lifecycle.Runner{d, sched} {
		h := lifecycle.Start(t.Context(), r)
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, h.Stop(sctx))
		})
	}
	require.Eventually(t, func() bool { n, _ := rc.count(); return n >= 2 }, 10*time.Second, 5*time.Millisecond)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, e := range rc.events[:2] {
		require.Equal(t, dispatch.EventCronFired, e.Type)
		require.Equal(t, "every.second", e.Data.Cron)
		require.Equal(t, "ticks", e.Data.Queue)
		require.Equal(t, "tick", e.Data.Kind)
		j, err := c.Get(t.Context(), "ticks", e.Data.ID)
		require.NoError(t, err, "the event names the tick's job")
		require.Equal(t, "tick", j.Kind)
	}
	require.NotEqual(t, rc.events[0].Data.ID, rc.events[1].Data.ID, "a job a tick")
}

// A subscription that names a queue past the client's cap of queues is
// refused, and not kept; an update to one keeps the subscription as it
// was.
func TestHooksQueueCap(t *testing.T) {
	t.Parallel()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), MaxQueues: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	h := dispatch.NewHooks(c, loopback)
	sub, err := h.Create(t.Context(), dispatch.Subscription{URL: "http://127.0.0.1:9/", Queues: []string{"a", "b"}})
	require.NoError(t, err)
	_, err = h.Create(t.Context(), dispatch.Subscription{URL: "http://127.0.0.1:9/", Queues: []string{"c"}})
	require.ErrorIs(t, err, queue.ErrTooManyQueues)
	_, err = h.Update(t.Context(), sub.ID, dispatch.Subscription{URL: "http://127.0.0.1:9/", Queues: []string{"a", "d"}})
	require.ErrorIs(t, err, queue.ErrTooManyQueues)
	list, err := h.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, []string{"a", "b"}, list[0].Queues)
}
