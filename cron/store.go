package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/chronoq/chronoq/internal/plumbing"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
)

const (
	// tickMemory is how long a tick stays in an entry's set of done ticks
	// (counted from the latest tick recorded). An instance reaching a tick
	// this much later than another finds it done without asking the queue;
	// past it, the queue's idempotency key still answers (Config.Grace is
	// capped below it).
	tickMemory = time.Hour
	// maxTxAttempts bounds the retries of Put when the entry it puts
	// changes between its read and its write.
	maxTxAttempts = 20
	// listChunk is how many entries List reads a command (HSCAN's
	// COUNT), and how many last runs a round trip.
	listChunk = 1000
)

// Store keeps the cron entries in Redis, each with its cursor in the due
// index (see index.go). Any number of instances may share it; a change is
// in the index, for every [Scheduler], when Put returns. It is safe for
// concurrent use.
type Store struct {
	client *queue.Client
	rdb    redis.UniversalClient
	eng    *store.Store // runs the cron scripts (store.Cron*)
	rc     *redisClock
	ns     string
	// maxEntries caps how many entries there may be (see WithMaxEntries).
	maxEntries int
}

// NewStore is the store of client's namespace. It keeps time by the
// clock of the Redis that holds the entries; it sleeps, and estimates
// that clock, by the client's. It holds at most DefaultMaxEntries entries
// unless an option says otherwise.
func NewStore(client *queue.Client, opts ...StoreOption) *Store {
	s := &Store{client: client, rdb: plumbing.Of(client).Redis(), eng: plumbing.Of(client).Engine(), rc: newRedisClock(client), ns: plumbing.Of(client).Namespace(),
		maxEntries: DefaultMaxEntries}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Put creates or replaces the entry e.Name. created is true when it was
// new. Errors for bad input are *FieldError wrapping queue.ErrInvalid, or
// queue.ErrPayloadTooLarge for a payload over the queue client's
// Config.MaxPayloadBytes: an entry whose jobs the client would refuse is
// refused here, not dropped at every tick.
//
// Putting settings equal to the stored ones changes nothing. Any other
// change restarts the entry's ticks from now, by the clock of the Redis
// that holds the entries: ticks before it are neither run nor caught up,
// whatever the Missed policy (this is also what unpausing does).
func (s *Store) Put(ctx context.Context, e Entry) (created bool, err error) {
	e, sched, err := s.validate(e)
	if err != nil {
		return false, err
	}
	settings, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("cron: put %q: %w", e.Name, err)
	}
	for range maxTxAttempts {
		res, err := s.putOnce(ctx, e, sched, string(settings))
		if err != nil {
			return false, redisErr("put "+strconv.Quote(e.Name), err)
		}
		switch res.status {
		case putChanged:
			continue // this entry changed under us: read it again
		case putFull:
			return false, &TooManyEntriesError{Name: e.Name, Max: s.maxEntries}
		}
		if res.status == putCreated {
			// Bookkeeping left by a deleted entry of the same name.
			if err := s.rdb.Del(ctx, runKey(s.ns, e.Name), ticksKey(s.ns, e.Name)).Err(); err != nil {
				return true, redisErr("put "+strconv.Quote(e.Name), err)
			}
		}
		return res.status == putCreated, nil
	}
	return false, fmt.Errorf("cron: put %q: %w: the entry kept changing", e.Name, queue.ErrConflict)
}

// redisNow reads the time of the Redis that holds the entries (tx is
// bound to it, in a cluster too), to the millisecond.
func (s *Store) redisNow(ctx context.Context, tx *redis.Tx) (time.Time, error) {
	off := s.rc.offsetArg()
	t0 := s.rc.clock.Now()
	tm, err := tx.Time(ctx).Result()
	t1 := s.rc.clock.Now()
	if err != nil {
		return time.Time{}, err
	}
	us := tm.UnixMicro() + off
	s.rc.observe(us, t0, t1)
	return time.UnixMilli(s.rc.at(us).UnixMilli()).UTC(), nil
}

