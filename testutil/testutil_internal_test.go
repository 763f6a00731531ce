package testutil

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Starting servers (ports taken, bad arguments, bus ports) and clusters
// (and killing a half-built one) is tested in testutil/redisproc.

func TestEnvOverrides(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv(EnvRedisAddr, "127.0.0.1:1")
	t.Setenv(EnvClusterAddrs, " 127.0.0.1:2, 127.0.0.1:3 ,,")
	require.Equal(t, "127.0.0.1:1", RedisAddr(t))
	require.Equal(t, []string{"127.0.0.1:2", "127.0.0.1:3"}, ClusterAddrs(t))
}

func TestNamespaceLongName(t *testing.T) {
	t.Parallel()
	t.Run(strings.Repeat("x", 200), func(t *testing.T) {
		ns := Namespace(t)
		require.Len(t, ns, namespaceMax)
	})
}
