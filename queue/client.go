package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/alarm"
	"github.com/chronoq/chronoq/internal/batch"
)

// Caps and defaults. Each is documented where it is configured.
const (
	DefaultNamespace        = "chronoq"
	DefaultQueue            = "default"
	DefaultMaxPayloadBytes  = 1 << 20
	DefaultMaxQueues        = 1000
	DefaultMaxAttempts      = 3
	DefaultVisibility       = 30 * time.Second
	DefaultRetention        = time.Hour
	DefaultCompletedHistory = 1000
	DefaultDeadMaxJobs      = 10_000
	DefaultDeadMaxAge       = 30 * 24 * time.Hour
	DefaultIdempotencyTTL   = 24 * time.Hour
	DefaultRetryWindow      = time.Minute
	DefaultBlockingPoolSize = 64

	MaxAttemptsLimit  = 1000 // the most MaxAttempts a job may ask for
	MinVisibility     = 100 * time.Millisecond
	MaxVisibility     = 24 * time.Hour
	MaxResultTTL      = 30 * 24 * time.Hour
	MaxIdempotencyKey = 256              // bytes
	MaxBatch          = 1000             // jobs in one EnqueueBatch, CompleteMany, Claim
	MaxClaimWait      = 30 * time.Second // the longest blocking claim
	MaxDelay          = 10 * 365 * 24 * time.Hour
	promoteBatch      = 500 // jobs per promote.lua call
	reclaimBatch      = 500 // lapsed leases, and expired entries, per reclaim.lua call
	maxScriptLoops    = 10_000
	// blockingReadTimeout is the read deadline of the blocking pool: the
	// longest single wait (wakeChunk) and a margin.
	blockingReadTimeout = wakeChunk + 5*time.Second
)

// Config configures a [Client]. Only Redis is required.
type Config struct {
	// Redis is the connection: a *redis.Client (one server, or Sentinel
	// through redis.NewFailoverClient) or a *redis.ClusterClient. Required.
	// The Client derives a second pool from its options for blocking
	// claims, so that workers parked in XREAD BLOCK never hold the connections
	// completes and heartbeats need.
	Redis redis.UniversalClient
	// BlockingPoolSize is the size of that second pool: the most wake
	// hubs (one per queue and label set that claims wait on, however many
	// claims wait in it; see ClaimOptions.Wait) that read at once (more
	// wait for a connection). Defaults to 64.
	BlockingPoolSize int
	// Namespace prefixes every key. Defaults to "chronoq".
	Namespace string
	// Clock is the instance's clock, used only to sleep: every decision
	// about time (what is due, when a lease lapses, when a retry falls
	// due) is made by Redis's clock inside the scripts, so an instance
	// whose clock is wrong is never early and never takes a live lease.
	// Defaults to the real clock, on which the promoter's and the
	// workers' waits for a due time end to a fraction of a millisecond
	// (a clock given, clockwork.NewRealClock() too, is used as it is,
	// with Go timers, up to a millisecond late).
	Clock clockwork.Clock
	// FollowClock is for tests with a fake Clock: Redis's clock then
	// follows it. The scripts still read Redis's clock, shifted so that
	// it reads as the fake clock plus the real time gone by since that
	// fake clock was first used by a client (cron and the registry: as
	// the fake clock exactly), and advancing the fake clock moves the
	// time the scripts see; the client's estimate of the distance to
	// Redis's clock is 0. Never set it in production. Defaults to false.
	FollowClock bool
	// MaxPayloadBytes caps a job's payload and its result. Defaults to 1 MiB.
	MaxPayloadBytes int
	// MaxQueues caps the number of queues. Defaults to 1000.
	MaxQueues int
	// DefaultMaxAttempts is the attempts of a job that names none.
	// Defaults to 3.
	DefaultMaxAttempts int
	// DefaultVisibility is the lease of a claim when neither the job nor the
	// claim names one. Defaults to 30 s.
	DefaultVisibility time.Duration
	// DefaultBackoff is the retry policy of a job that names none. Defaults
	// to [DefaultBackoff] (1 s, ×2, at most 1 h, ±20 %).
	DefaultBackoff *Backoff
	// Retention is how long a completed job's hash is kept when the job
	// names no ResultTTL; negative deletes it at completion. Defaults to 1 h.
	Retention time.Duration
	// CompletedHistory caps the list of recently completed ids per queue.
	// Defaults to 1000.
	CompletedHistory int
	// DeadMaxJobs caps the dead set of a queue: the oldest go first.
	// Defaults to 10,000.
	DeadMaxJobs int
	// DeadMaxAge drops dead jobs older than this. Defaults to 30 days.
	DeadMaxAge time.Duration
	// IdempotencyTTL is how long an idempotency key is remembered.
	// Defaults to 24 h.
	IdempotencyTTL time.Duration
	// IdleQueueTTL is how long a queue that holds no job and into which
	// nothing is enqueued is kept: the reclaim sweep then forgets it (it
	// leaves the list of queues until its next enqueue). Defaults to
	// 7 days.
	IdleQueueTTL time.Duration
	// RetryWindow is how long a retried call is answered as the first was
	// after the job it named is gone: a job deleted within RetryWindow of
	// its enqueue or of its end leaves a tombstone until then, so that an
	// Enqueue retried after a lost reply does not make the job again (it
	// answers the original id) and a retried Complete, Fail or Release
	// answers what the first did. Defaults to 60 s.
	RetryWindow time.Duration
	// DisableEvents stops the scripts publishing job events (saves a
	// little Redis time when nobody listens). Defaults to false.
	DisableEvents bool
}

