package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
)

// Event webhooks: subscriptions that send job events to an HTTP endpoint,
// signed as push requests are (Standard Webhooks, up to two secrets),
// through the dispatcher's HTTP client and so its SSRF guard.
//
// The path of an event, each step durable before the next:
//
//  1. While a subscription may want a queue's events, the queue's
//     setting "hooks" is set (Hooks.Sync). The scripts that complete,
//     kill, cancel or retry a job then write its event to the queue's
//     hooks outbox in the same script as the change (common.lua's hook):
//     an event exists exactly when its change does.
//  2. A dispatcher's pass reads each outbox and fans each entry out to the
//     subscriptions whose filters take it (hook_fanout.lua, in the hooks'
//     slot): each subscription keeps a cursor per queue, so an entry is
//     added to a subscription once however many dispatchers read it; only
//     then is the entry deleted from the outbox (hookack.lua).
//  3. The pass then takes, per subscription, each job's oldest pending
//     delivery whose attempt is due (hook_claim.lua: a job's deliveries
//     go one at a time, in order, while other jobs' go at once), leases
//     it, sends it and records the outcome (hook_ack.lua): delivered, a
//     retry after a backoff, or dead after HookMaxAttempts, into the
//     subscription's dead list, from which it can be sent again
//     (Hooks.Redrive).
//
// A receiver that is down keeps its deliveries pending, retried with
// backoff (1 s doubling to 10 min, about 27 min in all before one is
// dead); nothing is lost while it is away for less. A delivery is sent at
// least once: a dispatcher that dies after a receiver answered but before
// its ack leaves the delivery to be sent again when its lease lapses.

// The event types.
const (
	EventJobCompleted = "job.completed"
	EventJobDead      = "job.dead"
	EventJobCanceled  = "job.canceled"
	EventJobRetried   = "job.retried"
	// EventCronFired is a cron entry's tick: its job was enqueued (the
	// event's job; data.cron names the entry). A trigger of an entry by
	// hand is not a tick and sends none.
	EventCronFired = "cron.fired"
	// EventWorkflowEnded is a workflow's end: its last node's job ended
	// (data.workflow says which workflow, its status and when). It goes
	// through the outbox of the queue of the job whose end, recorded
	// last, ended the workflow, and data's queue, id, kind, status and
	// attempts are that job's: the queue and kind filters apply to it,
	// and it is sent after that job's own event. A workflow that is
	// retried and ends again sends it again; an implicit workflow (a job
	// enqueued after others, workflow.Client.EnqueueAfter) sends it too.
	EventWorkflowEnded = "workflow.ended"
)

// EventTypes are the event types a subscription can ask for.
var EventTypes = []string{EventJobCompleted, EventJobDead, EventJobCanceled, EventJobRetried, EventCronFired, EventWorkflowEnded}

// The statuses of a workflow.ended event (package workflow's Status).
const (
	WorkflowCompleted = "completed" // every node completed
	WorkflowFailed    = "failed"    // every node ended, some dead or canceled
	WorkflowCanceled  = "canceled"  // canceled as a whole
)

// Caps and timing of event webhooks.
const (
	// MaxSubscriptions is how many subscriptions a namespace holds.
	MaxSubscriptions = 100
	// MaxSubscriptionFilters is how many queues, and how many kinds, a
	// subscription names.
	MaxSubscriptionFilters = 100
	// MaxHookPending is how many deliveries a subscription holds pending;
	// events past it are dropped (a receiver away for long enough, under
	// load) and counted in the dispatcher's log.
	MaxHookPending = 100_000
	// MaxHookDead is how many dead deliveries a subscription keeps, the
	// newest.
	MaxHookDead = 1000
	// HookMaxAttempts is how many times a delivery is sent before it is
	// dead.
	HookMaxAttempts = 12
	// HookBackoffInitial and HookBackoffMax bound the wait before the next
	// attempt: HookBackoffInitial doubling with each attempt, at most
	// HookBackoffMax (a receiver's Retry-After, at most MaxRetryAfter, is
	// taken instead when it sends one with a 429 or 503).
	HookBackoffInitial = time.Second
	HookBackoffMax     = 10 * time.Minute
	// DefaultHookTimeout and MaxHookTimeout are a subscription's request
	// timeout's default and cap.
	DefaultHookTimeout = 10 * time.Second
	MaxHookTimeout     = 30 * time.Second
	// DefaultHookInterval is how often a dispatcher reads the outboxes and
	// sends what is due.
	DefaultHookInterval = 200 * time.Millisecond

	hookRead  = 500  // outbox entries read per queue a pass
	hookScan  = 1000 // pending deliveries of a subscription looked at a pass
	hookClaim = 32   // deliveries of a subscription sent at once
	// hookLeaseExtra is added to a request's timeout for its lease: the
	// delivery is another dispatcher's to send once the lease lapses.
	hookLeaseExtra = 10 * time.Second
)

