package names_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/names"
)

func TestRules(t *testing.T) {
	t.Parallel()
	require.NoError(t, names.ValidateQueue("a.b_c-1"))
	require.ErrorIs(t, names.ValidateQueue("A"), names.ErrInvalidQueue)
	require.ErrorIs(t, names.ValidateQueue(strings.Repeat("a", 65)), names.ErrInvalid)
	require.NoError(t, names.ValidateKind("Email:send.v2"))
	require.ErrorIs(t, names.ValidateKind("-x"), names.ErrInvalidKind)
	require.NoError(t, names.ValidateID("AZaz09_-"))
	require.ErrorIs(t, names.ValidateID("a.b"), names.ErrInvalidID)
	require.NoError(t, names.ValidateNamespace("chronoq:test"))
	require.Error(t, names.ValidateNamespace("a{b}"))
	require.True(t, names.ArtifactNameOK("report.v1-a_b"))
	require.False(t, names.ArtifactNameOK("a/b"))
	require.False(t, names.ArtifactNameOK(strings.Repeat("a", names.MaxArtifactNameBytes+1)))
}

func TestCanonicalLabels(t *testing.T) {
	t.Parallel()
	got, err := names.CanonicalLabels([]string{"gpu", "a=b", "gpu"}, 4)
	require.NoError(t, err)
	require.Equal(t, []string{"a=b", "gpu"}, got)
	got, err = names.CanonicalLabels(nil, 4)
	require.NoError(t, err)
	require.Nil(t, got)
	_, err = names.CanonicalLabels([]string{"a", "b"}, 1)
	require.ErrorIs(t, err, names.ErrInvalidLabels)
	_, err = names.CanonicalLabels([]string{"a b"}, 4)
	require.ErrorIs(t, err, names.ErrInvalid)
}