// Register puts entries declared in code, typically at start-up: each
// replaces the stored entry of its name (entries of other names, put over
// the API, stay). All are validated before any is stored. Registering
// unchanged entries again, as every restart does, keeps their history, so
// the Missed policy sees the ticks missed while the service was down.
func (s *Store) Register(ctx context.Context, entries ...Entry) error {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if _, _, err := s.validate(e); err != nil {
			return fmt.Errorf("cron: register %q: %w", e.Name, err)
		}
		if seen[e.Name] {
			return fmt.Errorf("cron: register: %w", invalid("name", "%q given twice", e.Name))
		}
		seen[e.Name] = true
	}
	for _, e := range entries {
		if _, err := s.Put(ctx, e); err != nil {
			return fmt.Errorf("cron: register %q: %w", e.Name, err)
		}
	}
	return nil
}

// Get reads the entry name with its last run and next tick. An absent
// entry is an error wrapping queue.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (Entry, error) {
	if err := validateName(name); err != nil {
		return Entry{}, err
	}
	raw, err := s.rdb.HGet(ctx, entriesKey(s.ns), name).Result()
	if errors.Is(err, redis.Nil) {
		return Entry{}, notFoundError{name}
	}
	if err != nil {
		return Entry{}, redisErr("get "+strconv.Quote(name), err)
	}
	st, err := decodeStored(raw)
	if err != nil {
		return Entry{}, err
	}
	runs, err := s.lastRuns(ctx, []string{name})
	if err != nil {
		return Entry{}, err
	}
	return s.view(st, runs[0]), nil
}

// List reads every entry, sorted by name, listChunk entries a command.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	all, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	slices.Sort(names)
	runs, err := s.lastRuns(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(names))
	for i, name := range names {
		st, err := decodeStored(all[name])
		if err != nil {
			return nil, err
		}
		out = append(out, s.view(st, runs[i]))
	}
	return out, nil
}

// Delete removes the entry name and its history. An absent entry is an
// error wrapping queue.ErrNotFound. Jobs already enqueued stay.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	var del *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, entriesKey(s.ns), name)
		p.HDel(ctx, versionsKey(s.ns), name)
		p.ZRem(ctx, dueKey(s.ns), name)
		return nil
	})
	if err != nil {
		return redisErr("delete "+strconv.Quote(name), err)
	}
	if del.Val() == 0 {
		return notFoundError{name}
	}
	if err := s.rdb.Del(ctx, runKey(s.ns, name), ticksKey(s.ns, name)).Err(); err != nil {
		return redisErr("delete "+strconv.Quote(name), err)
	}
	return nil
}

// Trigger enqueues one run of the entry name now, outside its schedule
// (also when it is paused; its Overlap policy is not applied). The run
// becomes the entry's last run.
func (s *Store) Trigger(ctx context.Context, name string) (*queue.Job, error) {
	e, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	res, err := s.client.Enqueue(ctx, newJob(e, ""))
	if err != nil {
		return nil, fmt.Errorf("cron: trigger %q: %w", name, err)
	}
	if err := s.record(ctx, name, time.Time{}, res.Job); err != nil {
		return nil, err
	}
	return res.Job, nil
}

// validate normalizes e and checks that the queue client would enqueue
// its jobs (see checkJob).
func (s *Store) validate(e Entry) (Entry, *Schedule, error) {
	e, sched, err := normalize(e)
	if err != nil {
		return Entry{}, nil, err
	}
	if err := s.checkJob(e); err != nil {
		return Entry{}, nil, err
	}
	return e, sched, nil
}

// checkJob asks s's queue client whether it would enqueue the job of a
// tick of e, with the client's own limits (MaxPayloadBytes, its default
// max attempts, ...): what it would refuse at every tick is refused when
// the entry is written.
func (s *Store) checkJob(e Entry) error {
	// A tick's idempotency key is never longer than this one's.
	err := s.client.Validate(newJob(e, tickIdempotencyKey(e.Name, time.UnixMilli(math.MaxInt64))))
	var fe *queue.FieldError
	if errors.As(err, &fe) {
		return &FieldError{Index: -1, Field: fe.Field, Err: fe.Err}
	}
	if err != nil {
		return fmt.Errorf("cron: checking the job of %q: %w", e.Name, err)
	}
	return nil
}