// Errors of event webhooks.
var (
	ErrNoSubscription     = errors.New("dispatch: no such subscription")
	ErrTooManySubscribers = errors.New("dispatch: too many subscriptions")
)

// Subscription is an event webhook subscription: the events it takes and
// where they go.
type Subscription struct {
	// ID is chosen by Create.
	ID string
	// URL receives the events (POST, JSON); checked by the Guard.
	URL string
	// Headers are sent with every request, as a push Target's.
	Headers map[string]string
	// Timeout is a request's, 1 s to MaxHookTimeout. Defaults to
	// DefaultHookTimeout.
	Timeout time.Duration
	// Queues, Kinds and Events filter the events: an event is sent when
	// each that is not empty names its queue, its job's kind and its
	// type (EventTypes). Empty: every one.
	Queues, Kinds, Events []string
	// Secrets sign the requests, one or two (see Sign). Create generates
	// one when none is given; Update keeps the subscription's when none
	// is given.
	Secrets []string
	// CreatedAt is when it was created.
	CreatedAt time.Time
}

// HookEvent is a delivery's body.
type HookEvent struct {
	Type      string        `json:"type"`
	Timestamp time.Time     `json:"timestamp"`
	Data      HookEventData `json:"data"`
}

// HookEventData is what a job event says of its job.
type HookEventData struct {
	Queue    string `json:"queue"`
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
	// Cron is the entry of a cron.fired event.
	Cron string `json:"cron,omitempty"`
	// Workflow is the workflow of a workflow.ended event.
	Workflow *HookWorkflow `json:"workflow,omitempty"`
}

// HookWorkflow is what a workflow.ended event says of its workflow.
type HookWorkflow struct {
	ID string `json:"id"`
	// Status is WorkflowCompleted, WorkflowFailed or WorkflowCanceled.
	Status  string    `json:"status"`
	EndedAt time.Time `json:"ended_at"`
}

// DeadDelivery is a delivery that was sent HookMaxAttempts times without
// a 2xx, or refused at once: by the guard, or by a 4xx answer other than
// 408, 425 and 429 (as a push request is).
type DeadDelivery struct {
	// ID names it for Redrive: "<queue>/<outbox entry id>", also the
	// requests' webhook-id.
	ID       string          `json:"id"`
	Event    json.RawMessage `json:"event"`
	Attempts int             `json:"attempts"`
	Error    string          `json:"error"`
	DiedAt   time.Time       `json:"died_at"`
}

// storedSub is a Subscription as the subs hash keeps it.
type storedSub struct {
	ID        string            `json:"id"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers,omitempty"`
	TimeoutMs int64             `json:"timeout_ms"`
	Queues    []string          `json:"queues,omitempty"`
	Kinds     []string          `json:"kinds,omitempty"`
	Events    []string          `json:"events,omitempty"`
	Secrets   []string          `json:"secrets"`
	CreatedMs int64             `json:"created_ms"`
}

func (s Subscription) encode() string {
	b, _ := json.Marshal(storedSub{ID: s.ID, URL: s.URL, Headers: s.Headers, TimeoutMs: s.Timeout.Milliseconds(),
		Queues: s.Queues, Kinds: s.Kinds, Events: s.Events, Secrets: s.Secrets, CreatedMs: s.CreatedAt.UnixMilli()})
	return string(b)
}

func decodeSub(v string) (Subscription, error) {
	var st storedSub
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return Subscription{}, fmt.Errorf("dispatch: stored subscription: %w", err)
	}
	return Subscription{ID: st.ID, URL: st.URL, Headers: st.Headers, Timeout: time.Duration(st.TimeoutMs) * time.Millisecond,
		Queues: st.Queues, Kinds: st.Kinds, Events: st.Events, Secrets: st.Secrets, CreatedAt: time.UnixMilli(st.CreatedMs).UTC()}, nil
}