// Client is the queue's store: every state change of a job is one Lua
// script on Redis. It is safe for concurrent use.
type Client struct {
	cfg      Config
	rdb      redis.UniversalClient
	eng      *store.Store // runs the scripts (see internal/store)
	blocking redis.UniversalClient
	clock    clockwork.Clock
	ns       string
	pubcmd   string
	cluster  bool
	backoff  Backoff
	// backoffEnc is backoff.encode(), once: most jobs use the default.
	backoffEnc string
	instance   string // tells this client's nudges from others' on the nudge channel

	known sync.Map // queue name -> struct{}: registered in the queues set

	markFailures atomic.Int64 // see MarkFailures

	remarkMu    sync.Mutex
	remark      map[string]marked // marks to apply once Redis answers (see remarkLater)
	remarking   bool              // the goroutine that retries them runs
	closed      bool
	closing     chan struct{}  // closed by Close
	wakeChunk   time.Duration  // the package's wakeChunk; a test may lengthen it (below blockingReadTimeout)
	timeMode    store.TimeMode // how Redis's clock follows a test's (store.Running; a test may make it Exact)
	limitWaitNs atomic.Int64   // see LimitWait

	mu          sync.Mutex
	listeners   map[chan delayed.Nudge]struct{}
	wfListeners map[chan string]struct{} // see ReleaserNudges

	enqueues *batch.Batcher[prepared, Enqueued] // single enqueues, by queue (coalesce.go)

	labelSets sync.Map // queue name -> *setView: its label sets as last read (labels.go)
	floors    sync.Map // queue name -> *store.Floor: a bound of its Redis's clock, for claims ahead (claim.go)

	hubs     wakeHubs                     // the wake hubs of the waits (wakehub.go)
	ends     endHub                       // the waits for job ends (endwait.go)
	endReads *batch.Batcher[string, *Job] // their reads of their jobs, by queue
}

