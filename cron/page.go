package cron

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// The pages of ListPage.
const (
	DefaultListLimit = 50   // entries a page when ListOptions.Limit is 0
	MaxListLimit     = 1000 // the most entries a page
)

// ListOptions select a page of [Store.ListPage].
type ListOptions struct {
	// Cursor is the Next of the page before; "" for the first page.
	Cursor string
	// Limit is the most entries of the page, 1 to MaxListLimit; 0 is
	// DefaultListLimit.
	Limit int
}

// Page is a page of entries, sorted by name.
type Page struct {
	Entries []Entry
	// Next is the cursor of the next page; "" after the last.
	Next string
}

// ListPage reads a page of the entries, sorted by name: those after
// o.Cursor (the name of the last entry of the page before), at most
// o.Limit. It reads the names from the entries' index of versions (small
// values; the entries' own hash when the two differ, before the
// scheduler repaired the index), listChunk a command, and the page's
// entries and last runs only. A bad cursor or limit is a *FieldError
// wrapping queue.ErrInvalid.
func (s *Store) ListPage(ctx context.Context, o ListOptions) (Page, error) {
	switch {
	case o.Limit == 0:
		o.Limit = DefaultListLimit
	case o.Limit < 1 || o.Limit > MaxListLimit:
		return Page{}, invalid("limit", "must be in [1, %d], got %d", MaxListLimit, o.Limit)
	}
	if o.Cursor != "" {
		if err := validateName(o.Cursor); err != nil {
			return Page{}, invalid("cursor", "not a cursor of this list: give the next_cursor of the page before")
		}
	}
	names, err := s.names(ctx)
	if err != nil {
		return Page{}, err
	}
	slices.Sort(names)
	i, _ := slices.BinarySearch(names, o.Cursor)
	if i < len(names) && names[i] == o.Cursor && o.Cursor != "" {
		i++
	}
	names = names[i:]
	var p Page
	if len(names) > o.Limit {
		names = names[:o.Limit]
		p.Next = names[len(names)-1]
	}
	if len(names) == 0 {
		return Page{Entries: []Entry{}}, nil
	}
	raws, err := s.rdb.HMGet(ctx, entriesKey(s.ns), names...).Result()
	if err != nil {
		return Page{}, redisErr("list", err)
	}
	runs, err := s.lastRuns(ctx, names)
	if err != nil {
		return Page{}, err
	}
	p.Entries = make([]Entry, 0, len(names))
	for i, v := range raws {
		raw, ok := v.(string)
		if !ok {
			continue // deleted since the names were read
		}
		st, err := decodeStored(raw)
		if err != nil {
			return Page{}, err
		}
		p.Entries = append(p.Entries, s.view(st, runs[i]))
	}
	return p, nil
}

// names reads the names of the entries: the fields of the versions hash
// when it holds as many as the entries hash (cron_put.lua and Delete write
// both at once), else those of the entries hash.
func (s *Store) names(ctx context.Context) ([]string, error) {
	pipe := s.rdb.Pipeline()
	nEntries := pipe.HLen(ctx, entriesKey(s.ns))
	nVersions := pipe.HLen(ctx, versionsKey(s.ns))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisErr("list", err)
	}
	key := versionsKey(s.ns)
	if nEntries.Val() != nVersions.Val() {
		key = entriesKey(s.ns)
	}
	seen := make(map[string]struct{}, nEntries.Val())
	for cur, rounds := uint64(0), 0; ; rounds++ {
		if rounds > maxNameScans {
			return nil, fmt.Errorf("cron: list: HSCAN of %s did not end in %d commands", key, maxNameScans)
		}
		kv, next, err := s.rdb.HScan(ctx, key, cur, "", listChunk).Result()
		if err != nil {
			return nil, redisErr("list", err)
		}
		for i := 0; i < len(kv); i += 2 {
			seen[kv[i]] = struct{}{} // HSCAN may answer a field twice
		}
		if cur = next; cur == 0 {
			break
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	return names, nil
}

// maxNameScans bounds the HSCAN commands of one names: a hash of a
// million entries takes about a thousand.
const maxNameScans = 100_000
