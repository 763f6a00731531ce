package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// A hub hands a wake to its longest waiter; a waiter that leaves with one
// hands it to the next; the last one writes it back to its stream.
func TestWakeHubHandsOnWhatALeavingWaiterHeld(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := testutil.Redis(t)
	c, err := NewClient(Config{Redis: rdb, Namespace: testutil.Namespace(t), DisableEvents: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	c.wakeChunk = 5 * time.Second // no read of the hub ends while the test runs
	// The queue and its wake stream's group exist.
	_, err = c.Enqueue(ctx, NewJob{Queue: "q", Kind: "k"})
	require.NoError(t, err)
	_, err = c.Claim(ctx, "q", ClaimOptions{})
	require.NoError(t, err)
	k, err := c.keysFor("q")
	require.NoError(t, err)
	added := func() int64 {
		s, err := rdb.XInfoStream(ctx, k.Wake).Result()
		require.NoError(t, err)
		return s.EntriesAdded
	}

	h, a := c.joinHub(k, nil)
	h2, b := c.joinHub(k, nil)
	require.Same(t, h, h2, "one hub a queue and label set")
	_, other := c.joinHub(k, []string{"gpu"})
	require.Equal(t, 3, (*inside)(c).Waiters())

	require.True(t, h.hand(wake{stream: k.Wake}))
	require.Len(t, a.ch, 1, "the longest waiter is handed the wake")
	require.Empty(t, b.ch)
	h.leave(a)
	select {
	case wk := <-b.ch:
		require.Equal(t, k.Wake, wk.stream, "the next waiter is handed what the leaving one held")
	case <-time.After(5 * time.Second):
		t.Fatal("the wake was lost")
	}
	require.Empty(t, other.ch, "a waiter of another hub is not handed it")

	// The last waiter of the hub leaves with a wake: back to its stream,
	// where a reader of the stream (this hub's, which writes it back
	// again, having no waiter left, or the gpu hub's) reads it, and the
	// waiter of the gpu hub, who may take jobs without labels, is handed it.
	before := added()
	b.ch <- wake{stream: k.Wake} // as hand would have
	h.leave(b)
	require.Greater(t, added(), before, "written back")
	select {
	case wk := <-other.ch:
		require.Equal(t, k.Wake, wk.stream)
	case <-time.After(5 * time.Second):
		t.Fatal("the wake written back was lost")
	}
	require.Zero(t, (*inside)(c).Waiters())
}
