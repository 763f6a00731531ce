package dispatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/lifecycle"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Two Refresh calls at once (the periodic one and a caller's): the one
// whose read began first holds the older view, and must not apply it over
// the newer one. Applied, it stopped the worker of the queue the newer
// view had just started, handing that queue's running jobs back for
// another attempt (a 401 seen twice, a job that should have died at once).
func TestRefreshNeverAppliesAnOlderView(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(rc.Close)
	d, err := New(Config{Client: c, RefreshInterval: time.Hour,
		Guard: Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	require.NoError(t, err)
	var armed atomic.Bool
	olderRead, newerDone := make(chan struct{}), make(chan struct{})
	onRefreshRead(t, d, func() {
		if armed.CompareAndSwap(true, false) {
			close(olderRead)
			<-newerDone
		}
	})
	h := lifecycle.Start(ctx, d)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, h.Stop(sctx))
	})
	require.NoError(t, d.Refresh(ctx)) // Run is under way (a second Run would fail) or done with its first look

	armed.Store(true)
	older := make(chan error, 1)
	go func() { older <- d.Refresh(ctx) }() // reads: no push queue yet
	<-olderRead
	_, err = d.Store().Put(ctx, "x", QueueConfig{Target: Target{URL: rc.URL}})
	require.NoError(t, err)
	require.NoError(t, d.Refresh(ctx)) // the newer view: x is served
	close(newerDone)
	require.NoError(t, <-older)

	d.mu.Lock()
	_, served := d.workers["x"]
	d.mu.Unlock()
	require.True(t, served, "the older view stopped the newer one's worker")
	require.Contains(t, *d.configs.Load(), "x", "the older view replaced the configs")
}

// refreshReads holds the functions that onRefreshRead gave the tests'
// dispatchers.
var refreshReads sync.Map // *Dispatcher -> func()

func init() {
	testHookRefreshRead = func(d *Dispatcher) {
		if f, ok := refreshReads.Load(d); ok {
			f.(func())()
		}
	}
}

// onRefreshRead makes every Refresh of d call f between its read and its
// apply (see testHookRefreshRead), until the test ends.
func onRefreshRead(t testing.TB, d *Dispatcher, f func()) {
	refreshReads.Store(d, f)
	t.Cleanup(func() { refreshReads.Delete(d) })
}
