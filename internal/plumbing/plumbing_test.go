package plumbing_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/testutil"
)

// Of answers a client's own side, on that client's engine; anything but
// a *queue.Client is a programming error.
func TestOf(t *testing.T) {
	t.Parallel()
	c, err := queue.NewClient(queue.Config{Redis: testutil.Redis(t), Namespace: testutil.Namespace(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	p := plumbing.Of(c)
	require.NotNil(t, p.Engine())
	require.Same(t, p.Engine(), plumbing.Of(c).Engine(), "one engine a client")
	require.Zero(t, p.Waiters())
	require.NoError(t, p.SetSettings(t.Context(), "q", map[string]string{queue.SettingPush: `{"url":"x"}`}))
	set, err := p.Settings(t.Context(), "q")
	require.NoError(t, err)
	require.Equal(t, `{"url":"x"}`, set[queue.SettingPush])
	require.PanicsWithValue(t, "plumbing.Of: want a *queue.Client, got string", func() { plumbing.Of("not a client") })
}
