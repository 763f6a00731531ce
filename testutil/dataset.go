package testutil

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A recorded dataset's keys (queue/testdata/upgrade, written by the
// generator in queue/testdata/upgrade/gen, whose doc comment gives the
// format): each key of a namespace, named relative to it, with its type,
// its time to live and its contents. LoadKeys writes them under another
// namespace.

// DatasetKey is one key of a recorded namespace.
type DatasetKey struct {
	Key    string                  `json:"key"` // relative to the namespace: "{q}:jobs", "{<ns>:attn}:due"
	Type   string                  `json:"type"`
	PTTLMs int64                   `json:"pttl_ms,omitempty"`
	String *DatasetBytes           `json:"string,omitempty"`
	Hash   map[string]DatasetBytes `json:"hash,omitempty"`
	List   []DatasetBytes          `json:"list,omitempty"`
	Set    []DatasetBytes          `json:"set,omitempty"`
	Zset   []DatasetMember         `json:"zset,omitempty"`
	Stream *DatasetStream          `json:"stream,omitempty"`
}

// DatasetMember is a sorted set's member and its score as Redis printed it.
type DatasetMember struct {
	Member DatasetBytes `json:"member"`
	Score  string       `json:"score"`
}

// DatasetStream is a stream: its entries, and what XSETID and XGROUP
// restore.
type DatasetStream struct {
	Entries []struct {
		ID     string         `json:"id"`
		Fields []DatasetBytes `json:"fields"`
	} `json:"entries"`
	LastID       string `json:"last_id"`
	EntriesAdded int64  `json:"entries_added"`
	MaxDeletedID string `json:"max_deleted_id"`
	Groups       []struct {
		Name            string `json:"name"`
		LastDeliveredID string `json:"last_delivered_id"`
		EntriesRead     int64  `json:"entries_read"`
	} `json:"groups"`
}

// DatasetBytes is a Redis value: written as a JSON string when it is valid
// UTF-8, else as {"b64": "<base64>"}.
type DatasetBytes string

// UnmarshalJSON reads either form.
func (b *DatasetBytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*b = DatasetBytes(s)
		return nil
	}
	var o struct {
		B64 *string `json:"b64"`
	}
	if err := json.Unmarshal(data, &o); err != nil || o.B64 == nil {
		return fmt.Errorf("testutil: a dataset value is a string or {\"b64\": ...}, got %.40s", data)
	}
	v, err := base64.StdEncoding.DecodeString(*o.B64)
	if err != nil {
		return fmt.Errorf("testutil: dataset value: %w", err)
	}
	*b = DatasetBytes(v)
	return nil
}

// LoadKeys writes keys, recorded in namespace from, into namespace to on
// rdb: "<to>:" is put before each name, and a hash tag of the recorded
// namespace's own ("{<from>:attn}") becomes "{<to>:attn}"; a queue's
// "{<queue>}" stays. It fails tb when a value names the recorded
// namespace (a rewrite of key names alone would then not move the
// dataset), when a key of to exists already, or when Redis refuses a
// write. It needs a redis-server of version 7.0 or later (XSETID with
// ENTRIESADDED, XGROUP CREATE with ENTRIESREAD), not the embedded Redis.
func LoadKeys(tb testing.TB, rdb redis.UniversalClient, keys []DatasetKey, from, to string) {
	tb.Helper()
	ctx := context.Background()
	for _, k := range keys {
		name := to + ":" + strings.ReplaceAll(k.Key, "{"+from+":", "{"+to+":")
		if strings.Contains(strings.ReplaceAll(k.Key, "{"+from+":", ""), from) {
			tb.Fatalf("testutil: dataset key %q names namespace %q outside a hash tag", k.Key, from)
		}
		if n, err := rdb.Exists(ctx, name).Result(); err != nil || n != 0 {
			tb.Fatalf("testutil: loading %s: the key exists already (%v)", name, err)
		}
		check := func(what string, vals ...DatasetBytes) {
			for _, v := range vals {
				if strings.Contains(string(v), from) {
					tb.Fatalf("testutil: dataset key %q: a %s names the namespace %q", k.Key, what, from)
				}
			}
		}
		var err error
		switch k.Type {
		case "string":
			if k.String == nil {
				tb.Fatalf("testutil: dataset key %q: a string without its value", k.Key)
			}
			check("value", *k.String)
			err = rdb.Set(ctx, name, string(*k.String), 0).Err()
		case "hash":
			args := make([]any, 0, 2*len(k.Hash))
			for f, v := range k.Hash {
				check("field", DatasetBytes(f), v)
				args = append(args, f, string(v))
			}
			err = rdb.HSet(ctx, name, args...).Err()
		case "list":
			check("element", k.List...)
			err = rdb.RPush(ctx, name, anys(k.List)...).Err()
		case "set":
			check("member", k.Set...)
			err = rdb.SAdd(ctx, name, anys(k.Set)...).Err()
		case "zset":
			args := []any{"ZADD", name}
			for _, m := range k.Zset {
				check("member", m.Member)
				args = append(args, m.Score, string(m.Member))
			}
			err = rdb.Do(ctx, args...).Err()
		case "stream":
			err = loadStream(ctx, rdb, name, k, check)
		default:
			tb.Fatalf("testutil: dataset key %q: type %q", k.Key, k.Type)
		}
		if err != nil {
			tb.Fatalf("testutil: loading dataset key %q as %s: %v", k.Key, name, err)
		}
		if k.PTTLMs > 0 {
			if err := rdb.PExpire(ctx, name, time.Duration(k.PTTLMs)*time.Millisecond).Err(); err != nil {
				tb.Fatalf("testutil: loading %s: %v", name, err)
			}
		}
	}
}

func loadStream(ctx context.Context, rdb redis.UniversalClient, name string, k DatasetKey, check func(string, ...DatasetBytes)) error {
	s := k.Stream
	if s == nil {
		return fmt.Errorf("a stream without its entries")
	}
	for _, e := range s.Entries {
		check("stream field", e.Fields...)
		args := append([]any{"XADD", name, e.ID}, anys(e.Fields)...)
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			return err
		}
	}
	if len(s.Entries) == 0 { // XADD makes the key; an empty stream is one whose entries were deleted
		if err := rdb.Do(ctx, "XADD", name, "0-1", "x", "x").Err(); err != nil {
			return err
		}
		if err := rdb.Do(ctx, "XDEL", name, "0-1").Err(); err != nil {
			return err
		}
	}
	if err := rdb.Do(ctx, "XSETID", name, s.LastID, "ENTRIESADDED", s.EntriesAdded, "MAXDELETEDID", s.MaxDeletedID).Err(); err != nil {
		return err
	}
	for _, g := range s.Groups {
		if err := rdb.Do(ctx, "XGROUP", "CREATE", name, g.Name, g.LastDeliveredID, "ENTRIESREAD", g.EntriesRead).Err(); err != nil {
			return err
		}
	}
	return nil
}

func anys(vs []DatasetBytes) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
