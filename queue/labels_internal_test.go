package queue

import (
	"github.com/chronoq/chronoq/internal/names"
	"testing"

	"github.com/stretchr/testify/require"
)

// Labels come out sorted, without duplicates, whatever their order in.
func TestCanonicalLabels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"a"}, []string{"a"}},
		{[]string{"b", "a"}, []string{"a", "b"}},
		{[]string{"a", "a"}, []string{"a"}},
		{[]string{"a", "b", "b"}, []string{"a", "b"}},
		{[]string{"c", "a", "b", "a"}, []string{"a", "b", "c"}},
	} {
		got, err := names.CanonicalLabels(tc.in, MaxJobLabels)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
	require.Equal(t, "b926b1594ce01407", labelSetID("gpu,linux"), "SHA-1's first 16 hex digits, as redis.sha1hex's")
	require.Len(t, labelSetID("gpu"), 16)
}
