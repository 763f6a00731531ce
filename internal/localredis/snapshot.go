package localredis

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// snapshotVersion is the version of the snapshot's format.
const snapshotVersion = 1

// snapshot is the embedded Redis's data (its database 0, the one chronoq
// uses) as the file keeps it (encoding/gob).
type snapshot struct {
	Version int
	Saved   time.Time
	Keys    []snapKey
}

// snapKey is one key: its type and, by type, its value.
type snapKey struct {
	Key, Type string
	TTL       time.Duration // 0: none
	Str       string
	Items     []string // a list's elements in order, a set's members, a hash's fields and values
	Scores    map[string]float64
	Entries   []miniredis.StreamEntry
}

// saveSnapshot writes m's data to path: to a temporary file, fsynced, then
// renamed over the old one, so that a crash while saving leaves the last
// snapshot whole.
func saveSnapshot(m *miniredis.Miniredis, path string) error {
	snap := snapshot{Version: snapshotVersion, Saved: time.Now().UTC()}
	for _, k := range m.Keys() {
		sk := snapKey{Key: k, Type: m.Type(k), TTL: m.TTL(k)}
		var err error
		switch sk.Type {
		case "string":
			sk.Str, err = m.Get(k)
		case "list":
			sk.Items, err = m.List(k)
		case "set":
			sk.Items, err = m.Members(k)
		case "hash":
			var fields []string
			fields, err = m.HKeys(k)
			for _, f := range fields {
				sk.Items = append(sk.Items, f, m.HGet(k, f))
			}
		case "zset":
			sk.Scores, err = m.SortedSet(k)
		case "stream":
			sk.Entries, err = m.Stream(k)
		default:
			continue // a type chronoq does not use (hll)
		}
		if err != nil {
			if errors.Is(err, miniredis.ErrKeyNotFound) {
				continue // gone since Keys
			}
			return fmt.Errorf("localredis: snapshot of %q: %w", k, err)
		}
		snap.Keys = append(snap.Keys, sk)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".snapshot-*")
	if err != nil {
		return fmt.Errorf("localredis: save the snapshot: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails once renamed
	w := bufio.NewWriter(tmp)
	if err := gob.NewEncoder(w).Encode(&snap); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("localredis: save the snapshot: %w", err)
	}
	if err := errors.Join(w.Flush(), tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("localredis: save the snapshot: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("localredis: save the snapshot: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the rename itself durable
		_ = d.Close()
	}
	return nil
}

// loadSnapshot loads path into m (not yet started); no file is an empty
// Redis.
func loadSnapshot(m *miniredis.Miniredis, path string) error {
	f, err := os.Open(path) //nolint:gosec // G304: the data directory's snapshot
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("localredis: load the snapshot: %w", err)
	}
	defer f.Close()
	var snap snapshot
	if err := gob.NewDecoder(bufio.NewReader(f)).Decode(&snap); err != nil {
		return fmt.Errorf("localredis: load the snapshot %s: %w (move it away to start empty)", path, err)
	}
	if snap.Version != snapshotVersion {
		return fmt.Errorf("localredis: the snapshot %s is of format %d, this chronoq reads %d", path, snap.Version, snapshotVersion)
	}
	for _, k := range snap.Keys {
		var err error
		switch k.Type {
		case "string":
			err = m.Set(k.Key, k.Str)
		case "list":
			_, err = m.Push(k.Key, k.Items...)
		case "set":
			_, err = m.SAdd(k.Key, k.Items...)
		case "hash":
			m.HSet(k.Key, k.Items...)
		case "zset":
			for member, score := range k.Scores {
				if _, err = m.ZAdd(k.Key, score, member); err != nil {
					break
				}
			}
		case "stream":
			for _, e := range k.Entries {
				if _, err = m.XAdd(k.Key, e.ID, e.Values); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("localredis: load %q from the snapshot: %w", k.Key, err)
		}
		if k.TTL > 0 {
			// The time the snapshot lay counts, as a Redis's expiry times
			// are absolute; a key already expired goes at once.
			m.SetTTL(k.Key, max(k.TTL-time.Since(snap.Saved), time.Millisecond))
		}
	}
	return nil
}
