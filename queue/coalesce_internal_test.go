package queue

import (
	"github.com/chronoq/chronoq/internal/store"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/batch"
)

// The batches of every batching path are script calls of this engine.
func TestBatchLimitsFitTheEngine(t *testing.T) {
	t.Parallel()
	require.Equal(t, MaxBatch, batch.MaxItems, "a batch is one script call")
	require.Greater(t, batch.CallTimeout, store.ClusterRetryFor, "a batch's call outlasts the engine's migration retries")
}
