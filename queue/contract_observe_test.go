package queue_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// contractObserve holds the contract of what the engine tells: stats and
// job events.
func contractObserve(t *testing.T, setup setupFunc) {
	t.Run("StatsOldestPendingAndNextRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, queue.NewJob{})
		b.enqueue(t, queue.NewJob{RunAt: b.clock.Now().Add(time.Minute)})
		b.clock.Advance(3 * time.Second)
		s := b.stats(t)
		require.InDelta(t, (3 * time.Second).Seconds(), s.OldestPendingAge.Seconds(), 1, "its run_at is Redis's now at enqueue")
		require.Equal(t, b.clock.Now().Add(57*time.Second), s.NextRunAt)
	})

	t.Run("EventsArePublished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var sub *redis.PubSub
		if cc, ok := b.rdb.(*redis.ClusterClient); ok {
			sub = cc.SSubscribe(b.ctx, b.events())
		} else {
			sub = b.rdb.Subscribe(b.ctx, b.events())
		}
		t.Cleanup(func() { _ = sub.Close() })
		_, err := sub.Receive(b.ctx)
		require.NoError(t, err)
		j := b.enqueue(t, queue.NewJob{Kind: "email"})
		c := b.claimOne(t)
		require.NoError(t, b.client.Complete(b.ctx, b.queue, c.ID, c.Token, queue.CompleteOptions{}))
		for _, want := range []string{"enqueued|%s|email|pending|0|", "claimed|%s|email|processing|1|", "completed|%s|email|completed|1|"} {
			m, err := sub.ReceiveMessage(b.ctx)
			require.NoError(t, err)
			i := strings.LastIndexByte(m.Payload, '|')
			require.Equal(t, fmt.Sprintf(want, j.ID), m.Payload[:i+1])
			ms, err := strconv.ParseInt(m.Payload[i+1:], 10, 64)
			require.NoError(t, err)
			requireSoonAfter(t, b.clock.Now(), time.UnixMilli(ms).UTC(), "the event's time is Redis's")
		}
	})
}
