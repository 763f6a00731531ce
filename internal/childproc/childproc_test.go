package childproc_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/chronoq/chronoq/internal/childproc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(childproc.SpawnerFunc))
}

// TestStop: a child that ends on SIGTERM is stopped by it; one that
// ignores it is killed after the grace, and Stop says so; its output goes
// to its log. (That a child dies with its parent is TestServeKilledLeaves
// NoRedisServer's, in cmd/chronoq: it kills a real serve.)
func TestStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	c, err := childproc.Start("sh", []string{"-c", "echo started; exec sleep 60"}, dir, log)
	require.NoError(t, err)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(log); return string(b) == "started\n" }, 10*time.Second, 10*time.Millisecond)
	err = c.Stop(10 * time.Second)
	require.ErrorContains(t, err, "terminated", "ended by SIGTERM")
	require.NotContains(t, err.Error(), "killed")
	require.Equal(t, err, c.Stop(time.Second), "stopping a stopped child answers how it ended")

	c, err = childproc.Start("sh", []string{"-c", `trap "" TERM; echo ready; while :; do sleep 0.05; done`}, dir, log)
	require.NoError(t, err)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(log); return string(b) == "started\nready\n" }, 10*time.Second, 10*time.Millisecond)
	start := time.Now()
	err = c.Stop(200 * time.Millisecond)
	require.ErrorContains(t, err, "did not stop within 200ms: killed")
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	<-c.Done()
}
