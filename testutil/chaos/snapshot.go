package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

// JobState is a job as found in the queue's Redis at the end.
type JobState struct {
	ID          string        `json:"id"`
	Queue       string        `json:"queue"`
	Status      string        `json:"status"`
	Attempts    int           `json:"attempts"`
	MaxAttempts int           `json:"max_attempts"`
	Token       string        `json:"token"`
	Seq         int64         `json:"seq"` // -1: no sequence number in the payload
	LastError   string        `json:"last_error,omitempty"`
	TTL         time.Duration `json:"ttl"` // -1: no expiry
	InDead      bool          `json:"in_dead"`
}

// QueueState is what is left in one queue's structures.
type QueueState struct {
	Scheduled, Pending, Leases int64
	Stats                      map[string]int64
	DeadIDs                    []string
}

// Snapshot is the queue's Redis at the end of a run.
type Snapshot struct {
	Jobs   map[string]*JobState
	Queues map[string]*QueueState
	// Markers are the retry markers of claims none of whose jobs is acked
	// yet; Other any key of the namespace that is no queue's nor the
	// worker registry's.
	Markers int
	Other   []string
}

// TakeSnapshot reads every key of namespace ns: every queue through
// plumbing.Client.Dump, and a scan for any key that belongs to none of them
// (over every master of a cluster).
func TakeSnapshot(ctx context.Context, rdb redis.UniversalClient, ns string, queues []string) (*Snapshot, error) {
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, DisableEvents: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	defer func() { _ = c.Close() }()
	s := &Snapshot{Jobs: map[string]*JobState{}, Queues: map[string]*QueueState{}}
	known, err := knownKeys(ns, queues)
	if err != nil {
		return nil, err
	}
	if s.Other, err = otherKeys(ctx, rdb, ns, known); err != nil {
		return nil, fmt.Errorf("chaos: scanning the queue's keys: %w", err)
	}
	for _, q := range queues {
		if err := s.addQueue(ctx, c, q); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// knownKeys is every key of namespace ns that belongs to a queue of
// queues, to the namespace itself or to the worker registry.
func knownKeys(ns string, queues []string) (map[string]bool, error) {
	known := map[string]bool{}
	for _, k := range slices.Concat(store.NamespaceKeys(ns), registry.Keys(ns)) {
		known[k] = true
	}
	for _, q := range queues {
		ks := store.QueueKeys(ns, q).All()
		for _, k := range ks {
			known[k] = true
		}
	}
	return known, nil
}

// otherKeys scans namespace ns (every master of a cluster) for keys that
// are neither known nor a workflow's hash, which is kept after the
// workflow ends; it answers at most 100.
func otherKeys(ctx context.Context, rdb redis.UniversalClient, ns string, known map[string]bool) ([]string, error) {
	var mu sync.Mutex
	var other []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, ns+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); !known[k] && !strings.HasPrefix(k, ns+":{wf:") {
				mu.Lock()
				if len(other) < 100 {
					other = append(other, k)
				}
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return other, c.ForEachMaster(ctx, scan)
	case *redis.Client:
		return other, scan(ctx, c)
	}
	return nil, fmt.Errorf("chaos: unsupported client %T", rdb)
}

// addQueue reads queue q through Dump into s: its structures' sizes,
// stats and dead set, its claim markers, and its jobs.
func (s *Snapshot) addQueue(ctx context.Context, c *queue.Client, q string) error {
	raw, err := plumbing.Of(c).Dump(ctx, q)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	d, ok := raw.(*queue.Dump)
	if !ok {
		return fmt.Errorf("chaos: a dump of %s is a %T", q, raw)
	}
	st := d.Stats
	s.Queues[q] = &QueueState{Scheduled: st.Scheduled, Pending: st.Pending, Leases: st.Processing, DeadIDs: d.Dead,
		Stats: map[string]int64{"enqueued": st.EnqueuedTotal, "promoted": st.PromotedTotal, "completed": st.CompletedTotal,
			"failed": st.FailedTotal, "retried": st.RetriedTotal, "reclaimed": st.ReclaimedTotal, "dead": st.DeadTotal,
			"canceled": st.CanceledTotal, "requeued": st.RequeuedTotal}}
	s.Markers += d.Claims
	dead := map[string]bool{}
	for _, id := range d.Dead {
		dead[id] = true
	}
	for id, job := range d.Jobs {
		ttl := time.Duration(-1)
		if at, ok := d.Expires[id]; ok {
			ttl = max(time.Until(at), time.Millisecond)
		}
		js := &JobState{ID: id, Queue: q, Status: string(job.Status), Token: job.Token, LastError: job.LastError,
			Attempts: job.Attempts, MaxAttempts: job.MaxAttempts, TTL: ttl, Seq: -1, InDead: dead[id]}
		var p Payload
		if json.Unmarshal(job.Payload, &p) == nil && p.Seq > 0 {
			js.Seq = p.Seq
		}
		s.Jobs[id] = js
	}
	return nil
}

// Depths answers how many jobs wait or run in queues: scheduled, pending
// and processing. Zero means drained.
func Depths(ctx context.Context, rdb redis.UniversalClient, ns string, queues []string) (int64, error) {
	c, err := queue.NewClient(queue.Config{Redis: rdb, Namespace: ns, DisableEvents: true})
	if err != nil {
		return 0, fmt.Errorf("chaos: %w", err)
	}
	defer func() { _ = c.Close() }()
	var total int64
	for _, q := range queues {
		st, err := c.Stats(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("chaos: reading queue depths: %w", err)
		}
		total += st.Scheduled + st.Pending + st.Processing
	}
	return total, nil
}
