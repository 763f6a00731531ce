package queue

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/internal/store"
)

// The error a reclaim writes on a job it kills is the one Go names.
func TestReclaimWritesLeaseExpiredError(t *testing.T) {
	t.Parallel()
	body, err := store.LuaFile("reclaim")
	require.NoError(t, err)
	require.Contains(t, string(body), "'"+LeaseExpiredError+" during attempt '")
}

// common.lua's artifact caps are the ones Go names.
func TestArtifactCapsMatchGo(t *testing.T) {
	t.Parallel()
	body, err := store.LuaFile("common")
	require.NoError(t, err)
	require.Contains(t, string(body), fmt.Sprintf("local ART_MAX_COUNT, ART_MAX_BYTES = %d, %d\n", MaxArtifacts, MaxArtifactsBytes))
}

// The short forms of a stored record stand for what they
// say: the default spec's code for the package's defaults, and the status
// codes one byte each, one a status, none the first byte of an inline
// payload's record or of a tombstone, none a status's name.
func TestRecordShortForms(t *testing.T) {
	t.Parallel()
	require.Equal(t, store.SpecDefault, fmt.Sprintf("%d|%d|%s", DefaultMaxAttempts, DefaultVisibility.Milliseconds(), DefaultBackoff.Encode()))
	require.Equal(t, store.SpecDefaultCode, encodeSpec(DefaultMaxAttempts, DefaultVisibility, DefaultBackoff.Encode()))
	require.NotEqual(t, store.SpecDefaultCode, encodeSpec(DefaultMaxAttempts+1, DefaultVisibility, DefaultBackoff.Encode()))
	var j Job
	require.NoError(t, parseSpec(store.SpecDefaultCode, &j))
	require.Equal(t, DefaultMaxAttempts, j.MaxAttempts)
	require.Equal(t, DefaultVisibility, j.Visibility)
	require.Equal(t, DefaultBackoff, j.Backoff)
	seen, coded := map[string]bool{}, map[Status]bool{}
	for _, c := range store.StatusCodes {
		require.True(t, Status(c.Status).valid(), c.Status)
		require.Len(t, c.Code, 1, c.Status)
		require.NotContains(t, []string{store.RecInline, "-", store.Sentinel}, c.Code)
		require.False(t, seen[c.Code], "code %q twice", c.Code)
		seen[c.Code] = true
		coded[Status(c.Status)] = true
	}
	for _, s := range []Status{StatusScheduled, StatusPending, StatusProcessing, StatusCompleted, StatusDead, StatusCanceled, StatusWaiting} {
		require.False(t, seen[string(s)], "a status's name is no code")
		require.True(t, coded[s], "status %s has no code", s)
	}
}

// splitRecord spells out what a stored record leaves short, and refuses
// what it cannot read.
func TestSplitRecordSpellsOutShortForms(t *testing.T) {
	t.Parallel()
	p, f, ok := splitRecord(store.RecInline + "{}\x00s\x00k\x00d\x00100\x00+50")
	require.True(t, ok)
	require.Equal(t, "{}", p)
	require.Len(t, f, store.NRec)
	require.Equal(t, []string{"scheduled", "k", "d", "100", "150", "0", "0", ""}, f[:store.RToken+1])
	p, f, ok = splitRecord("p\x00k\x00d\x00100")
	require.True(t, ok)
	require.Empty(t, p)
	require.Equal(t, []string{"pending", "k", "d", "100", "100", "0", "0"}, f[:store.RFence+1])
	// the earlier form, spelled out, is read as it is
	old := []string{"processing", "k", store.SpecDefault, "100", "120", "2", "5", "tok"}
	_, f, ok = splitRecord(strings.Join(old, "\x00"))
	require.True(t, ok)
	require.Equal(t, old, f[:store.RToken+1])
	for _, bad := range []string{"p\x00k\x00d\x00100\x00+x", store.RecInline + "{}", "p\x00k"} {
		_, _, ok = splitRecord(bad)
		require.False(t, ok, "%q", bad)
	}
}
