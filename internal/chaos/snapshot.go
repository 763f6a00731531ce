package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/queue"
)

// JobState is a job hash as found in the queue's Redis at the end.
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
	Scheduled, Pending, Processing, Leases int64
	Stats                                  map[string]int64
	DeadIDs                                []string
}

// Snapshot is the queue's Redis at the end of a run.
type Snapshot struct {
	Jobs   map[string]*JobState
	Queues map[string]*QueueState
	// Markers are the retry-safety records of claim and enqueue calls
	// (60 s TTL); Other any key that is neither those, a queue's structure,
	// a job nor an idempotency record.
	Markers int
	Other   []string
}

// TakeSnapshot reads every key of namespace ns: the queues' structures and
// every job hash (over every master of a cluster).
func TakeSnapshot(ctx context.Context, rdb redis.UniversalClient, ns string, queues []string) (*Snapshot, error) {
	s := &Snapshot{Jobs: map[string]*JobState{}, Queues: map[string]*QueueState{}}
	var mu sync.Mutex
	var jobKeys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, ns+":*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			mu.Lock()
			switch {
			case strings.Contains(k, "}:job:"):
				jobKeys = append(jobKeys, k)
			case strings.Contains(k, "}:claim:"), strings.Contains(k, "}:enq:"):
				s.Markers++
			case strings.Contains(k, "}:idem:"), k == ns+":queues", isQueueStructure(ns, k, queues):
				// expected: idempotency records, the queue list, the queues
			default:
				if len(s.Other) < 100 {
					s.Other = append(s.Other, k)
				}
			}
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("chaos: unsupported client %T", rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("chaos: scanning the queue's keys: %w", err)
	}
	for _, q := range queues {
		qs, err := readQueue(ctx, rdb, ns, q)
		if err != nil {
			return nil, err
		}
		s.Queues[q] = qs
	}
	dead := map[string]bool{}
	for _, qs := range s.Queues {
		for _, id := range qs.DeadIDs {
			dead[id] = true
		}
	}
	const batch = 500
	for i := 0; i < len(jobKeys); i += batch {
		keys := jobKeys[i:min(i+batch, len(jobKeys))]
		pipe := rdb.Pipeline()
		hs := make([]*redis.MapStringStringCmd, len(keys))
		ttls := make([]*redis.DurationCmd, len(keys))
		for j, k := range keys {
			hs[j], ttls[j] = pipe.HGetAll(ctx, k), pipe.PTTL(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("chaos: reading job hashes: %w", err)
		}
		for j, k := range keys {
			h := hs[j].Val()
			if len(h) == 0 {
				continue // expired between the scan and the read
			}
			q, id := splitJobKey(ns, k)
			job, err := queue.DecodeJobHash(q, id, h)
			if err != nil {
				return nil, fmt.Errorf("chaos: %w", err)
			}
			js := &JobState{ID: id, Queue: q, Status: string(job.Status), Token: job.Token, LastError: job.LastError,
				Attempts: job.Attempts, MaxAttempts: job.MaxAttempts, TTL: ttls[j].Val(), Seq: -1, InDead: dead[id]}
			var p Payload
			if json.Unmarshal(job.Payload, &p) == nil && p.Seq > 0 {
				js.Seq = p.Seq
			}
			s.Jobs[id] = js
		}
	}
	return s, nil
}

func isQueueStructure(ns, k string, queues []string) bool {
	for _, q := range queues {
		if rest, ok := strings.CutPrefix(k, ns+":{"+q+"}:"); ok {
			switch rest {
			case "scheduled", "pending", "processing", "leases", "completed", "dead", "stats", "paused", "waker":
				return true
			}
		}
	}
	return false
}

// splitJobKey reads queue and id from "<ns>:{<queue>}:job:<id>".
func splitJobKey(ns, k string) (queue, id string) {
	rest := strings.TrimPrefix(k, ns+":{")
	queue, id, _ = strings.Cut(rest, "}:job:")
	return queue, id
}

func readQueue(ctx context.Context, rdb redis.UniversalClient, ns, q string) (*QueueState, error) {
	p := ns + ":{" + q + "}:"
	pipe := rdb.Pipeline()
	sched, pend, proc, leases := pipe.ZCard(ctx, p+"scheduled"), pipe.LLen(ctx, p+"pending"), pipe.LLen(ctx, p+"processing"), pipe.ZCard(ctx, p+"leases")
	dead, stats := pipe.ZRange(ctx, p+"dead", 0, -1), pipe.HGetAll(ctx, p+"stats")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("chaos: reading queue %s: %w", q, err)
	}
	qs := &QueueState{Scheduled: sched.Val(), Pending: pend.Val(), Processing: proc.Val(), Leases: leases.Val(),
		DeadIDs: dead.Val(), Stats: map[string]int64{}}
	for k, v := range stats.Val() {
		qs.Stats[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return qs, nil
}

// Depths answers how many jobs wait or run in queues: scheduled, pending,
// processing (BLMOVE gap) and leased. Zero means drained.
// One pipeline for every queue, four counts each.
func Depths(ctx context.Context, rdb redis.UniversalClient, ns string, queues []string) (int64, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, 0, 4*len(queues))
	for _, q := range queues {
		p := ns + ":{" + q + "}:"
		cmds = append(cmds, pipe.ZCard(ctx, p+"scheduled"), pipe.LLen(ctx, p+"pending"),
			pipe.LLen(ctx, p+"processing"), pipe.ZCard(ctx, p+"leases"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("chaos: reading queue depths: %w", err)
	}
	var total int64
	for _, c := range cmds {
		total += c.Val()
	}
	return total, nil
}
