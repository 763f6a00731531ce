package testutil_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/testutil"
)

// LoadKeys writes each type of key under the new namespace, values that
// are not UTF-8 included, with a stream's ids, last id and groups.
func TestLoadKeys(t *testing.T) {
	t.Parallel()
	testutil.NeedRedisServer(t, "XSETID, to restore a stream")
	ctx := t.Context()
	rdb := testutil.Redis(t)
	ns := testutil.Namespace(t)
	const dataset = `[
	 {"key": "{q}:h", "type": "hash", "pttl_ms": 600000, "hash": {"a": "x\u0000y", "b": {"b64": "/wE="}}},
	 {"key": "{q}:l", "type": "list", "list": ["1", "2", "\u0001"]},
	 {"key": "{q}:z", "type": "zset", "zset": [{"member": "m", "score": "1893553446115.123"}, {"member": "\u0001", "score": "inf"}]},
	 {"key": "s", "type": "set", "set": ["q"]},
	 {"key": "{old:attn}:seq", "type": "string", "string": "7"},
	 {"key": "{q}:w", "type": "stream", "stream": {"entries": [{"id": "5-0", "fields": ["n", "0"]}],
	  "last_id": "9-0", "entries_added": 3, "max_deleted_id": "8-0",
	  "groups": [{"name": "w", "last_delivered_id": "5-0", "entries_read": 1}]}}
	]`
	var keys []testutil.DatasetKey
	require.NoError(t, json.Unmarshal([]byte(dataset), &keys))
	testutil.LoadKeys(t, rdb, keys, "old", ns)

	h, err := rdb.HGetAll(ctx, ns+":{q}:h").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "x\x00y", "b": "\xff\x01"}, h)
	ttl, err := rdb.PTTL(ctx, ns+":{q}:h").Result()
	require.NoError(t, err)
	require.Positive(t, ttl)
	l, err := rdb.LRange(ctx, ns+":{q}:l", 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2", "\x01"}, l)
	z, err := rdb.ZRangeWithScores(ctx, ns+":{q}:z", 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []redis.Z{{Member: "m", Score: 1893553446115.123}, {Member: "\x01", Score: math.Inf(1)}}, z)
	require.Equal(t, []string{"q"}, rdb.SMembers(ctx, ns+":s").Val())
	require.Equal(t, "7", rdb.Get(ctx, ns+":{"+ns+":attn}:seq").Val(), "the namespace's own hash tag is rewritten")
	xs, err := rdb.XRange(ctx, ns+":{q}:w", "-", "+").Result()
	require.NoError(t, err)
	require.Equal(t, []redis.XMessage{{ID: "5-0", Values: map[string]any{"n": "0"}}}, xs)
	info, err := rdb.XInfoStream(ctx, ns+":{q}:w").Result()
	require.NoError(t, err)
	require.Equal(t, "9-0", info.LastGeneratedID)
	require.Equal(t, int64(3), info.EntriesAdded)
	require.Equal(t, "8-0", info.MaxDeletedEntryID)
	groups, err := rdb.XInfoGroups(ctx, ns+":{q}:w").Result()
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, "w", groups[0].Name)
	require.Equal(t, "5-0", groups[0].LastDeliveredID)
}
