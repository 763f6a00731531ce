package cron

import (
	"context"
	"crypto/sha1" //nolint:gosec // put.lua compares with redis.sha1hex: a digest of what was read, not a secret
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
)

// DefaultMaxEntries is how many cron entries a Store holds unless
// WithMaxEntries says otherwise.
const DefaultMaxEntries = 10_000

// ErrTooManyEntries is a new entry that would pass the store's cap on
// entries (WithMaxEntries). The error Put answers is a *TooManyEntriesError,
// which also wraps queue.ErrConflict (the API answers 409).
var ErrTooManyEntries = errors.New("too many cron entries")

// TooManyEntriesError is a new entry refused because Max entries are
// stored already.
type TooManyEntriesError struct {
	Name string // the entry refused
	Max  int    // the cap
}

func (e *TooManyEntriesError) Error() string {
	return fmt.Sprintf("cron: put %q: %v: the cap of %d entries is reached (serve's --max-cron-entries); delete an entry first",
		e.Name, ErrTooManyEntries, e.Max)
}

// Is makes errors.Is match both ErrTooManyEntries and queue.ErrConflict.
func (e *TooManyEntriesError) Is(target error) bool {
	return target == ErrTooManyEntries || target == queue.ErrConflict
}

// StoreOption is an option of NewStore.
type StoreOption func(*Store)

// WithMaxEntries caps the entries at n (n >= 1; 0 keeps
// DefaultMaxEntries): Put refuses a new entry past it with a
// *TooManyEntriesError. Replacing an entry is never refused. The count is
// of the stored entries, shared by every instance of the namespace.
func WithMaxEntries(n int) StoreOption {
	return func(s *Store) {
		if n > 0 {
			s.maxEntries = n
		}
	}
}

// MaxEntries is the store's cap on entries.
func (s *Store) MaxEntries() int { return s.maxEntries }

var putScript = script("put.lua")

// put.lua's answers.
const (
	putChanged  = "changed"
	putFull     = "full"
	putCreated  = "created"
	putReplaced = "replaced"
)

type putResult struct {
	status string
}

// putOnce reads the stored entry e.Name and the time of the Redis that
// holds the entries, and has put.lua write settings (e's JSON) unless the
// entry changed in between (putChanged: read again) or it is new and the
// cap is reached (putFull). Entries equal to the stored ones are not
// written (putReplaced, as a write that changed nothing).
//
// The read runs on a connection to the entries' node (a WATCH that no
// EXEC follows, in a cluster the node of the entries' slot), so the time
// is that Redis's; the write's check is put.lua's digest, not the WATCH,
// so puts of other entries never make this one read again.
func (s *Store) putOnce(ctx context.Context, e Entry, sched *Schedule, settings string) (putResult, error) {
	key := entriesKey(s.ns)
	var res putResult
	err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
		cur, err := tx.HGet(ctx, key, e.Name).Result()
		digest := ""
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return err
		default:
			if old, err := decodeStored(cur); err == nil {
				if b, err := json.Marshal(old.Entry); err == nil && string(b) == settings {
					res.status = putReplaced // unchanged: keep UpdatedAtMs
					return nil
				}
			}
			sum := sha1.Sum([]byte(cur)) //nolint:gosec // see the import
			digest = hex.EncodeToString(sum[:])
		}
		since, err := s.redisNow(ctx, tx)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(stored{Entry: e, UpdatedAtMs: since.UnixMilli()})
		if err != nil {
			return err
		}
		cursor := ""
		if c := cursorAfter(e, sched, since); !c.IsZero() {
			cursor = strconv.FormatInt(c.UnixMilli(), 10)
		}
		v, err := putScript.Run(ctx, tx, []string{key, versionsKey(s.ns), dueKey(s.ns), seqKey(s.ns)},
			e.Name, digest, string(raw), cursor, s.maxEntries).Slice()
		if err != nil {
			return err
		}
		if len(v) == 0 {
			return fmt.Errorf("put.lua: unexpected reply %v", v)
		}
		res.status, _ = v[0].(string)
		return nil
	}, key)
	return res, err
}
