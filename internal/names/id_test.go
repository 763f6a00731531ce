package names

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestNewIDIsShortValidAndInOrder(t *testing.T) {
	prev := ""
	for i := range 2000 {
		id, err := NewID()
		require.NoError(t, err)
		require.Len(t, id, IDLen)
		require.NoError(t, ValidateID(id))
		require.Equal(t, strings.ToLower(id), id)
		require.Greater(t, id, prev, "id %d sorts before the one made before it", i)
		prev = id
	}
}

// v7At is a UUIDv7 of millisecond ms and the given random bits.
func v7At(ms int64, rnd byte) uuid.UUID {
	var u uuid.UUID
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	for i := 6; i < 16; i++ {
		u[i] = rnd
	}
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u
}

func TestIDsSortAsTheirBits(t *testing.T) {
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC).UnixMilli()
	lo, hi := v7At(at, 0xff), v7At(at+1, 0)
	require.Less(t, idEncoding.EncodeToString(lo[:]), idEncoding.EncodeToString(hi[:]))
	a, b := v7At(at, 0x10), v7At(at, 0x11)
	require.Less(t, idEncoding.EncodeToString(a[:]), idEncoding.EncodeToString(b[:]))
}

// An earlier release wrote ids as 32 hex digits; a new id must sort after
// every one of them made before it (a flow key's jobs are claimed in id
// order), and from 2026 on it does.
func TestNewIDsSortAfterTheHexIDsOfEarlierReleases(t *testing.T) {
	hex := func(u uuid.UUID) string { return strings.ReplaceAll(u.String(), "-", "") }
	latestOld := v7At(time.Date(2039, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 0xff)
	for _, at := range []time.Time{
		time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
		time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		u := v7At(at.UnixMilli(), 0)
		require.Greater(t, idEncoding.EncodeToString(u[:]), hex(latestOld), "a new id of %s", at)
	}
	id, err := NewID()
	require.NoError(t, err)
	require.Greater(t, id, hex(latestOld))
}
