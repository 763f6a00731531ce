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
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
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

func newHookRig(t *testing.T) *hookRig {
	t.Helper()
	fc := testutil.FakeClock()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), Clock: fc, FollowClock: true})
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
			err = r.c.Complete(r.ctx, q, id, jobs[0].Token, nil)
		}
		require.NoError(r.t, err)
	}
	return id
}

// hookReceiver records the events it is sent, verifying each signature with
// the Standard Webhooks library; while down it answers 503.
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
		if err == nil {
			// The library checks the timestamp against the real clock;
			// the dispatcher's is the test's fake one, checked here.
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
	if ts := r.Header.Get("webhook-timestamp"); ts != strconv.FormatInt(rc.now().Unix(), 10) {
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

// A hookReceiver that answers 503 for a simulated minute, and then one that
// is closed (connection refused), misses nothing: once it is back it gets
// every event, each once, in order for each job, signed.
func TestHooksReceiverDownForAMinuteMissesNothing(t *testing.T) {
	t.Parallel()
	r := newHookRig(t)
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
	t.Logf("%d events, %d requests", countAll(want), rc.attempts)
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