func newJob(e Entry, idempotencyKey string) queue.NewJob {
	return queue.NewJob{Queue: e.Queue, Kind: e.Kind, Payload: e.Payload, MaxAttempts: e.MaxAttempts,
		IdempotencyKey: idempotencyKey, FlowKey: e.FlowKey}
}

// view is the entry as Get answers it.
func (s *Store) view(st stored, run lastRun) Entry {
	e := st.Entry
	e.LastRunAt, e.LastJobID = run.at, run.jobID
	if !e.Paused {
		if sched, err := Parse(e.Schedule, e.Timezone); err == nil {
			e.NextRunAt = sched.Next(s.rc.now())
		}
	}
	return e
}

// load reads the entries hash: name -> stored JSON. It reads it with
// HSCAN, listChunk entries a command, so that a large hash never holds
// Redis for long (HGETALL of 100,000 entries takes about 80 ms).
func (s *Store) load(ctx context.Context) (map[string]string, error) {
	all := map[string]string{}
	for cur := uint64(0); ; {
		kv, next, err := s.rdb.HScan(ctx, entriesKey(s.ns), cur, "", listChunk).Result()
		if err != nil {
			return nil, redisErr("list", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			all[kv[i]] = kv[i+1] // HSCAN may answer a field twice
		}
		if cur = next; cur == 0 {
			return all, nil
		}
	}
}

func decodeStored(raw string) (stored, error) {
	var st stored
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return stored{}, fmt.Errorf("cron: stored entry: %w", err)
	}
	return st, nil
}

// lastRun is an entry's last run as recorded.
type lastRun struct {
	tickMs int64 // the latest tick run; 0 when none
	at     time.Time
	queue  string
	jobID  string
}

// lastRuns reads the last runs of names, in their order, in one round trip.
func (s *Store) lastRuns(ctx context.Context, names []string) ([]lastRun, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out := make([]lastRun, 0, len(names))
	for chunk := range slices.Chunk(names, listChunk) {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		for i, name := range chunk {
			cmds[i] = pipe.HGetAll(ctx, runKey(s.ns, name))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, redisErr("read last runs", err)
		}
		for _, c := range cmds {
			out = append(out, parseLastRun(c.Val()))
		}
	}
	return out, nil
}

func parseLastRun(h map[string]string) lastRun {
	tick, _ := strconv.ParseInt(h["tick_ms"], 10, 64)
	r := lastRun{tickMs: tick, queue: h["queue"], jobID: h["job_id"]}
	if ms, err := strconv.ParseInt(h["run_at_ms"], 10, 64); err == nil && ms > 0 {
		r.at = time.UnixMilli(ms).UTC()
	}
	return r
}

// record runs cron_record.lua for job, the run of tick (zero: a trigger).
func (s *Store) record(ctx context.Context, name string, tick time.Time, j *queue.Job) error {
	tickArg, trim := "", int64(0)
	if !tick.IsZero() {
		tickArg = strconv.FormatInt(tick.UnixMilli(), 10)
		trim = tick.Add(-tickMemory).UnixMilli()
	}
	at := j.EnqueuedAt // a trigger ran when Redis enqueued it; a tick, at its tick
	if !tick.IsZero() {
		at = tick
	}
	_, err := store.CallGlobal(ctx, s.eng, store.CronRecord, []string{runKey(s.ns, name), ticksKey(s.ns, name)},
		&store.CronRecordArgs{Tick: tickArg, RunAtMs: at.UnixMilli(), Queue: j.Queue, JobID: j.ID, TrimMs: trim})
	if err != nil {
		return redisErr("record run of "+strconv.Quote(name), err)
	}
	return nil
}

// notFoundError is an absent entry; it wraps queue.ErrNotFound.
type notFoundError struct{ name string }

func (e notFoundError) Error() string { return "cron: no entry " + strconv.Quote(e.name) }
func (e notFoundError) Unwrap() error { return queue.ErrNotFound }

// redisErr wraps a Redis failure as queue.ErrUnavailable (context errors
// stay as they are).
func redisErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("cron: %s: %w: %w", op, queue.ErrUnavailable, err)
}
