package queue

import (
	"context"
	"crypto/sha1" //nolint:gosec // an id of a label set, not a secret: Lua's redis.sha1hex computes the same
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Worker labels. A job may require labels (NewJob.Labels); a claim may
// declare the claimer's (ClaimOptions.Labels), and receives only jobs
// whose labels are all among them. Jobs without labels go to any claimer.
//
// The pending jobs of each distinct set of required labels wait in a list
// of their own (see internal/store/layout.go), so a claim pops from the lists it may take
// from and never scans one: a claim costs the same whatever waits in lists
// it cannot take. The client keeps each queue's label sets (setView),
// reads them again when a script answers that they changed, and declares
// their keys to every script that may make a job pending, list pending
// jobs or delete the queue.

// Caps of labels.
const (
	// MaxJobLabels is the most labels a job may require.
	MaxJobLabels = 16
	// MaxClaimLabels is the most labels a claimer may declare.
	MaxClaimLabels = 64
	// MaxLabelBytes is the longest label.
	MaxLabelBytes = names.MaxLabelBytes
)

var (
	// ErrInvalidLabels is wrapped by the errors about bad labels: one that
	// is empty, too long or holds a byte outside [A-Za-z0-9._:/=+@-], or
	// too many of them.
	ErrInvalidLabels = names.ErrInvalidLabels
	// ErrTooManyLabelSets is answered when a job requires a set of labels
	// its queue has not seen and the queue has MaxLabelSets already.
	ErrTooManyLabelSets = errors.New("too many label sets")
)

// joinLabels is canonical labels as a record holds them.
func joinLabels(labels []string) string { return strings.Join(labels, ",") }

// splitLabels reads labels as a record holds them (nil for none).
func splitLabels(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// labelSetID is the id of the label set whose canonical labels, joined, are
// s: as common.lua's set_of computes it.
func labelSetID(s string) string {
	sum := sha1.Sum([]byte(s)) //nolint:gosec // see the import
	return hex.EncodeToString(sum[:8])
}

// setView is a client's view of a queue's label sets, in the order they
// were registered (meta's lsets).
type setView struct {
	ids    string              // meta's lsets: the ids joined by ","
	labels map[string][]string // id -> its labels
	order  []string            // the ids
	keys   []string            // each set's pending list, then its wake stream, in order

	mu       sync.Mutex
	eligible map[string]eligibleSets // by the claimer's labels, joined
}

// eligibleSets are the sets of a view a claimer has every label of.
type eligibleSets struct {
	ids   string   // joined by ",", as claim.lua and wait.lua take them
	wakes []string // their wake streams
}

// maxEligibleCache bounds a view's cache of eligible sets by claimer.
const maxEligibleCache = 1024

// eligibleFor answers the sets of v whose labels are all in claimer (canonical).
func (v *setView) eligibleFor(claimer []string) eligibleSets {
	if len(claimer) == 0 || len(v.order) == 0 {
		return eligibleSets{}
	}
	key := joinLabels(claimer)
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.eligible[key]; ok {
		return e
	}
	var ids []string
	var wakes []string
	for i, id := range v.order {
		ok := true
		for _, l := range v.labels[id] {
			if _, found := slices.BinarySearch(claimer, l); !found {
				ok = false
				break
			}
		}
		if ok {
			ids = append(ids, id)
			wakes = append(wakes, v.keys[2*i+1])
		}
	}
	e := eligibleSets{ids: strings.Join(ids, ","), wakes: wakes}
	if v.eligible == nil || len(v.eligible) >= maxEligibleCache {
		v.eligible = map[string]eligibleSets{}
	}
	v.eligible[key] = e
	return e
}

// setsOf answers the client's view of queue k's label sets, reading it
// from Redis the first time.
func (c *Client) setsOf(ctx context.Context, k store.Keys) (*setView, error) {
	if v, ok := c.labelSets.Load(k.Name); ok {
		return v.(*setView), nil
	}
	return c.refreshSets(ctx, k)
}

// refreshSets reads queue k's label sets from Redis and keeps them.
func (c *Client) refreshSets(ctx context.Context, k store.Keys) (*setView, error) {
	pipe := c.rdb.Pipeline()
	ids := pipe.HGet(ctx, k.Meta, store.MetaLsets)
	reg := pipe.HGetAll(ctx, k.Lsets)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: label sets of %s: %w", k.Name, wrapRedis(err))
	}
	v := &setView{ids: ids.Val(), labels: map[string][]string{}}
	r := reg.Val()
	for _, id := range strings.Split(v.ids, ",") {
		if id == "" {
			continue
		}
		v.order = append(v.order, id)
		v.labels[id] = splitLabels(r[id])
		v.keys = append(v.keys, k.SetListKey(id), k.SetWakeKey(id))
	}
	c.labelSets.Store(k.Name, v)
	return v, nil
}

// maxStaleRetries bounds how often a script call is retried after its label
// sets changed under it (each retry reads them again).
const maxStaleRetries = 10

// isStaleSets reports whether err is a script's answer that it was given
// other label sets than its queue's (common.lua's STALE_SETS).
func isStaleSets(err error) bool {
	return err != nil && strings.Contains(err.Error(), "chronoq stale label sets")
}

// LabelSets answers the distinct sets of labels the jobs of queue have
// required, in the order the queue first saw them (at most MaxLabelSets).
func (in *inside) LabelSets(ctx context.Context, queue string) ([][]string, error) {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	v, err := c.refreshSets(ctx, k)
	if err != nil {
		return nil, err
	}
	out := make([][]string, 0, len(v.order))
	for _, id := range v.order {
		out = append(out, v.labels[id])
	}
	return out, nil
}

// MaxLabelSets caps the distinct label sets a queue has had: an enqueue
// that would register one more is refused with ErrTooManyLabelSets. Sets
// are forgotten only with their queue.
const MaxLabelSets = 64