// NewClient checks cfg, fills its defaults and opens the blocking pool.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Redis == nil {
		return nil, errors.New("queue: Config.Redis is required")
	}
	cfg.Namespace = cmp.Or(cfg.Namespace, DefaultNamespace)
	if err := names.ValidateNamespace(cfg.Namespace); err != nil {
		return nil, err
	}
	cfg.BlockingPoolSize = cmp.Or(cfg.BlockingPoolSize, DefaultBlockingPoolSize)
	cfg.MaxPayloadBytes = cmp.Or(cfg.MaxPayloadBytes, DefaultMaxPayloadBytes)
	cfg.MaxQueues = cmp.Or(cfg.MaxQueues, DefaultMaxQueues)
	cfg.DefaultMaxAttempts = cmp.Or(cfg.DefaultMaxAttempts, DefaultMaxAttempts)
	cfg.DefaultVisibility = cmp.Or(cfg.DefaultVisibility, DefaultVisibility)
	cfg.Retention = cmp.Or(cfg.Retention, DefaultRetention)
	cfg.CompletedHistory = cmp.Or(cfg.CompletedHistory, DefaultCompletedHistory)
	cfg.DeadMaxJobs = cmp.Or(cfg.DeadMaxJobs, DefaultDeadMaxJobs)
	cfg.DeadMaxAge = cmp.Or(cfg.DeadMaxAge, DefaultDeadMaxAge)
	cfg.IdempotencyTTL = cmp.Or(cfg.IdempotencyTTL, DefaultIdempotencyTTL)
	cfg.RetryWindow = cmp.Or(cfg.RetryWindow, DefaultRetryWindow)
	cfg.IdleQueueTTL = cmp.Or(cfg.IdleQueueTTL, DefaultIdleQueueTTL)
	clock := cmp.Or(cfg.Clock, alarm.Real())
	c := &Client{cfg: cfg, rdb: cfg.Redis, eng: store.New(cfg.Redis, store.NewClock(clock, cfg.FollowClock)), ns: cfg.Namespace, backoff: DefaultBackoff, instance: newToken()[:12],
		clock: clock, listeners: map[chan delayed.Nudge]struct{}{}, closing: make(chan struct{}), wakeChunk: wakeChunk}
	if cfg.DefaultBackoff != nil {
		if err := cfg.DefaultBackoff.Validate(); err != nil {
			return nil, fmt.Errorf("queue: Config.DefaultBackoff: %w", err)
		}
		c.backoff = *cfg.DefaultBackoff
	}
	c.backoffEnc = c.backoff.encode()
	c.enqueues = c.newEnqueues()
	c.endReads = c.newEndReads()
	if err := c.checkDefaults(); err != nil {
		return nil, err
	}
	switch r := cfg.Redis.(type) {
	case *redis.Client:
		o := *r.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = cfg.BlockingPoolSize, 0, 0
		o.PushNotificationProcessor = nil // each client registers its own handlers
		o.MaintNotificationsConfig = blockingMaint()
		o.ReadTimeout = blockingReadTimeout
		c.blocking = redis.NewClient(&o)
		c.pubcmd = "PUBLISH"
	case *redis.ClusterClient:
		o := *r.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = cfg.BlockingPoolSize, 0, 0
		o.PushNotificationProcessor = nil
		o.MaintNotificationsConfig = blockingMaint()
		o.ReadTimeout = blockingReadTimeout
		c.blocking = redis.NewClusterClient(&o)
		c.pubcmd = "SPUBLISH" // sharded pub/sub: an event stays on its queue's node
		c.cluster = true
	default:
		return nil, fmt.Errorf("queue: Config.Redis must be a *redis.Client or *redis.ClusterClient, not %T", cfg.Redis)
	}
	if cfg.DisableEvents {
		c.pubcmd = ""
	}
	return c, nil
}

// blockingMaint is the maintenance-notification config of the blocking
// pool: its own, because go-redis writes to the caller's config while a
// connection handshakes (copying it would race), and off, because the pool
// only ever runs XREAD BLOCK.
func blockingMaint() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

