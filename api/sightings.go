package api

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/registry"
)

// sightingGap is the longest this server keeps an HTTP worker's sighting
// before the registry hears of it, and how long a sighting it recorded
// stands for the worker's next ones: a Go worker refreshes its held jobs
// within a second of a change too (package worker).
const sightingGap = time.Second

// maxPendingJobs is how many jobs' changes a worker's unwritten sightings
// hold before they are written without waiting for the gap: a worker
// busy enough to reach it costs a registry call that many jobs, and one
// call never carries more than registry.MaxHeldJobs.
const maxPendingJobs = 256

// sightings is what this server recorded, and has still to record, of
// the HTTP workers that name themselves (worker_id). Each call of such a
// worker is a sighting: a claim's before it claims (its queue and
// labels), and the jobs it holds after a claim or heartbeat and no longer
// holds after a complete, failure or cancel. Each written as it comes
// (even in batches: toucher), a busy worker's sightings would cost Redis
// about as much as its jobs. So:
//
//   - a claim's sighting is written before the claim (it is the
//     registry's cap on live workers) unless this server wrote one of the
//     same worker within its gap (a third of the worker's TTL, at most
//     sightingGap) that recorded the same queue and labels: the worker
//     is live and nothing would change;
//   - a change of its held jobs made within the gap after the last write
//     of the worker waits for the gap's end (unless maxPendingJobs jobs
//     wait), and the request does not wait for it; one made past the gap
//     is written by its request, with what waits (see heldJobs). Either
//     way they go merged as the toucher merges a batch (mergeTouches:
//     each job's last sighting decides whether it is held);
//   - a read of the registry through this server (GET /v1/workers and
//     /v1/workers/{id}), a PUT or DELETE of a worker and the server's
//     Close write what waits first, so this server's own answers are
//     current.
//
// The registry is what a worker is seen doing, never what decides who
// may ack a job (see registry's package doc): a list up to a second
// behind is what a Go worker's already is. The writes of one worker go
// one after another, in the order they were taken.
type sightings struct {
	touch func(ctx context.Context, id string, t registry.Touch) (time.Duration, error)
	clock clockwork.Clock
	log   *slog.Logger

	mu      sync.Mutex
	ws      map[string]*sighting
	sweepAt int // the number of workers at which those with nothing to keep are forgotten
}

// sighting is one worker's.
type sighting struct {
	write sync.Mutex // held by a write of its sightings, so that they go in order

	// under sightings.mu:
	at      time.Time        // when the last write that recorded it started (zero: none)
	gap     time.Duration    // how long after at a sighting like the last stands for the next
	queues  []string         // the queues claims of it were recorded with
	labels  []string         // the labels last recorded
	pending []registry.Touch // the held-job changes not written yet, in order
	jobs    int              // the jobs pending names, repeats counted
	timer   clockwork.Timer  // the write of pending, when one is due
}

// minSweep is the fewest workers kept before the first sweep of those
// with nothing to keep.
const minSweep = 1024

func newSightings(touch func(context.Context, string, registry.Touch) (time.Duration, error), clock clockwork.Clock, log *slog.Logger) *sightings {
	return &sightings{touch: touch, clock: clock, log: log, ws: map[string]*sighting{}, sweepAt: minSweep}
}

// entry answers worker id's sighting, made when there is none. s.mu is held.
func (s *sightings) entry(id string) *sighting {
	w := s.ws[id]
	if w != nil {
		return w
	}
	if len(s.ws) >= s.sweepAt {
		now := s.clock.Now()
		for k, x := range s.ws {
			if x.idle() && now.Sub(x.at) >= x.gap {
				delete(s.ws, k)
			}
		}
		s.sweepAt = max(minSweep, 2*len(s.ws))
	}
	w = &sighting{}
	s.ws[id] = w
	return w
}

// beforeClaim records the sighting of a claim of worker id (t: its queue
// and labels) before the claim: at once, unless a write of this server
// recorded the same within the worker's gap. Its error is the claim's.
func (s *sightings) beforeClaim(ctx context.Context, id string, t registry.Touch) error {
	s.mu.Lock()
	w := s.ws[id]
	fresh := w != nil && !w.at.IsZero() && s.clock.Since(w.at) < w.gap &&
		slices.Contains(w.queues, t.Queue) && (len(t.Labels) == 0 || slices.Equal(w.labels, t.Labels))
	s.mu.Unlock()
	if fresh {
		return nil
	}
	return s.write(ctx, id, t, func(w *sighting) {
		if t.Queue != "" && !slices.Contains(w.queues, t.Queue) && len(w.queues) < registry.MaxQueues {
			w.queues = append(w.queues, t.Queue)
		}
		if len(t.Labels) > 0 {
			w.labels = slices.Clone(t.Labels)
		}
	})
}