// Validate checks s and fills its defaults (not the secrets: see Create
// and Update). g checks the URL.
func (s *Subscription) Validate(g Guard) error {
	t := Target{URL: s.URL, Method: "POST", Headers: s.Headers, Timeout: s.Timeout}
	if t.Timeout == 0 {
		t.Timeout = DefaultHookTimeout
	}
	if t.Timeout > MaxHookTimeout {
		return invalid("timeout", "must be in [%s, %s], got %s", MinTimeout, MaxHookTimeout, t.Timeout)
	}
	if err := t.Validate(g, "subscription"); err != nil {
		var fe *queue.FieldError
		if errors.As(err, &fe) {
			fe.Field = strings.TrimPrefix(fe.Field, "subscription.")
		}
		return err
	}
	s.Timeout = t.Timeout
	check := func(field string, list []string, valid func(string) error) ([]string, error) {
		if len(list) > MaxSubscriptionFilters {
			return nil, invalid(field, "at most %d, got %d", MaxSubscriptionFilters, len(list))
		}
		for i, v := range list {
			if err := valid(v); err != nil {
				return nil, invalid(fmt.Sprintf("%s[%d]", field, i), "%v", err)
			}
		}
		out := slices.Clone(list)
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	var err error
	if s.Queues, err = check("queues", s.Queues, names.ValidateQueue); err != nil {
		return err
	}
	if s.Kinds, err = check("kinds", s.Kinds, names.ValidateKind); err != nil {
		return err
	}
	if s.Events, err = check("events", s.Events, func(e string) error {
		if !slices.Contains(EventTypes, e) {
			return fmt.Errorf("must be one of %s, got %q", strings.Join(EventTypes, ", "), e)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(s.Secrets) > MaxSecrets {
		return invalid("secrets", "at most %d secrets (the current one and the next), got %d", MaxSecrets, len(s.Secrets))
	}
	for i, sec := range s.Secrets {
		if _, err := secretKey(sec); err != nil {
			return invalid(fmt.Sprintf("secrets[%d]", i), "%v", err)
		}
	}
	return nil
}

// wantsQueue reports whether s takes events of queue q.
func (s Subscription) wantsQueue(q string) bool {
	return len(s.Queues) == 0 || slices.Contains(s.Queues, q)
}

// wants reports whether s takes the event.
func (s Subscription) wants(q string, e HookEvent) bool {
	return s.wantsQueue(q) && (len(s.Kinds) == 0 || slices.Contains(s.Kinds, e.Data.Kind)) &&
		(len(s.Events) == 0 || slices.Contains(s.Events, e.Type))
}

// Hooks keeps the event webhook subscriptions and their deliveries, in a
// slot of the namespace's own.
type Hooks struct {
	client *queue.Client
	eng    *store.Store
	rdb    redis.UniversalClient
	ns     string
	guard  Guard
}

// NewHooks is the subscriptions of client's namespace, whose URLs g
// checks.
func NewHooks(client *queue.Client, g Guard) *Hooks {
	return &Hooks{client: client, eng: plumbing.Of(client).Engine(), rdb: plumbing.Of(client).Redis(), ns: plumbing.Of(client).Namespace(), guard: g}
}

func (h *Hooks) keys(id string) store.HookKeys { return store.HookKeysOf(h.ns, id) }

func newSubID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// validID reports whether id can be a subscription's (16 hex digits).
func validID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// Create validates s and stores it as a new subscription, answering it
// as stored (its ID and secrets filled). ErrTooManySubscribers at
// MaxSubscriptions.
func (h *Hooks) Create(ctx context.Context, s Subscription) (Subscription, error) {
	if err := s.Validate(h.guard); err != nil {
		return Subscription{}, err
	}
	if len(s.Secrets) == 0 {
		s.Secrets = []string{NewSecret()}
	}
	s.ID, s.CreatedAt = newSubID(), plumbing.Of(h.client).Clock().Now().UTC().Truncate(time.Millisecond)
	if err := h.put(ctx, s, "create"); err != nil {
		return Subscription{}, err
	}
	if err := h.Sync(ctx); err != nil {
		// The queues it names could not be set (queue.ErrTooManyQueues,
		// Redis away): no subscription, rather than one that sends nothing.
		_ = h.rdb.HDel(context.WithoutCancel(ctx), h.keys(s.ID).Subs, s.ID).Err()
		return Subscription{}, err
	}
	return s, nil
}

// Update replaces subscription id with s (its ID and creation kept;
// secrets left out keep the subscription's).
func (h *Hooks) Update(ctx context.Context, id string, s Subscription) (Subscription, error) {
	old, err := h.Get(ctx, id)
	if err != nil {
		return Subscription{}, err
	}
	if err := s.Validate(h.guard); err != nil {
		return Subscription{}, err
	}
	if len(s.Secrets) == 0 {
		s.Secrets = old.Secrets
	}
	s.ID, s.CreatedAt = id, old.CreatedAt
	if err := h.put(ctx, s, "update"); err != nil {
		return Subscription{}, err
	}
	if err := h.Sync(ctx); err != nil {
		// As Create: the subscription as it was, rather than one that
		// sends nothing.
		_ = h.put(context.WithoutCancel(ctx), old, "update")
		return Subscription{}, err
	}
	return s, nil
}

func (h *Hooks) put(ctx context.Context, s Subscription, mode string) error {
	r, err := store.CallGlobal(ctx, h.eng, store.HookPut, h.keys(s.ID).List(),
		&store.HookPutArgs{ID: s.ID, Value: s.encode(), Mode: mode, Max: MaxSubscriptions})
	if err != nil {
		return fmt.Errorf("dispatch: storing a subscription: %w", err)
	}
	switch r.Code {
	case 1:
		return nil
	case -1:
		return fmt.Errorf("%w: a namespace holds at most %d", ErrTooManySubscribers, MaxSubscriptions)
	}
	if mode == "update" {
		return fmt.Errorf("%w: %s", ErrNoSubscription, s.ID)
	}
	return errors.New("dispatch: a new subscription's id was taken; try again")
}

// Get reads subscription id; ErrNoSubscription when there is none.
func (h *Hooks) Get(ctx context.Context, id string) (Subscription, error) {
	if !validID(id) {
		return Subscription{}, fmt.Errorf("%w: %q", ErrNoSubscription, id)
	}
	v, err := h.rdb.HGet(ctx, h.keys("").Subs, id).Result()
	if errors.Is(err, redis.Nil) {
		return Subscription{}, fmt.Errorf("%w: %s", ErrNoSubscription, id)
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("dispatch: reading a subscription: %w", store.WrapRedis(err))
	}
	return decodeSub(v)
}

// List reads every subscription, oldest first.
func (h *Hooks) List(ctx context.Context) ([]Subscription, error) {
	all, err := h.rdb.HGetAll(ctx, h.keys("").Subs).Result()
	if err != nil {
		return nil, fmt.Errorf("dispatch: reading the subscriptions: %w", store.WrapRedis(err))
	}
	out := make([]Subscription, 0, len(all))
	for _, v := range all {
		s, err := decodeSub(v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Subscription) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Delete removes subscription id with its pending and dead deliveries.
func (h *Hooks) Delete(ctx context.Context, id string) error {
	if _, err := h.Get(ctx, id); err != nil {
		return err
	}
	k := h.keys(id)
	// The subscription first: every hook script checks it exists before
	// it writes, so none writes its keys after the UNLINK.
	if err := h.rdb.HDel(ctx, k.Subs, id).Err(); err != nil {
		return fmt.Errorf("dispatch: deleting a subscription: %w", store.WrapRedis(err))
	}
	if err := h.rdb.Unlink(ctx, k.Own()...).Err(); err != nil {
		return fmt.Errorf("dispatch: deleting a subscription's deliveries: %w", store.WrapRedis(err))
	}
	return h.Sync(ctx)
}

// Backlog is how many deliveries of subscription id are pending and dead.
func (h *Hooks) Backlog(ctx context.Context, id string) (pending, dead int64, err error) {
	if _, err := h.Get(ctx, id); err != nil {
		return 0, 0, err
	}
	p, d, err := h.Backlogs(ctx, []string{id})
	if err != nil {
		return 0, 0, err
	}
	return p[0], d[0], nil
}

// Backlogs is Backlog for subscriptions the caller has read (List, Get,
// Create): how many deliveries each of ids has pending and dead, in one
// round trip (a subscription deleted meanwhile has none).
func (h *Hooks) Backlogs(ctx context.Context, ids []string) (pending, dead []int64, err error) {
	pipe := h.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, 0, 2*len(ids))
	for _, id := range ids {
		k := h.keys(id)
		cmds = append(cmds, pipe.ZCard(ctx, k.Pend), pipe.ZCard(ctx, k.Dead))
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, fmt.Errorf("dispatch: reading the subscriptions' backlogs: %w", store.WrapRedis(err))
		}
	}
	pending, dead = make([]int64, len(ids)), make([]int64, len(ids))
	for i := range ids {
		pending[i], dead[i] = cmds[2*i].Val(), cmds[2*i+1].Val()
	}
	return pending, dead, nil
}

// Dead reads up to limit dead deliveries of subscription id, the newest
// first (limit at most MaxHookDead).
func (h *Hooks) Dead(ctx context.Context, id string, limit int) ([]DeadDelivery, error) {
	if _, err := h.Get(ctx, id); err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), MaxHookDead)
	k := h.keys(id)
	keys, err := h.rdb.ZRevRange(ctx, k.Dead, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("dispatch: reading dead deliveries: %w", store.WrapRedis(err))
	}
	if len(keys) == 0 {
		return []DeadDelivery{}, nil
	}
	vals, err := h.rdb.HMGet(ctx, k.DeadEv, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("dispatch: reading dead deliveries: %w", store.WrapRedis(err))
	}
	out := make([]DeadDelivery, 0, len(keys))
	for _, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // redriven between the two reads
		}
		var dd DeadDelivery
		if err := json.Unmarshal([]byte(s), &dd); err != nil {
			return nil, fmt.Errorf("dispatch: a stored dead delivery: %w", err)
		}
		out = append(out, dd)
	}
	return out, nil
}

