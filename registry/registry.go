package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/chronoq/chronoq/queue"
)

// Defaults and caps. Every cap is checked before anything is written;
// input over one is refused with an error wrapping queue.ErrInvalid (a
// 400 over HTTP), naming the field.
const (
	// DefaultTTL is how long a worker stays registered after its last
	// sighting when the caller names no TTL. A Go worker refreshes every
	// third of its TTL.
	DefaultTTL = time.Minute
	MinTTL     = time.Second
	MaxTTL     = time.Hour
	// DefaultMaxWorkers caps the workers live at once (Config.MaxWorkers):
	// a new worker past it is refused with ErrTooManyWorkers; those
	// registered already refresh as ever.
	DefaultMaxWorkers = 10_000
	MaxIDBytes        = 128  // a worker id: [A-Za-z0-9][A-Za-z0-9._:-]{0,127}
	MaxHostBytes      = 255  // the host, any printable UTF-8
	MaxVersionBytes   = 64   // the version, any printable UTF-8
	MaxLabels         = 64   // labels of one worker
	MaxLabelBytes     = 128  // one label, printable UTF-8 without spaces
	MaxQueues         = 1000 // queues of one worker (registered, and learned from its claims: the first ones kept)
	MaxHeldJobs       = 1000 // jobs listed as held by one worker: past it, more are not recorded
	DefaultListLimit  = 100  // workers in a page of List
	MaxListLimit      = 1000
	// sweepBatch bounds the expired workers one script deletes.
	sweepBatch = 1000
)

// ErrTooManyWorkers is answered when a new worker would pass
// Config.MaxWorkers live workers. Nothing was written.
var ErrTooManyWorkers = errors.New("registry: too many live workers")

// Config configures a [Registry]. All of it is optional.
type Config struct {
	// TTL is how long a worker stays registered after its last sighting
	// when a call names none (MinTTL to MaxTTL). Defaults to DefaultTTL.
	TTL time.Duration
	// MaxWorkers caps the workers live at once. Defaults to
	// DefaultMaxWorkers.
	MaxWorkers int
}

// Registry reads and writes the worker registry of a queue client's
// namespace. It is safe for concurrent use.
type Registry struct {
	cfg Config
	eng *store.Store // runs the registry's scripts (store.Registry*) on the client's Redis clock
	ns  string
	k   keys
}

// New is the registry of client's namespace, on client's Redis and clock.
func New(client *queue.Client, cfg Config) (*Registry, error) {
	if client == nil {
		return nil, errors.New("registry: a queue client is required")
	}
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	cfg.MaxWorkers = cmp.Or(cfg.MaxWorkers, DefaultMaxWorkers)
	if err := checkTTL("Config.TTL", cfg.TTL); err != nil {
		return nil, err
	}
	if cfg.MaxWorkers < 1 {
		return nil, fmt.Errorf("registry: Config.MaxWorkers must be positive, got %d", cfg.MaxWorkers)
	}
	return &Registry{cfg: cfg, eng: plumbing.Of(client).Engine(), ns: plumbing.Of(client).Namespace(), k: keysOf(plumbing.Of(client).Namespace())}, nil
}

// Namespace is the namespace of the registry's keys.
func (r *Registry) Namespace() string { return r.ns }

// TTL is the registry's default TTL.
func (r *Registry) TTL() time.Duration { return r.cfg.TTL }

// Info is what a worker says of itself.
type Info struct {
	// ID names the worker: 1 to MaxIDBytes of [A-Za-z0-9._:-], starting
	// with a letter or digit. Required.
	ID string
	// Host is where it runs (free text, at most MaxHostBytes).
	Host string
	// Labels are its labels (at most MaxLabels, each at most
	// MaxLabelBytes, printable, no spaces). Duplicates are dropped.
	Labels []string
	// Queues are the queues it serves (at most MaxQueues, valid queue
	// names). Duplicates are dropped.
	Queues []string
	// Version is its software's version (free text, at most
	// MaxVersionBytes).
	Version string
}

// JobRef names a job a worker holds.
type JobRef struct {
	Queue, ID string
}

func (j JobRef) String() string { return j.Queue + "/" + j.ID }

// Worker is a live worker as the registry holds it. Times are Redis's
// clock.
type Worker struct {
	Info
	// StartedAt is when the registry first saw it (since it last expired
	// or was removed).
	StartedAt time.Time
	// LastSeenAt is its last registration or refresh.
	LastSeenAt time.Time
	// ExpiresAt is when it expires unless refreshed: LastSeenAt plus its TTL.
	ExpiresAt time.Time
	// Jobs are the jobs it holds, as its last calls said (see Touch).
	Jobs []JobRef
}