// write writes t, a sighting of worker id, and notes in id's record when
// it started, the gap its TTL gives, and (note, when given, under s.mu)
// what else it recorded.
func (s *sightings) write(ctx context.Context, id string, t registry.Touch, note func(*sighting)) error {
	start := s.clock.Now()
	ttl, err := s.touch(ctx, id, t)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.entry(id)
	if start.After(w.at) {
		w.at = start
	}
	w.gap = min(sightingGap, ttl/3)
	if note != nil {
		note(w)
	}
	return nil
}

// heldJobs records that worker id holds (or, h false, no longer holds)
// jobs. When this server wrote the worker within its gap (and fewer than
// maxPendingJobs wait), the change waits for the gap's end (see
// sightings); otherwise it is written now, with what waits, under ctx: a
// worker's calls keep it live in the registry as they always do, however
// long it was quiet.
func (s *sightings) heldJobs(ctx context.Context, id string, jobs []registry.JobRef, h bool) error {
	if len(jobs) == 0 {
		return nil
	}
	t := registry.Touch{Drop: jobs}
	if h {
		t = registry.Touch{Add: jobs}
	}
	s.mu.Lock()
	w := s.entry(id)
	w.pending = append(w.pending, t)
	w.jobs += len(jobs)
	wait := time.Duration(0)
	if !w.at.IsZero() && w.jobs < maxPendingJobs {
		wait = w.gap - s.clock.Since(w.at)
	}
	if wait > 0 && w.timer == nil {
		w.timer = s.clock.AfterFunc(wait, func() { s.flushLater(id) })
	}
	s.mu.Unlock()
	if wait > 0 {
		return nil
	}
	return s.flush(ctx, id)
}

// flushLater writes worker id's waiting sightings, when its timer fires;
// a failure is logged, as a sighting after a job call's is.
func (s *sightings) flushLater(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	if err := s.flush(ctx, id); err != nil {
		s.log.Warn("api: recording a worker's jobs in the registry failed", "worker_id", id, "err", err)
	}
}

// flush writes worker id's waiting sightings now.
func (s *sightings) flush(ctx context.Context, id string) error {
	s.mu.Lock()
	w := s.ws[id]
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	w.write.Lock()
	defer w.write.Unlock()
	s.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	pending := w.pending
	w.pending, w.jobs = nil, 0
	s.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	// One touch (the sightings carry no queue), in pieces of at most
	// registry.MaxHeldJobs: a claim's jobs may come on top of the
	// maxPendingJobs that wait.
	t := mergeTouches(pending)[0]
	for len(t.Add) > 0 || len(t.Drop) > 0 {
		var part registry.Touch
		n := min(len(t.Add), registry.MaxHeldJobs)
		part.Add, t.Add = t.Add[:n:n], t.Add[n:]
		n = min(len(t.Drop), registry.MaxHeldJobs-len(part.Add))
		part.Drop, t.Drop = t.Drop[:n:n], t.Drop[n:]
		if err := s.write(ctx, id, part, nil); err != nil {
			return err
		}
	}
	return nil
}

// flushAll writes every worker's waiting sightings now; it answers the
// first error, after trying them all.
func (s *sightings) flushAll(ctx context.Context) error {
	s.mu.Lock()
	var ids []string
	for id, w := range s.ws {
		if len(w.pending) > 0 {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	var first error
	for _, id := range ids {
		if err := s.flush(ctx, id); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// forget writes worker id's waiting sightings and forgets what this
// server recorded of it: a PUT or DELETE of it follows, after which its
// next claim is recorded before it claims again.
func (s *sightings) forget(ctx context.Context, id string) error {
	err := s.flush(ctx, id)
	s.mu.Lock()
	if w := s.ws[id]; w != nil && w.idle() {
		delete(s.ws, id)
	}
	s.mu.Unlock()
	return err
}

// idle reports whether w has nothing to write and no write under way,
// so that forgetting it loses nothing and reorders no write (a write of
// a worker forgotten could otherwise overtake one of the same worker's
// made after). sightings.mu is held.
func (w *sighting) idle() bool {
	if w.timer != nil || len(w.pending) > 0 || !w.write.TryLock() {
		return false
	}
	w.write.Unlock()
	return true
}