// Redrive makes dead deliveries of subscription id pending again (the
// given ids, or every one when ids is empty), each with its attempts from
// zero, after the deliveries pending now. It answers how many it moved.
func (h *Hooks) Redrive(ctx context.Context, id string, ids []string) (int, error) {
	all, err := h.Dead(ctx, id, MaxHookDead)
	if err != nil {
		return 0, err
	}
	p := store.HookRedriveArgs{ID: id}
	for i := len(all) - 1; i >= 0; i-- { // oldest first: they are sent in that order
		dd := all[i]
		if len(ids) > 0 && !slices.Contains(ids, dd.ID) {
			continue
		}
		var ev HookEvent
		if err := json.Unmarshal(dd.Event, &ev); err != nil {
			return 0, fmt.Errorf("dispatch: a stored dead delivery: %w", err)
		}
		p.Entries = append(p.Entries, store.HookRedriveItem{Key: eventKey(dd.ID), Job: ev.Data.Queue + "|" + ev.Data.ID, Body: string(dd.Event)})
	}
	if len(p.Entries) == 0 {
		return 0, nil
	}
	r, err := store.CallGlobal(ctx, h.eng, store.HookRedrive, h.keys(id).List(), &p)
	if err != nil {
		return 0, fmt.Errorf("dispatch: redriving: %w", err)
	}
	if r.Code < 0 {
		return 0, fmt.Errorf("%w: %s", ErrNoSubscription, id)
	}
	return int(r.Code), nil
}

