package testutil_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// TestEmbeddedMode: with CHRONOQ_TEST_REDIS=embedded a test gets an
// embedded Redis of its own, which its subtests share and other tests do
// not, and the helpers that need a redis-server process skip.
func TestEmbeddedMode(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv(testutil.EnvRedis, "embedded")
	require.True(t, testutil.Embedded())
	addr := testutil.RedisAddr(t)
	require.Equal(t, addr, testutil.RedisAddr(t), "the same server within a test")
	rdb := testutil.Redis(t)
	require.NoError(t, rdb.Set(t.Context(), "k", "v", 0).Err())
	t.Run("Sub", func(t *testing.T) {
		require.Equal(t, addr, testutil.RedisAddr(t), "a subtest shares its parent's")
		require.Equal(t, "v", testutil.Redis(t).Get(t.Context(), "k").Val())
	})
	t.Run("Skips", func(t *testing.T) {
		testutil.StartServer(t)
		t.Error("StartServer did not skip")
	})
	other := otherTestAddr(t)
	require.NotEqual(t, addr, other, "another test, another server")
	require.NotEqual(t, addr, testutil.EmbeddedRedis(t).Options().Addr, "EmbeddedRedis: a server of the caller's own")
}

// otherTestAddr is the embedded Redis a test other than t gets: one run
// as a named subtest would share t's, so it asks under a fake name.
func otherTestAddr(t *testing.T) string {
	return testutil.RedisAddr(namedTB{TB: t, name: "TestSomethingElse"})
}

// namedTB is t under another name.
type namedTB struct {
	testing.TB
	name string
}

func (n namedTB) Name() string { return n.name }