// Registration is what [Registry.Register] records.
type Registration struct {
	Info
	// Jobs, when not nil, replace the jobs the worker holds (at most
	// MaxHeldJobs). Nil keeps them.
	Jobs []JobRef
	// TTL is how long the worker stays registered unless refreshed
	// (MinTTL to MaxTTL). Zero keeps the worker's TTL, the registry's
	// Config.TTL for a new one.
	TTL time.Duration
}

// Register registers a worker, or refreshes it: its Info replaces what
// was registered, its last sighting is now (Redis's clock), and its start
// time is kept while it is live. It answers the worker as recorded.
func (r *Registry) Register(ctx context.Context, reg Registration) (Worker, error) {
	info, err := CheckInfo(reg.Info)
	if err != nil {
		return Worker{}, err
	}
	ttl, err := r.ttlOf(reg.TTL)
	if err != nil {
		return Worker{}, err
	}
	mode := "keep"
	if reg.Jobs != nil {
		mode = "set"
		if reg.Jobs, err = checkJobs("jobs", reg.Jobs); err != nil {
			return Worker{}, err
		}
	}
	data, err := json.Marshal(infoJSON{Host: info.Host, Labels: info.Labels, Queues: info.Queues, Version: info.Version})
	if err != nil {
		return Worker{}, fmt.Errorf("registry: %w", err)
	}
	now, started, ttl, err := r.touch(ctx, info.ID, ttl, string(data), false, "", mode, reg.Jobs)
	if err != nil {
		return Worker{}, err
	}
	w := Worker{Info: info, StartedAt: started, LastSeenAt: now, ExpiresAt: now.Add(ttl), Jobs: reg.Jobs}
	if reg.Jobs == nil {
		return r.get(ctx, w)
	}
	return w, nil
}

// Touch is a sighting of worker id by one of its calls: it refreshes the
// worker (registering it with nothing but its id when it is not live),
// notes Queue among the queues it claimed from, and adds Add to and drops
// Drop from the jobs it holds (Drop after Add).
type Touch struct {
	// Queue, when set, is a queue the worker claimed from.
	Queue string
	// Labels, when set, are the labels its claim declared: recorded for a
	// worker that has no registration of its own (Register's, a PUT's,
	// wins and is kept).
	Labels []string
	// Add are jobs it now holds (it claimed them, or heartbeats them).
	Add []JobRef
	// Drop are jobs it no longer holds (it completed or failed them).
	Drop []JobRef
	// TTL is how long the worker stays registered unless refreshed
	// (MinTTL to MaxTTL). Zero keeps the worker's TTL, the registry's
	// Config.TTL for a new one.
	TTL time.Duration
}

// Check answers what [Registry.Touch] would refuse in t, whoever the
// worker: a queue name, labels, jobs or a TTL not valid (a
// *queue.FieldError naming it); nil when nothing.
func (t Touch) Check() error {
	if t.Queue != "" {
		if err := names.ValidateQueue(t.Queue); err != nil {
			return fieldErr("queue", err)
		}
	}
	if len(t.Labels) > 0 {
		if _, err := CheckLabels("labels", t.Labels); err != nil {
			return err
		}
	}
	for _, jobs := range [][]JobRef{t.Add, t.Drop} {
		if _, err := checkJobs("jobs", jobs); err != nil {
			return err
		}
	}
	if t.TTL != 0 {
		return checkTTL("ttl", t.TTL)
	}
	return nil
}

// Touch records a sighting of worker id (see [Touch]).
func (r *Registry) Touch(ctx context.Context, id string, t Touch) error {
	_, err := r.TouchTTL(ctx, id, t)
	return err
}

// TouchTTL is Touch, and answers the worker's TTL after it: the API's
// sightings of an HTTP worker use it to tell how long their record of it
// stays fresh.
func (r *Registry) TouchTTL(ctx context.Context, id string, t Touch) (time.Duration, error) {
	if err := ValidateID(id); err != nil {
		return 0, err
	}
	if err := t.Check(); err != nil {
		return 0, err
	}
	ttl, err := r.ttlOf(t.TTL)
	if err != nil {
		return 0, err
	}
	if len(t.Add) > 0 && len(t.Drop) > 0 {
		// One script call does one of them: add first, then drop.
		if _, err := r.TouchTTL(ctx, id, Touch{Queue: t.Queue, Labels: t.Labels, Add: t.Add, TTL: ttl}); err != nil {
			return 0, err
		}
		return r.TouchTTL(ctx, id, Touch{Drop: t.Drop, TTL: ttl})
	}
	mode, jobs := "keep", t.Add
	switch {
	case len(t.Add) > 0:
		mode = "add"
	case len(t.Drop) > 0:
		mode, jobs = "del", t.Drop
	}
	if jobs, err = checkJobs("jobs", jobs); err != nil {
		return 0, err
	}
	info := ""
	if len(t.Labels) > 0 {
		labels, err := CheckLabels("labels", t.Labels)
		if err != nil {
			return 0, err
		}
		data, err := json.Marshal(infoJSON{Labels: labels})
		if err != nil {
			return 0, fmt.Errorf("registry: %w", err)
		}
		info = string(data)
	}
	_, _, ttl, err = r.touch(ctx, id, ttl, info, true, t.Queue, mode, jobs)
	return ttl, err
}