// eventKey is a delivery's key in the hooks' slot, "<queue>|<outbox id>",
// of its public id "<queue>/<outbox id>"; deliveryID is the other way.
func eventKey(deliveryID string) string { return strings.Replace(deliveryID, "/", "|", 1) }
func deliveryID(key string) string      { return strings.Replace(key, "|", "/", 1) }

// Sync sets the setting "hooks" (store.SettingHooks) of each queue some
// subscription may want events of, and clears it elsewhere: a queue named
// by a subscription gets it (and is created), and every known queue when
// a subscription names none; while one does, a queue created later starts
// with it (store.HooksAllKey).
func (h *Hooks) Sync(ctx context.Context) error {
	_, err := h.sync(ctx)
	return err
}

func (h *Hooks) sync(ctx context.Context) ([]string, error) {
	subs, err := h.List(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	everyQueue := slices.ContainsFunc(subs, func(s Subscription) bool { return len(s.Queues) == 0 })
	// Set before the queues are listed: a queue registered after the
	// list reads it (queue.Client's register) and starts with the setting.
	if everyQueue {
		err = h.rdb.Set(ctx, store.HooksAllKey(h.ns), "1", 0).Err()
	} else {
		err = h.rdb.Del(ctx, store.HooksAllKey(h.ns)).Err()
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", store.WrapRedis(err))
	}
	qs, err := h.client.Queues(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		if len(s.Queues) == 0 {
			for _, q := range qs {
				want[q] = true
			}
		}
		for _, q := range s.Queues {
			want[q] = true
		}
	}
	cur, err := plumbing.Of(h.client).SettingsOf(ctx, store.SettingHooks, qs)
	if err != nil {
		return nil, err
	}
	var on []string
	for q := range want {
		on = append(on, q)
		if cur[q] != "1" {
			if err := plumbing.Of(h.client).SetSettings(ctx, q, map[string]string{store.SettingHooks: "1"}); err != nil {
				return nil, err
			}
		}
	}
	for q, v := range cur {
		if v != "" && !want[q] {
			if err := plumbing.Of(h.client).SetSettings(ctx, q, map[string]string{store.SettingHooks: ""}); err != nil {
				return nil, err
			}
			on = append(on, q) // its outbox may still hold entries: read until empty
		}
	}
	slices.Sort(on)
	return on, nil
}

// outboxEntry is one entry of a queue's hooks outbox.
type outboxEntry struct {
	sid  string // its stream id
	job  string // "<queue>|<id>"
	ev   HookEvent
	body string
}

// readOutboxes reads up to hookRead entries of each queue's outbox.
func (h *Hooks) readOutboxes(ctx context.Context, queues []string) (map[string][]outboxEntry, error) {
	pipe := h.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.XRangeN(ctx, store.QueueKeys(h.ns, q).Hooks, "("+store.HookSentinelID, "+", hookRead)
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("dispatch: reading the hooks outboxes: %w", store.WrapRedis(err))
		}
	}
	out := map[string][]outboxEntry{}
	for i, q := range queues {
		for _, m := range cmds[i].Val() {
			e := outboxEntry{sid: m.ID}
			str := func(f string) string { s, _ := m.Values[f].(string); return s }
			attempts, _ := strconv.Atoi(str(store.HookAttempts))
			ms, _ := strconv.ParseInt(str(store.HookAt), 10, 64)
			typ := "job." + str(store.HookType)
			var wf *HookWorkflow
			switch str(store.HookType) {
			case "cron_fired":
				typ = EventCronFired
			case "wf_ended":
				typ = EventWorkflowEnded
				wf = &HookWorkflow{ID: str(store.HookWorkflow), Status: str(store.HookWFStatus), EndedAt: time.UnixMilli(ms).UTC()}
			}
			e.ev = HookEvent{Type: typ, Timestamp: time.UnixMilli(ms).UTC(),
				Data: HookEventData{Queue: q, ID: str(store.HookID), Kind: str(store.HookKind), Status: str(store.HookStatus),
					Attempts: attempts, Error: str(store.HookError), Cron: str(store.HookCron), Workflow: wf}}
			e.job = q + "|" + e.ev.Data.ID
			b, _ := json.Marshal(e.ev)
			e.body = string(b)
			out[q] = append(out[q], e)
		}
	}
	return out, nil
}