func (c *Client) checkDefaults() error {
	switch {
	case c.cfg.DefaultMaxAttempts < 1 || c.cfg.DefaultMaxAttempts > MaxAttemptsLimit:
		return fmt.Errorf("queue: Config.DefaultMaxAttempts must be in [1, %d]", MaxAttemptsLimit)
	case c.cfg.DefaultVisibility < MinVisibility || c.cfg.DefaultVisibility > MaxVisibility:
		return fmt.Errorf("queue: Config.DefaultVisibility must be in [%s, %s]", MinVisibility, MaxVisibility)
	case c.cfg.MaxPayloadBytes < 0 || c.cfg.MaxQueues < 0 || c.cfg.CompletedHistory < 0 || c.cfg.DeadMaxJobs < 0:
		return errors.New("queue: Config caps must not be negative")
	}
	return nil
}

// Close closes the blocking pool and the subscriptions of the waits for
// job ends (WaitEnded, which then answers an error). The Redis client
// given in Config is the caller's to close.
func (c *Client) Close() error {
	c.remarkMu.Lock()
	if !c.closed {
		c.closed = true
		close(c.closing)
	}
	c.remarkMu.Unlock()
	c.ends.close()
	return c.blocking.Close()
}

// Clock answers the client's clock.
func (in *inside) Clock() clockwork.Clock { return in.clock }

// Redis answers the client's Redis connection.
func (in *inside) Redis() redis.UniversalClient { return in.rdb }

// Namespace answers the prefix of the client's keys.
func (in *inside) Namespace() string { return in.ns }

// Source is the client as a promoter's source: pass it as
// delayed.Config.Source (see package delayed) to run a promoter in this
// process. It promotes, reads the due index, lists the queues and
// delivers the nudges of jobs scheduled ahead of their queue's earliest.
func (c *Client) Source() delayed.Source { return (*inside)(c) }

// Promote is delayed.Source's: Client.Promote.
func (in *inside) Promote(ctx context.Context, queue string, horizon time.Duration) (int, time.Time, error) {
	return (*Client)(in).Promote(ctx, queue, horizon)
}

// Queues is delayed.Source's: Client.Queues.
func (in *inside) Queues(ctx context.Context) ([]string, error) { return (*Client)(in).Queues(ctx) }

// keysFor validates queue and builds its keys.
func (c *Client) keysFor(queue string) (store.Keys, error) {
	if err := names.ValidateQueue(queue); err != nil {
		return store.Keys{}, err
	}
	return store.QueueKeys(c.ns, queue), nil
}

// register adds queue to the set of known queues and makes its keys exist
// (once per process, and again after the queue was deleted).
func (c *Client) register(ctx context.Context, queue string) error {
	if _, ok := c.known.Load(queue); ok {
		return nil
	}
	ok, err := store.CallGlobal(ctx, c.eng, store.Register, []string{store.QueuesKey(c.ns)}, &store.RegisterArgs{Name: queue, Max: c.cfg.MaxQueues})
	if err != nil {
		return err
	}
	if ok.Code == 0 {
		return fmt.Errorf("%w: the cap is %d queues (Config.MaxQueues)", ErrTooManyQueues, c.cfg.MaxQueues)
	}
	// A queue made while an event webhook subscription takes every
	// queue's events starts with its hooks setting on. Read after the
	// name is registered: a subscription made after this read finds the
	// name, and sets the setting itself (package dispatch, Hooks.Sync).
	all, err := c.rdb.Get(ctx, store.HooksAllKey(c.ns)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("queue: create %s: %w", queue, wrapRedis(err))
	}
	if _, err := call(ctx, c, store.Create, store.QueueKeys(c.ns, queue), &store.CreateArgs{Hooks: all == "1"}); err != nil {
		return fmt.Errorf("queue: create %s: %w", queue, err)
	}
	c.known.Store(queue, struct{}{})
	return nil
}

// Queues lists the known queues, sorted by name.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	qs, err := c.rdb.SMembers(ctx, store.QueuesKey(c.ns)).Result()
	if err != nil {
		return nil, wrapRedis(err)
	}
	slices.Sort(qs)
	return qs, nil
}

