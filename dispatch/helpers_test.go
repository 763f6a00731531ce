package dispatch_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/dispatch"
	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// loopback opens 127.0.0.1 for the test's receivers: the default guard
// refuses it.
var loopback = dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// fastBackoff retries at once, so that tests of retries take milliseconds.
var fastBackoff = queue.Backoff{Initial: 5 * time.Millisecond, Factor: 1, Max: 5 * time.Millisecond}

type rig struct {
	t     *testing.T
	tb    testing.TB // t, or a benchmark's b
	ctx   context.Context
	c     *queue.Client
	d     *dispatch.Dispatcher
	store *dispatch.Store
}

// newRigB is newRig for benchmarks: the real backoff does not matter.
func newRigB(b *testing.B, _ int) *rig {
	b.Helper()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(b), Namespace: testutil.Namespace(b), DisableEvents: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	d, err := dispatch.New(dispatch.Config{Client: c, Guard: loopback, RefreshInterval: time.Second})
	require.NoError(b, err)
	dh := lifecycle.Start(b.Context(), d)
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = dh.Stop(sctx)
	})
	// A promoter, as serve runs: it promotes the jobs scheduled while the
	// dispatcher waits.
	p, err := delayed.NewPromoter(delayed.Config{Source: c.Source()})
	require.NoError(b, err)
	ph := lifecycle.Start(b.Context(), p)
	b.Cleanup(func() { _ = ph.Stop(context.Background()) })
	return &rig{t: nil, tb: b, ctx: b.Context(), c: c, d: d, store: d.Store()}
}

func newReceiverB(b *testing.B, h http.HandlerFunc) *httptest.Server {
	s := httptest.NewServer(h)
	b.Cleanup(s.Close)
	return s
}

// newRig is a client on a namespace of the test's own and a dispatcher
// with guard g, stopped at cleanup. mod may change the dispatcher's config.
func newRig(t *testing.T, g dispatch.Guard, mod func(*dispatch.Config)) *rig {
	t.Helper()
	ctx := t.Context()
	bo := fastBackoff
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t), DefaultBackoff: &bo})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() }) // after the dispatcher's stop, registered below
	cfg := dispatch.Config{Client: c, Guard: g, RefreshInterval: 50 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	d, err := dispatch.New(cfg)
	require.NoError(t, err)
	dh := lifecycle.Start(ctx, d)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, dh.Stop(sctx))
	})
	return &rig{t: t, tb: t, ctx: ctx, c: c, d: d, store: d.Store()}
}

// push makes q a push queue to url and has the dispatcher serve it now.
func (r *rig) push(q, url string, mod func(*dispatch.QueueConfig)) dispatch.QueueConfig {
	r.tb.Helper()
	qc := dispatch.QueueConfig{Target: dispatch.Target{URL: url}}
	if mod != nil {
		mod(&qc)
	}
	out, err := r.store.Put(r.ctx, q, qc)
	require.NoError(r.tb, err)
	require.NoError(r.tb, r.d.Refresh(r.ctx))
	return out
}

func (r *rig) enqueue(nj queue.NewJob) *queue.Job {
	r.t.Helper()
	if nj.Kind == "" {
		nj.Kind = "k"
	}
	e, err := r.c.Enqueue(r.ctx, nj)
	require.NoError(r.t, err)
	return e.Job
}

// wait polls the job until it is in one of statuses, for at most 15 s.
func (r *rig) wait(q, id string, statuses ...queue.Status) *queue.Job {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		j, err := r.c.Get(r.ctx, q, id)
		require.NoError(r.t, err)
		if slices.Contains(statuses, j.Status) {
			return j
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("job %s/%s is %s after 15 s, want %v (last error %q)", q, id, j.Status, statuses, j.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *rig) attempts(q, id string) []dispatch.Attempt {
	r.t.Helper()
	notes, err := plumbing.Of(r.c).Notes(r.ctx, q, id)
	require.NoError(r.t, err)
	out := make([]dispatch.Attempt, len(notes))
	for i, n := range notes {
		require.NoError(r.t, json.Unmarshal([]byte(n), &out[i]))
	}
	return out
}

// request is what a receiver got.
type request struct {
	At     time.Time
	Method string
	Header http.Header
	Body   []byte
}

// receiver is an httptest server on loopback that records every request
// and answers with reply (200 {} when nil).
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	got   []request
	reply func(n int, w http.ResponseWriter, r *http.Request) // n: 1 for the first request
}

func newReceiver(t *testing.T, reply func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	return newReceiverOn(t, nil, reply)
}

// newReceiverOn is newReceiver on ln (nil: a loopback one).
func newReceiverOn(t *testing.T, ln net.Listener, reply func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{reply: reply}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, request{At: time.Now(), Method: r.Method, Header: r.Header.Clone(), Body: body})
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.reply == nil {
			_, _ = io.WriteString(w, "{}")
			return
		}
		rc.reply(n, w, r)
	}))
	if ln != nil {
		_ = rc.Listener.Close()
		rc.Listener = ln
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}
