package cron

import (
	"context"
	"crypto/sha1" //nolint:gosec // cron_put.lua compares with redis.sha1hex: a digest of what was read, not a secret
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/store"
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

// cron_put.lua's answers.
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
// holds the entries, and has cron_put.lua write settings (e's JSON)
// unless the entry changed in between (putChanged: read again) or it is
// new and the cap is reached (putFull). Entries equal to the stored ones
// are not written (putReplaced, as a write that changed nothing).
//
// The read runs on a connection to the entries' node (a WATCH that no
// EXEC follows, in a cluster the node of the entries' slot), so the time
// is that Redis's; the write's check is cron_put.lua's digest, not the
// WATCH, so puts of other entries never make this one read again.
func (s *Store) putOnce(ctx context.Context, e Entry, sched *Schedule, settings string) (putResult, error) {
	key := entriesKey(s.ns)
	var p *store.CronPutArgs // nil: unchanged, nothing to write
	err := s.rdb.Watch(ctx, func(tx *redis.Tx) (err error) {
		p, err = s.readPut(ctx, tx, e, sched, settings)
		return err
	}, key)
	if err != nil {
		return putResult{}, err
	}
	if p == nil {
		return putResult{status: putReplaced}, nil // unchanged: keep UpdatedAtMs
	}
	res, err := store.CallGlobal(ctx, s.eng, store.CronPut, []string{key, versionsKey(s.ns), dueKey(s.ns), seqKey(s.ns)}, p)
	if err != nil {
		return putResult{}, err
	}
	return putResult{status: res.Status}, nil
}

// readPut reads, on tx, the stored entry e.Name and Redis's time, and
// answers cron_put.lua's arguments for writing settings; nil when the
// stored settings equal them.
func (s *Store) readPut(ctx context.Context, tx *redis.Tx, e Entry, sched *Schedule, settings string) (*store.CronPutArgs, error) {
	cur, err := tx.HGet(ctx, entriesKey(s.ns), e.Name).Result()
	digest := ""
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return nil, err
	default:
		if old, err := decodeStored(cur); err == nil {
			if b, err := json.Marshal(old.Entry); err == nil && string(b) == settings {
				return nil, nil
			}
		}
		sum := sha1.Sum([]byte(cur)) //nolint:gosec // see the import
		digest = hex.EncodeToString(sum[:])
	}
	since, err := s.redisNow(ctx, tx)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(stored{Entry: e, UpdatedAtMs: since.UnixMilli()})
	if err != nil {
		return nil, err
	}
	cursor := ""
	if c := cursorAfter(e, sched, since); !c.IsZero() {
		cursor = strconv.FormatInt(c.UnixMilli(), 10)
	}
	return &store.CronPutArgs{Name: e.Name, Digest: digest, Stored: string(raw), Cursor: cursor, MaxEntries: s.maxEntries}, nil
}