// timeOffset is what the scripts add to Redis's TIME, in µs: 0, except
// when Redis's clock follows a test's clock (see Config.FollowClock).
func (c *Client) timeOffset() int64 { return c.eng.Clock().OffsetUs(c.timeMode) }

// RedisClock is this client's estimate of Redis's clock, for an operator
// to see how far the instance's clock is off (Offset; GET /v1/status and
// the gauge chronoq_redis_clock_offset_seconds show it): from the last
// script that answered Redis's time (claims, promoter passes, cron's due
// reads) or a TIME (chronoq serve reads one at start and each minute):
// the one estimate queue, cron, the registry
// and dispatch share (see internal/store.Clock). Every decision about
// time is Redis's; this client only sleeps by its own clock, until
// Redis-time instants less the offset. When Redis's clock follows a
// test's clock (Config.FollowClock) the two clocks are one: the offset
// is 0.
func (in *inside) RedisClock() store.Estimate { return in.eng.Clock().Estimate() }

// MeasureRedisClock measures the distance to Redis's clock now, with one
// TIME, and answers the estimate (see RedisClock). On a cluster it is one
// node's clock; a queue's time is its master's.
func (in *inside) MeasureRedisClock(ctx context.Context) (store.Estimate, error) {
	c := (*Client)(in)
	est, err := c.eng.Clock().Measure(ctx, c.rdb)
	if err != nil {
		return est, wrapRedis(err)
	}
	return est, nil
}

// localOf is t, an instant of Redis's clock, on this client's clock: when
// to wake for it.
func (c *Client) localOf(t time.Time) time.Time { return c.eng.Clock().LocalOf(t) }

// tombMs is Config.RetryWindow in ms, as the scripts take it.
func (c *Client) tombMs() int64 { return c.cfg.RetryWindow.Milliseconds() }

// newToken is a fresh random claim token.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// Nudges is for a promoter (delayed.Source, as Due): it delivers a nudge when a job of any
// queue is scheduled ahead of that queue's earliest one, from this process
// directly and from other processes through Redis pub/sub.
func (in *inside) Nudges(ctx context.Context) <-chan delayed.Nudge {
	c := (*Client)(in)
	ch := make(chan delayed.Nudge, 256)
	c.mu.Lock()
	c.listeners[ch] = struct{}{}
	c.mu.Unlock()
	sub := c.rdb.Subscribe(ctx, store.NudgeChannel(c.ns))
	done := make(chan struct{})
	go func() {
		defer close(done)
		msgs := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				if n, from, ok := parseNudge(m.Payload); ok && from != c.instance {
					n.At = c.localOf(n.At)
					c.mu.Lock()
					select {
					case ch <- n:
					default:
					}
					c.mu.Unlock()
				}
			}
		}
	}()
	go func() {
		<-ctx.Done()
		_ = sub.Close()
		<-done
		c.mu.Lock()
		delete(c.listeners, ch)
		close(ch)
		c.mu.Unlock()
	}()
	return ch
}

// parseNudge reads "<queue>|<due ms>|<instance>".
func parseNudge(s string) (n delayed.Nudge, from string, ok bool) {
	parts := strings.SplitN(s, "|", 3)
	if len(parts) != 3 || names.ValidateQueue(parts[0]) != nil {
		return delayed.Nudge{}, "", false
	}
	at, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return delayed.Nudge{}, "", false
	}
	return delayed.Nudge{Queue: parts[0], At: time.UnixMilli(at).UTC()}, parts[2], true
}

// nudgeLocal tells promoters here that queue has a job due at atMs ahead
// of all others (those elsewhere hear it by pub/sub from mark.lua; a
// client ignores its own echo).
func (c *Client) nudgeLocal(queue string, atMs int64) {
	n := delayed.Nudge{Queue: queue, At: c.localOf(time.UnixMilli(atMs).UTC())}
	c.mu.Lock()
	for ch := range c.listeners {
		select {
		case ch <- n:
		default:
		}
	}
	c.mu.Unlock()
}