// fanOut adds each queue's entries to the subscriptions that want them,
// then deletes them from the outbox. A queue whose fan-out failed keeps
// its entries for the next pass (the cursors skip those added already).
func (h *Hooks) fanOut(ctx context.Context, subs []Subscription, entries map[string][]outboxEntry) (dropped int64, err error) {
	var errs []error
	for q, es := range entries {
		ok := true
		for _, s := range subs {
			if !s.wantsQueue(q) {
				continue
			}
			p := store.HookFanoutArgs{ID: s.ID, Queue: q, MaxPending: MaxHookPending}
			for _, e := range es {
				if s.wants(q, e.ev) {
					p.Entries = append(p.Entries, store.HookFanoutItem{SID: e.sid, Job: e.job, Body: e.body})
				}
			}
			if len(p.Entries) == 0 {
				continue
			}
			r, err := store.CallGlobal(ctx, h.eng, store.HookFanout, h.keys(s.ID).List(), &p)
			if err != nil {
				errs, ok = append(errs, fmt.Errorf("dispatch: fanning out %s's events: %w", q, err)), false
				break
			}
			dropped += r.Dropped
		}
		if !ok {
			continue
		}
		p := store.HookOutAckArgs{Entries: make([]store.HookOutAckItem, len(es))}
		for i, e := range es {
			p.Entries[i].SID = e.sid
		}
		op := store.HookOutAck
		if _, err := h.eng.Run(ctx, op.Script, op.Keys(store.QueueKeys(h.ns, q), nil), op.Argv(store.Common{}, &p)); err != nil {
			errs = append(errs, fmt.Errorf("dispatch: acking %s's hooks outbox: %w", q, err))
		}
	}
	return dropped, errors.Join(errs...)
}