// Deregister removes worker id. It answers whether it was live.
func (r *Registry) Deregister(ctx context.Context, id string) (bool, error) {
	if err := ValidateID(id); err != nil {
		return false, err
	}
	res, err := store.CallGlobal(ctx, r.eng, store.RegistryRemove, r.k.all(), &store.RegistryRemoveArgs{OffsetUs: r.offsetArg(), ID: id})
	if err != nil {
		return false, redisErr("deregister", err)
	}
	return res.Code == 1, nil
}

// ListOptions select a page of [Registry.List].
type ListOptions struct {
	// Cursor is the Next of the page before; empty for the first page.
	Cursor string
	// Limit caps the workers in the page, 1 to MaxListLimit. Defaults to
	// DefaultListLimit.
	Limit int
}

// Page is a page of live workers, by id (byte order).
type Page struct {
	Workers []Worker
	// Next is the cursor of the next page; empty when this is the last.
	// A page may hold fewer than its limit and still have a next one.
	Next string
	// Live is how many workers are live now.
	Live int
}

// List answers a page of the live workers, sorted by id.
func (r *Registry) List(ctx context.Context, o ListOptions) (Page, error) {
	o.Limit = cmp.Or(o.Limit, DefaultListLimit)
	if o.Limit < 1 || o.Limit > MaxListLimit {
		return Page{}, fieldErr("limit", fmt.Errorf("%w: must be in [1, %d], got %d", queue.ErrInvalid, MaxListLimit, o.Limit))
	}
	if o.Cursor != "" {
		if err := ValidateID(o.Cursor); err != nil {
			return Page{}, fieldErr("cursor", err)
		}
	}
	from := "-"
	if o.Cursor != "" {
		from = "(" + o.Cursor
	}
	return r.list(ctx, from, o.Limit)
}

// Live counts the live workers.
func (r *Registry) Live(ctx context.Context) (int, error) {
	p, err := r.list(ctx, "-", 0)
	return p.Live, err
}

// list runs registry_list.lua from from (see it).
func (r *Registry) list(ctx context.Context, from string, limit int) (Page, error) {
	res, err := store.CallGlobal(ctx, r.eng, store.RegistryList, r.k.all(),
		&store.RegistryListArgs{OffsetUs: r.offsetArg(), From: from, Limit: limit, Sweep: sweepBatch})
	if err != nil {
		return Page{}, redisErr("list", err)
	}
	if len(res.Workers)%6 != 0 {
		return Page{}, fmt.Errorf("registry: list: %w", &store.ReplyError{Script: "registry_list", Field: "workers", Reply: res.Workers, Want: "six values a worker"})
	}
	p := Page{Next: res.Next, Live: int(res.Live), Workers: make([]Worker, 0, len(res.Workers)/6)}
	for i := 0; i < len(res.Workers); i += 6 {
		w, ok := decode(res.Workers[i : i+6])
		if ok {
			p.Workers = append(p.Workers, w)
		}
	}
	return p, nil
}

// ErrNotFound is wrapped by the error of Get for a worker that is not
// live; it wraps queue.ErrNotFound.
var ErrNotFound = fmt.Errorf("registry: no such live worker: %w", queue.ErrNotFound)

// Get answers live worker id, or an error wrapping ErrNotFound.
func (r *Registry) Get(ctx context.Context, id string) (Worker, error) {
	if err := ValidateID(id); err != nil {
		return Worker{}, err
	}
	p, err := r.list(ctx, "["+id, 1)
	if err != nil {
		return Worker{}, err
	}
	if len(p.Workers) == 1 && p.Workers[0].ID == id {
		return p.Workers[0], nil
	}
	return Worker{}, fmt.Errorf("%w: %q", ErrNotFound, id)
}

