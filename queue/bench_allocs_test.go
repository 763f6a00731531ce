package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// BenchmarkCallAllocs is one job's enqueue, claim, heartbeat and complete,
// each a call of its own: its allocs/op are what the client allocates to
// build the scripts' arguments and read their replies.
func BenchmarkCallAllocs(b *testing.B) {
	c, ctx := benchClient(b)
	b.ReportAllocs()
	for b.Loop() {
		_, err := c.Enqueue(ctx, queue.NewJob{Queue: "q", Kind: "noop"})
		require.NoError(b, err)
		js, err := c.Claim(ctx, "q", queue.ClaimOptions{})
		require.NoError(b, err)
		require.Len(b, js, 1)
		_, err = c.Heartbeat(ctx, "q", js[0].ID, js[0].Token, queue.HeartbeatOptions{})
		require.NoError(b, err)
		require.NoError(b, c.Complete(ctx, "q", js[0].ID, js[0].Token, queue.CompleteOptions{}))
	}
}