// get reads back the worker w names, filling what the registry holds of
// it (its held jobs), or answers w as it is when it is gone meanwhile.
func (r *Registry) get(ctx context.Context, w Worker) (Worker, error) {
	got, err := r.Get(ctx, w.ID)
	if errors.Is(err, ErrNotFound) {
		return w, nil
	}
	return got, err
}

// infoJSON is a registration as stored.
type infoJSON struct {
	Host    string   `json:"host"`
	Labels  []string `json:"labels"`
	Queues  []string `json:"queues"`
	Version string   `json:"version"`
}

// decode reads one worker of registry_list.lua's reply: id, info, state, queues,
// held, expiry.
func decode(v []any) (Worker, bool) {
	id, _ := v[0].(string)
	info, _ := v[1].(string)
	state, _ := v[2].(string)
	claimed, _ := v[3].(string)
	held, _ := v[4].(string)
	exp, _ := v[5].(string)
	w := Worker{Info: Info{ID: id, Labels: []string{}, Queues: []string{}}, Jobs: []JobRef{}}
	if info != "" {
		var ij infoJSON
		if json.Unmarshal([]byte(info), &ij) == nil {
			w.Host, w.Version = ij.Host, ij.Version
			w.Labels = append(w.Labels, ij.Labels...)
			w.Queues = append(w.Queues, ij.Queues...)
		}
	}
	for q := range strings.FieldsSeq(claimed) {
		if !contains(w.Queues, q) && len(w.Queues) < MaxQueues {
			w.Queues = append(w.Queues, q)
		}
	}
	for j := range strings.FieldsSeq(held) {
		if q, id, ok := strings.Cut(j, "/"); ok {
			w.Jobs = append(w.Jobs, JobRef{Queue: q, ID: id})
		}
	}
	f := strings.Fields(state)
	if len(f) < 2 {
		return Worker{}, false
	}
	s, err1 := strconv.ParseInt(f[0], 10, 64)
	l, err2 := strconv.ParseInt(f[1], 10, 64)
	e, err3 := strconv.ParseFloat(exp, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Worker{}, false
	}
	w.StartedAt, w.LastSeenAt, w.ExpiresAt = time.UnixMilli(s).UTC(), time.UnixMilli(l).UTC(), time.UnixMilli(int64(e)).UTC()
	return w, true
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// touch runs registry_touch.lua; it answers the script's now, the worker's
// start (Redis's clock) and its TTL.
func (r *Registry) touch(ctx context.Context, id string, ttl time.Duration, info string, infoNX bool, q, mode string, jobs []JobRef) (now, started time.Time, _ time.Duration, err error) {
	p := store.RegistryTouchArgs{OffsetUs: r.offsetArg(), ID: id, TTLMs: ttl.Milliseconds(), DefaultTTLMs: r.cfg.TTL.Milliseconds(),
		MaxWorkers: r.cfg.MaxWorkers, Sweep: sweepBatch, Info: info, Queue: q, MaxQueues: MaxQueues, Mode: mode, MaxHeld: MaxHeldJobs,
		InfoNX: infoNX, Jobs: make([]store.HeldItem, 0, len(jobs))}
	for _, j := range jobs {
		p.Jobs = append(p.Jobs, store.HeldItem{Job: j.String()})
	}
	res, err := store.CallGlobal(ctx, r.eng, store.RegistryTouch, r.k.all(), &p)
	if err != nil {
		return now, started, 0, redisErr("register "+id, err)
	}
	if res.Code != 1 {
		return now, started, 0, fmt.Errorf("%w: %d are live, the cap is %d (Config.MaxWorkers)", ErrTooManyWorkers, res.Now, r.cfg.MaxWorkers)
	}
	return time.UnixMilli(res.Now).UTC(), time.UnixMilli(res.Started).UTC(), time.Duration(res.TTLMs) * time.Millisecond, nil
}

// offsetArg is what a script adds to Redis's TIME, in µs: 0, except
// when Redis's clock follows a test's fake clock (queue.Config.FollowClock),
// read in store.Exact mode as in package cron: Redis's clock then reads
// as the fake clock, and a test expires workers by advancing it.
func (r *Registry) offsetArg() int64 { return r.eng.Clock().OffsetUs(store.Exact) }

// ttlOf checks a TTL given (0: the worker's own).
func (r *Registry) ttlOf(ttl time.Duration) (time.Duration, error) {
	if ttl == 0 {
		return 0, nil
	}
	return ttl, checkTTL("ttl", ttl)
}

// stay as they are).
func redisErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("registry: %s: %w: %w", op, queue.ErrUnavailable, err)
}
