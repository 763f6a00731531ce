package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Redis layout: every key name, every field of a job's record and
// every script's KEYS and ARGV, in this one file. The Lua scripts read
// the same names: each script is sent with a prelude generated from this
// file (see prelude), so "argument 5 of claim.lua" is answered here and
// nowhere else.
//
// A queue is a fixed set of keys that all carry the queue's name as a hash
// tag, "<ns>:{<queue>}:<name>", so that they sit in one Redis Cluster slot.
// Once the queue exists every one of them exists (each holds a sentinel,
// see sentinel), and no script touches any key but these, all declared in
// KEYS. That is what keeps a slot migration harmless: Redis decides
// whether a script can run from its declared keys before it runs a line of
// it, so a script either runs whole on the node that holds all of them or
// is answered ASK, MOVED or TRYAGAIN without writing anything, and the
// client retries it (see Client.run). A key that could be absent would make
// Redis answer TRYAGAIN for the whole of a migration; a key built inside a
// script would fail mid-script, after earlier writes. Jobs are fields of
// the queue's hashes, not keys of their own, for the same reason: a claim
// cannot know, before it runs, which job keys it will touch.

// Key names within a queue.
const (
	KeyMeta    = "meta"    // HASH: created_ms, paused, the counters (stat*), stale, waker, waiting_until, sweep_hint (attention.go)
	KeyJobs    = "jobs"    // HASH: job id -> record (see the rec* fields), or a tombstone
	KeyData    = "data"    // HASH: job id -> payload; job id + ".r" -> result; job id + ".n" -> notes; ".a" artifacts, ".l.<seq>" log lines
	KeySched   = "sched"   // ZSET: due score (Unix ms, µs as decimals) -> id of a scheduled job
	KeyPending = "pending" // LIST: ids of pending jobs, oldest at the right, the sentinel rightmost
	KeyLeases  = "leases"  // ZSET: lease deadline ms -> id of a processing job
	KeyDead    = "dead"    // ZSET: died-at ms -> id, capped by count and age
	KeyDone    = "done"    // ZSET: completed-at ms -> id, the capped history of completions
	KeyIdem    = "idem"    // HASH: idempotency key -> "<job id>|<expires ms>", gone with its job
	KeyExpiry  = "expiry"  // ZSET: when -> the job id the sweep deletes then (retention, tombstones)
	KeyClaims  = "claims"  // HASH: claim token base -> ids it claimed, until the claim's first ack
	KeyWake    = "wake"    // STREAM: one entry each time jobs become pending while a claimer waits
	KeyLsets   = "lsets"   // HASH: label set id -> its labels, canonical (see labels.go); the sets' own keys below
	KeyOutbox  = "wfout"   // HASH: job id -> the outbox entry of a workflow node's job that ended, until a releaser acks it (see workflow.go)
	KeyHooks   = "hookout" // STREAM: the job events event webhooks send, while the queue's meta "hooks" is set, until a dispatcher fans them out (see HookSentinelID)
	// Flow keys (see FlowKeys below and "Flow keys" in common.lua):
	KeyFPend  = "fpend"  // ZSET, every score 0: "<flow key>\0<job id>" of each pending job that has a flow key, by key then id
	KeyFRun   = "frun"   // ZSET, every score 0: "<flow key>\0<job id>" of each processing job that has a flow key
	KeyFRing  = "fring"  // ZSET: flow key -> its turn; the keys a claim may take a job of now, the lowest turn first
	KeyFWait  = "fwait"  // ZSET: flow key -> ms; a key its rate holds until then, or an idle key whose bucket is full then
	KeyFlow   = "flow"   // HASH: "b:<flow key>" -> "<tokens>|<ms>" its token bucket; "d:<flow key>" -> "<job id>|<first ms>" its debounced job
	KeyFOver  = "fover"  // HASH: flow key -> "<max in flight>|<rate>|<burst>|<weight>", the key's own limits (FlowOverride)
	KeyFCount = "fcount" // ZSET: flow key -> its pending and processing jobs; a key with none is not in it
)

// The fields of the flow hash (KeyFlow): a prefix, then the flow key.
const (
	FlowBucketPrefix   = "b:" // "<tokens>|<ms>": the key's token bucket, counted at ms (Redis's clock)
	FlowDebouncePrefix = "d:" // "<job id>|<first ms>": the key's debounced job while it waits, and its first enqueue
)

// FlowKeys are the keys of a queue's flow control, in the order scripts
// declare them: every script that makes jobs pending, or ends a job's
// lease, is given all of them after its own (see declare).
var FlowKeys = []string{KeyFPend, KeyFRun, KeyFRing, KeyFWait, KeyFlow, KeyFOver, KeyFCount}

// Sentinel is the member, field or element that keeps each key of a queue
// in existence while it is otherwise empty. It is the byte 0x01, which no
// member can hold: job ids and claim tokens are validated, and
// idempotency keys refuse control characters (a printable sentinel such
// as "~" would be an idempotency key someone can send). In the sorted sets it has
// the score +inf, in the pending list it is the rightmost element, in the
// hashes it is a field with an empty value, and the wake stream always
// keeps its last entry.
const Sentinel = "\x01"

// WakeGroup is the consumer group of every queue's wake stream. Waiting
// claimers read the stream through it (XREADGROUP ... NOACK), so that each
// entry wakes one of them, not all: a job that becomes pending makes one
// claim, not one per waiting claimer. (A claimer that takes all it asked
// for while more are pending writes an entry for the next.)
const WakeGroup = "w"

// EnvelopeKind is the kind a push job is stored with (dispatch.Envelope):
// its payload is an envelope of its options and the kind it was given.
// The dead set's kind filter reads that kind (PUSH_KIND in the scripts).
const EnvelopeKind = "chronoq.push"

// Sentinels is how many members of each kind of key are the sentinel.
const Sentinels = 1

// Keys are the Redis keys of one queue. Build them with queueKeys only
// after the queue name was validated.
type Keys struct {
	Name                                                                             string // the queue's name (not a key)
	Meta, Jobs, Data, Sched, Pending, Leases, Dead, Done, Idem, Expiry, Claims, Wake string
	Outbox                                                                           string // workflows: see KeyOutbox
	Hooks                                                                            string // event webhooks: see KeyHooks
	Events                                                                           string // pub/sub channel of job events (sharded pub/sub in a cluster): a channel, not a key
	Lsets                                                                            string // the registry of label sets (KeyLsets)
	FPend, FRun, FRing, FWait, Flow, FOver, FCount                                   string // flow control (KeyFPend ...)
}

// QueueKeys answers the keys of queue in namespace ns; the queue name must
// have been validated.
func QueueKeys(ns, queue string) Keys {
	p := ns + ":{" + queue + "}:"
	return Keys{
		Name: queue, Meta: p + KeyMeta, Jobs: p + KeyJobs, Data: p + KeyData, Sched: p + KeySched,
		Pending: p + KeyPending, Leases: p + KeyLeases, Dead: p + KeyDead, Done: p + KeyDone,
		Idem: p + KeyIdem, Expiry: p + KeyExpiry, Claims: p + KeyClaims, Wake: p + KeyWake,
		Events: p + "events", Lsets: p + KeyLsets, Outbox: p + KeyOutbox,
		Hooks: p + KeyHooks,
		FPend: p + KeyFPend, FRun: p + KeyFRun, FRing: p + KeyFRing, FWait: p + KeyFWait,
		Flow: p + KeyFlow, FOver: p + KeyFOver, FCount: p + KeyFCount,
	}
}

// All lists every key of the queue, in layout order.
func (k Keys) All() []string {
	return []string{k.Meta, k.Jobs, k.Data, k.Sched, k.Pending, k.Leases, k.Dead, k.Done, k.Idem, k.Expiry, k.Claims, k.Wake, k.Lsets, k.Outbox, k.Hooks,
		k.FPend, k.FRun, k.FRing, k.FWait, k.Flow, k.FOver, k.FCount}
}

// ByName answers the key of the queue called name (one of the key*
// constants).
func (k Keys) ByName(name string) string {
	switch name {
	case KeyMeta:
		return k.Meta
	case KeyJobs:
		return k.Jobs
	case KeyData:
		return k.Data
	case KeySched:
		return k.Sched
	case KeyPending:
		return k.Pending
	case KeyLeases:
		return k.Leases
	case KeyDead:
		return k.Dead
	case KeyDone:
		return k.Done
	case KeyIdem:
		return k.Idem
	case KeyExpiry:
		return k.Expiry
	case KeyClaims:
		return k.Claims
	case KeyWake:
		return k.Wake
	case KeyLsets:
		return k.Lsets
	case KeyOutbox:
		return k.Outbox
	case KeyHooks:
		return k.Hooks
	case KeyFPend:
		return k.FPend
	case KeyFRun:
		return k.FRun
	case KeyFRing:
		return k.FRing
	case KeyFWait:
		return k.FWait
	case KeyFlow:
		return k.Flow
	case KeyFOver:
		return k.FOver
	case KeyFCount:
		return k.FCount
	}
	panic("store: no key " + name) // the script table names only the constants above
}

// ResultField is the field of a job's result in the data hash.
func ResultField(id string) string { return id + ".r" }

// Global keys, never touched inside a per-queue script.

// QueuesKey is the SET of known queue names.
func QueuesKey(ns string) string { return ns + ":queues" }

// NudgeChannel is the pub/sub channel of nudges: "<queue>|<due ms>|<instance>".
func NudgeChannel(ns string) string { return ns + ":nudge" }

// EventsPattern is the PSUBSCRIBE pattern of every queue's events (a
// single node only).
func EventsPattern(ns string) string { return ns + ":{*}:events" }

// AttnKeys are the attention indexes (see attention.go), in one slot of
// their own.
type AttnKeys struct {
	Due, DueSeq     string // ZSET queue -> the ms its earliest scheduled job is due; HASH queue -> seq of the last write
	Sweep, SweepSeq string // ZSET queue -> the ms its next sweep work falls due; HASH queue -> seq of the last write
}

// AttentionKeys answers the attention indexes of namespace ns.
func AttentionKeys(ns string) AttnKeys {
	p := ns + ":{" + ns + ":attn}:"
	return AttnKeys{Due: p + "due", DueSeq: p + "due_seq", Sweep: p + "sweep", SweepSeq: p + "sweep_seq"}
}

// NamespaceKeys lists the keys of namespace ns that belong to no queue:
// the set of queue names, the attention indexes, and the list and
// indexes of workflows (each workflow's own hash is "<ns>:{wf:<id>}:wf"),
// for tools that look at Redis directly (the chaos battery's snapshot).
// Every other key of ns is a queue's (QueueKeys, and a pending list and a
// wake stream per label set, named after the queue's own with
// ":<set id>" appended), cron's or the worker registry's.
func NamespaceKeys(ns string) []string {
	a, w := AttentionKeys(ns), WorkflowAttentionKeys(ns)
	return []string{QueuesKey(ns), a.Due, a.DueSeq, a.Sweep, a.SweepSeq, WorkflowsKey(ns), w.Outbox, w.OutboxSeq, w.Dirty}
}

// SweepHintFor is how long a queue's sweep hint holds (see
// queue/attention.go): a sweep mark no earlier than the hint is left out
// for this long after the hint was set.
const SweepHintFor = 10 * time.Second

// Meta hash fields.
const (
	MetaCreated      = "created_ms"
	MetaActive       = "active_ms"      // the last enqueue, to the minute: an empty queue idle since long is forgotten
	MetaPaused       = "paused"         // "1" while paused
	MetaStale        = "stale"          // ids in the pending list whose job is no longer pending
	MetaWaker        = "waker"          // the due score last handed to a claimer to wake at
	MetaWakerUntil   = "waker_until"    // ms until which that hand-out holds
	MetaWaitingUntil = "waiting_until"  // ms until which a claimer may be waiting on the wake stream
	MetaLimitRate    = "limit_rate"     // Limits.Rate, jobs a second (absent: none)
	MetaLimitBurst   = "limit_burst"    // Limits.Burst
	MetaLimitFlight  = "limit_inflight" // Limits.MaxInFlight (absent: none)
	MetaTBTokens     = "tb_tokens"      // the rate limit's token bucket: tokens left at tb_ms
	MetaTBAt         = "tb_ms"          // ms the bucket was last counted at (Redis's clock)
	MetaSweepHint    = "sweep_hint"     // "<ms>|<set at ms>": the time the last sweep mark put the queue's entry at (queue/attention.go)
	MetaHooks        = SettingHooks     // "1": the job events are written to the hooks outbox (KeyHooks)
	MetaHooksDropped = "hooks_dropped"  // events not written because the hooks outbox held HookOutboxMax
	MetaFlowFlight   = "flow_inflight"  // FlowLimits.MaxInFlight, a key's most jobs processing (absent: none)
	MetaFlowRate     = "flow_rate"      // FlowLimits.Rate, a key's jobs a second (absent: none)
	MetaFlowBurst    = "flow_burst"     // FlowLimits.Burst
	MetaFlowStrategy = "flow_strategy"  // FlowLimits.Strategy when not "queue": "cancel_newest" or "cancel_in_progress"
	MetaFlowTurn     = "flow_turn"      // the turn of the flow key a claim took a job of last (see KeyFRing)
	MetaFlowOn       = "flow_on"        // "1" once a job with a flow key was pending: claims look at the keys only then
)

// The meta hash's counters: jobs that went through each step, ever.
const (
	MetaEnqueued  = "enqueued"
	MetaPromoted  = "promoted"
	MetaCompleted = "completed"
	MetaFailed    = "failed"
	MetaRetried   = "retried"
	MetaReclaimed = "reclaimed"
	MetaDead      = "dead"
	MetaCanceled  = "canceled"
	MetaRequeued  = "requeued"
)

// metaFields are the meta hash's fields as the scripts name them: the
// prelude of a script defines M_<field> for each it uses (see
// metaPrelude), so that no script spells a meta field of its own.
var metaFields = []string{
	MetaCreated, MetaActive, MetaPaused, MetaStale, MetaWaker, MetaWakerUntil, MetaWaitingUntil,
	MetaLimitRate, MetaLimitBurst, MetaLimitFlight, MetaTBTokens, MetaTBAt, MetaSweepHint, MetaLsets,
	MetaHooks, MetaHooksDropped, MetaFlowFlight, MetaFlowRate, MetaFlowBurst, MetaFlowStrategy, MetaFlowTurn, MetaFlowOn,
	MetaEnqueued, MetaPromoted, MetaCompleted, MetaFailed, MetaRetried, MetaReclaimed, MetaDead, MetaCanceled, MetaRequeued,
}

// metaPrelude is the Lua that names the meta fields src (a script as
// sent, without its prelude) uses: "local M_paused = 'paused'". Only
// those: a script pays for each line before its body on every call.
func metaPrelude(src string) string {
	used := map[string]bool{}
	for _, w := range luaIdent.FindAllString(stripLuaCommentsAndStrings(src), -1) {
		used[w] = true
	}
	var b strings.Builder
	for _, f := range metaFields {
		if used["M_"+f] {
			fmt.Fprintf(&b, "local M_%s = %q\n", f, f)
		}
	}
	return b.String()
}

// Settings: a queue's own configuration, fields of its meta hash written by
// settings.lua (see plumbing.Push.SetSettings) and read from Go. Only these names
// can be set.
const (
	// SettingPush is the queue's push target, JSON written and read by
	// package dispatch.
	SettingPush = "push"
	// SettingHooks is "1" while an event webhook subscription may want
	// the queue's job events (package dispatch sets and clears it): the
	// scripts that end or retry a job then write its event to the queue's
	// hooks outbox (KeyHooks), in the same script, so atomically with the
	// change.
	SettingHooks = "hooks"
)

// SettingFields are the meta fields SetSettings may write.
var SettingFields = []string{SettingPush, SettingHooks}

// The hooks outbox (KeyHooks): a stream whose first entry, id 0-1, is
// its sentinel (field HookSentinelID), and whose other entries are one
// job event each, the fields below. The dispatcher reads it from after
// the sentinel, fans each entry out to the subscriptions that want it and
// deletes it (XDEL, which never deletes the key).
const (
	HookSentinelID = "0-1"
	HookType       = "t" // "completed", "dead", "canceled", "retried", "cron_fired" (a cron tick's job was enqueued) or "wf_ended" (a workflow ended with this job's end)
	HookID         = "i" // the job's id
	HookKind       = "k" // the job's kind
	HookStatus     = "s" // the job's status after the change
	HookAttempts   = "a" // the job's attempts after the change
	HookAt         = "m" // Unix ms of the change, Redis's clock
	HookError      = "e" // the last error ("" for a completion)
	HookCron       = "c" // cron_fired: the cron entry's name
	HookWorkflow   = "w" // wf_ended: the workflow's id (HookAt is when it ended, HookStatus the job's outcome)
	HookWFStatus   = "x" // wf_ended: the workflow's status, "completed", "failed" or "canceled"
	// HookOutboxMax caps a queue's hooks outbox: an event past it is not
	// written, and counted in the meta field MetaHooksDropped. It is what
	// a queue can end while no dispatcher runs.
	HookOutboxMax = 100_000
	// CronIdemPrefix starts the idempotency key of a cron tick's job
	// ("cron:<entry>:<tick ms>", package cron): enqueue.lua writes a
	// cron_fired event for a job it adds with such a key.
	CronIdemPrefix = "cron:"
)

// NoteField is the field of a job's attempt notes in the data hash.
func NoteField(id string) string { return id + ".n" }

// ArtifactsField is the field of a job's artifacts in the data hash: one
// JSON object, artifact name -> value (see artifacts.go).
func ArtifactsField(id string) string { return id + ".a" }

// LogLineField is the field of line seq (from 1) of a job's log in the
// data hash: "<at ms>|<line>" (see logs.go). The record's "log" field
// counts them.
func LogLineField(id string, seq int64) string { return id + ".l." + strconv.FormatInt(seq, 10) }

// RecFields are a job's record: its fields joined by NUL bytes, in this order. No value
// can hold a NUL: kinds and ids are validated, errors are scrubbed,
// idempotency keys refuse control characters, and results (JSON) live in
// the data hash. A tombstone, left for a short while where a job was
// deleted soon after it was enqueued or completed, is "-" and the last
// token that acked it.
//
// How a record is stored (see save and load in common.lua, and
// jobFromRecord): trailing empty fields are left out (a reader pads a
// short record with empty fields); a payload of at most inlinePayloadMax
// bytes is kept in front of the fields, after the byte recInline and
// before a NUL ("\x02{"n":1}\x00s\x00..."), and a larger one in
// the data hash (field: the job's id). A
// record with no recInline byte in front has its payload in the data hash.
// Common values have short forms, spelled out again by every reader: the
// status is a one-byte code (statusCodes), the default spec
// (specDefault) is specDefaultCode, run_at is "" when it equals
// enqueued_at (and enqueue.lua writes a scheduled job's as "+<ms after
// enqueued_at>"), attempts and fence are "" for "0". Fields are only ever
// added, at the end: a record written before them is read with those
// fields empty (jobFromRecord, and common.lua's load).
var RecFields = []string{
	"status",         // a Status, stored as its code (statusCodes)
	"kind",           //
	"spec",           // "<max_attempts>|<visibility_ms>|<backoff>", the backoff as Backoff.Encode writes it; specDefaultCode for specDefault
	"enqueued_at_ms", //
	"run_at_ms",      // the millisecond its due time falls in
	"attempts",       // claims since enqueue or the last manual retry; bounded by max_attempts
	"fence",          // claims ever: never reset, the fencing number
	"token",          // the current (or last) claim token; "" once a reclaim took the job back
	"claimed_at_ms",  //
	"lease_until_ms", //
	"completed_at_ms",
	"died_at_ms",
	"canceled_at_ms",
	"last_error",
	"idempotency_key",
	"result_ttl_ms",    // "" for the client's retention
	"cancel_requested", // "1" when a cancel was asked for while processing
	"cancel_token",     // the request that canceled it (a repeated cancel answers as the first)
	"ack",              // how the last attempt was ended by its worker: "c", "f", "r" or "x" and the token
	// artifacts, logs and progress (see artifacts.go, logs.go):
	"progress", // "<percent>|<updated ms>|<message>", "" for none: the last progress a heartbeat carried
	"log",      // "<lines>|<bytes>|<truncated 0/1>|<last append's batch id>|<lines it added>", "" for no log
	"labels",   // the labels a claimer must have, canonical (sorted, joined by ","); "" none
	"workflow", // a workflow node's job: "<workflow id>|<node>|<gen>" (see workflow.go); "" for any other job
	// dependents (see workflow.go, AdoptJob):
	"watchers", // the refs ("<workflow id>|<node>|<gen>") of the implicit workflows watching the job's end, joined by ","; "" none; at most MaxWatchers
	// tracing (see internal/tracing):
	"trace", // the W3C traceparent of the enqueue ("00-<trace id>-<span id>-<flags>", 55 bytes); "" when tracing was off or the enqueue had no span
	// flow control (see KeyFPend):
	"flow", // the job's flow key; "" none
}

// Compact records: the short forms that keep Redis's memory per job low
// (see the record's doc above).
const (
	// recInline is the first byte of a record that holds its payload: no
	// status, nor a tombstone's "-", begins with it.
	RecInline = "\x02"
	// inlinePayloadMax is the largest payload kept in the record (a JSON
	// payload holds no NUL). A payload in the data hash costs a field of
	// its own there, about 90 bytes besides the payload itself.
	InlinePayloadMax = 128
	// specDefault is the spec of a job enqueued with the package's
	// defaults (DefaultMaxAttempts, DefaultVisibility, DefaultBackoff),
	// stored as specDefaultCode. It is fixed here, not derived from the
	// variables, so that the code always means the same spec.
	SpecDefault     = "3|30000|1000:2:3600000:0.2"
	SpecDefaultCode = "d"
)

// StatusCodes are the one-byte codes a record's status field is stored
// as (a record written before them spells the status: both read). Every
// name is longer than a code.
var StatusCodes = []struct {
	Status string // the queue.Status it stands for
	Code   string
}{
	{"scheduled", "s"}, {"pending", "p"}, {"processing", "r"}, {"completed", "c"},
	{"dead", "d"}, {"canceled", "x"}, {"waiting", "w"},
}

// Indexes into a record split on NUL (0-based; Lua's are 1 more).
const (
	RStatus = iota
	RKind
	RSpec
	REnqueuedAt
	RRunAt
	RAttempts
	RFence
	RToken
	RClaimedAt
	RLeaseUntil
	RCompletedAt
	RDiedAt
	RCanceledAt
	RLastError
	RIdemKey
	RResultTTL
	RCancelReq
	RCancelToken
	RAck
	RProgress
	RLog
	RLabels
	RWorkflow
	RWatchers
	RTrace
	RFlow
	NRec
)

// scriptSpec declares one script: the keys it is given, by name, and its
// arguments after the common ones.
type scriptSpec struct {
	name string
	keys []string
	args []string
	// global: a script of no queue's slot (the attention indexes, the
	// set of queue names, the worker registry): no common arguments, and
	// a prelude of its keys and arguments only.
	global bool
	// common: the file of definitions a global script takes those it uses
	// from ("" none); a queue's script takes common.lua's.
	common string
}

// commonArgs come first in every script's ARGV.
var commonArgs = []string{
	"offset_us", // added to Redis's TIME: 0, except under a test's fake clock (see Clock.OffsetUs)
	"pubcmd",    // "PUBLISH", "SPUBLISH" or "" (events off)
	"channel",   // the queue's events channel
	"lsets",     // the label sets whose keys follow the declared ones (see setKeyScripts); "" none
}

// allSpecs and wfSpecs are the specs of the scripts of a queue's slot and
// of a workflow's (see ops.go).
func allSpecs() []scriptSpec { return specsWhere(false) }
func wfSpecs() []scriptSpec  { return specsWhere(true) }

func globalSpecs() []scriptSpec {
	var out []scriptSpec
	for _, sc := range ops {
		if sc.spec.global {
			out = append(out, sc.spec)
		}
	}
	slices.SortFunc(out, func(a, b scriptSpec) int { return strings.Compare(a.name, b.name) })
	return out
}

func specsWhere(wf bool) []scriptSpec {
	var out []scriptSpec
	for _, sc := range ops {
		if !sc.spec.global && slices.Contains(sc.spec.keys, KeyWorkflow) == wf {
			out = append(out, sc.spec)
		}
	}
	slices.SortFunc(out, func(a, b scriptSpec) int { return strings.Compare(a.name, b.name) })
	return out
}

// fixedArgs is how many arguments s takes before its batch groups (all of
// them when it takes no batch), the common ones included.
func (s scriptSpec) fixedArgs() int {
	for i, a := range s.args {
		if a == "n" {
			return len(commonArgs) + i + 1
		}
	}
	return len(commonArgs) + len(s.args)
}

// groupSize is the number of arguments of one batch item (0: no batch).
func (s scriptSpec) groupSize() int {
	for i, a := range s.args {
		if a == "n" {
			return len(s.args) - i - 1
		}
	}
	return 0
}

// prelude is the Lua that names s's keys and arguments, and the record
// fields, as this file declares them:
//
//	local K_meta, K_jobs = KEYS[1], KEYS[2]
//	local A_offset_us, ... = ARGV[1], ...
//	local G = 7  -- the first argument of the batch groups; G_id = 0, G_token = 1 ...
//	local R_status, R_kind = 1, 2 ...
//	local NREC = 25
func (s scriptSpec) prelude() string {
	var b strings.Builder
	b.WriteString("-- generated from internal/store/layout.go: " + s.name + "\n")
	for i, k := range s.keys {
		fmt.Fprintf(&b, "local K_%s = KEYS[%d]\n", k, i+1)
	}
	if s.global {
		fixed := s.fixedArgs() - len(commonArgs)
		for i, a := range s.args[:fixed] {
			fmt.Fprintf(&b, "local A_%s = ARGV[%d]\n", a, i+1)
		}
		if g := s.groupSize(); g > 0 {
			fmt.Fprintf(&b, "local GROUP, GROUP_START = %d, %d\n", g, fixed+1)
			for i, a := range s.args[fixed:] {
				fmt.Fprintf(&b, "local G_%s = %d\n", a, i)
			}
		}
		if s.common != "" {
			fmt.Fprintf(&b, "local SENTINEL = string.char(%d)\n", Sentinel[0])
		}
		return b.String()
	}
	fixed := s.fixedArgs()
	all := append(append([]string{}, commonArgs...), s.args...)
	for i, a := range all[:fixed] {
		fmt.Fprintf(&b, "local A_%s = ARGV[%d]\n", a, i+1)
	}
	if g := s.groupSize(); g > 0 {
		fmt.Fprintf(&b, "local GROUP, GROUP_START = %d, %d\n", g, fixed+1)
		for i, a := range all[fixed:] {
			fmt.Fprintf(&b, "local G_%s = %d\n", a, i)
		}
	}
	for i, f := range RecFields {
		fmt.Fprintf(&b, "local R_%s = %d\n", f, i+1)
	}
	fmt.Fprintf(&b, "local NREC = %d\n", len(RecFields))
	// Byte values as decimal escapes ("\2"): Lua 5.1 reads no \x, and a
	// function library's top level may not call string.char.
	fmt.Fprintf(&b, "local REC_INLINE = \"\\%d\"\n", RecInline[0])
	fmt.Fprintf(&b, "local INLINE_MAX = %d\n", InlinePayloadMax)
	fmt.Fprintf(&b, "local SPEC_DEFAULT, SPEC_DEFAULT_CODE = %q, %q\n", SpecDefault, SpecDefaultCode)
	b.WriteString("local STATUS_CODE, STATUS_OF_CODE = {")
	for _, c := range StatusCodes {
		fmt.Fprintf(&b, " [%q] = %q,", c.Status, c.Code)
	}
	b.WriteString(" }, {")
	for _, c := range StatusCodes {
		fmt.Fprintf(&b, " [%q] = %q,", c.Code, c.Status)
	}
	b.WriteString(" }\n")
	fmt.Fprintf(&b, "local SENTINEL = \"\\%d\"\n", Sentinel[0])
	fmt.Fprintf(&b, "local WAKE_GROUP = %q\n", WakeGroup)
	fmt.Fprintf(&b, "local PUSH_KIND = %q\n", EnvelopeKind)
	fmt.Fprintf(&b, "local SWEEP_HINT_MS = %d\n", SweepHintFor.Milliseconds())
	fmt.Fprintf(&b, "local HOOK_MAX, HOOK_SENTINEL, CRON_IDEM = %d, %q, %q\n", HookOutboxMax, HookSentinelID, CronIdemPrefix)
	fmt.Fprintf(&b, "local FLOW_BUCKET, FLOW_DEBOUNCE = %q, %q\n", FlowBucketPrefix, FlowDebouncePrefix)
	fmt.Fprintf(&b, "local NKEYS = %d\n", len(s.keys)) // label set keys follow (see setKeyScripts)
	if slices.Contains(s.keys, KeyWorkflow) {
		for _, f := range wfPrelude {
			fmt.Fprintf(&b, "local %s = %q\n", f.lua, f.field)
		}
	}
	return b.String()
}

func init() {
	if len(RecFields) != NRec {
		panic("store: RecFields and the r* indexes disagree") // caught by every test run
	}
}

// MetaLsets and the label sets (see labels.go). A job may require labels; the pending jobs
// of each distinct set of required labels wait in a list of their own,
// with a wake stream of their own, so that a claim pops only lists it may
// take from and never scans one. A set is registered (its keys made, with
// their sentinels) the first time a job requires it, and stays while the
// queue exists:
//
//	<ns>:{q}:lsets             HASH  set id -> its labels, canonical
//	<ns>:{q}:pending:<set id>  LIST  its pending jobs, as <ns>:{q}:pending
//	<ns>:{q}:wake:<set id>     STREAM its wake-ups, as <ns>:{q}:wake (group wakeGroup)
//
// and the meta field metaLsets lists the ids in the order they were
// registered. A set's id is the first 16 hex digits of the SHA-1 of its
// canonical labels (Lua: redis.sha1hex), so a client names the keys of a
// job's set without asking Redis.
const MetaLsets = "lsets" // meta: the queue's label set ids, in registration order, joined by ","

// SetListKey and setWakeKey are the pending list and wake stream of the
// label set id of queue k.
func (k Keys) SetListKey(id string) string { return k.Pending + ":" + id }

// SetWakeKey is the wake stream of the label set id of queue k.
func (k Keys) SetWakeKey(id string) string { return k.Wake + ":" + id }

// setKeyScripts are the scripts whose declared keys are followed by the
// keys of label sets: for each set named in the common argument "lsets"
// (ids joined by ","), its pending list then its wake stream. Every one
// but enqueue is given all the queue's sets as the client knows them, and
// answers errStaleSets (writing nothing) when the queue's meta says
// otherwise; the client then reads the sets again and retries (see
// Client.runSets). Enqueue is given the sets of its own jobs, and
// registers those that are new; so is wfadd (which is not in this table
// for that reason: it is run as enqueue is).
var setKeyScripts = map[string]bool{
	"enqueue": true, "promote": true, "claim": true, "wait": true, "fail": true, "release": true,
	"reclaim": true, "reschedule": true, "runnow": true, "dead": true, "list": true, "delete": true,
	"wfnode": true,
	// complete and cancel end leases: at MaxInFlight, they wake each set's
	// claimers (common.lua's lease_freed); they check the sets are current
	// only on a queue with that limit (lease_bind)
	"complete": true, "cancel": true,
}

// Workflows (package workflow; see workflow.go) -------------------------------

// UpstreamField is the field of a workflow node's upstream (the results
// and artifacts of its parents, JSON) in the data hash, written when the
// node is released.
func UpstreamField(id string) string { return id + ".u" }

// A job's artifacts are the data hash's field "<id>.a" (one JSON object,
// name -> value; absent: none): wf_ended (common.lua) reads it when a
// workflow node's job ends, to pass them downstream.

// WFKeys are a workflow's keys. They carry "wf:<id>" as their hash tag, so that they sit in
// one slot of their own (no queue name holds a ':'): "<ns>:{wf:<id>}:wf".
// The one key is a HASH of the workflow's meta fields (wfMeta*) and, for
// each node, the fields "<prefix>:<node>" (wfNode*). It is written only by
// the wf*.lua scripts below, and expires WorkflowRetention after the
// workflow's last node ended.
type WFKeys struct {
	WF string
}

// WorkflowKeys answers the keys of workflow id in namespace ns.
func WorkflowKeys(ns, id string) WFKeys { return WFKeys{WF: ns + ":{wf:" + id + "}:wf"} }

// KeyWorkflow names the workflow hash in the wf scripts' declarations.
const KeyWorkflow = "wf"

// ByName answers the key a script declares by name.
func (k WFKeys) ByName(name string) string {
	if name == KeyWorkflow {
		return k.WF
	}
	panic("store: no workflow key " + name) // the script table names only keyWorkflow
}

// The workflow hash's meta fields.
const (
	WFMetaID       = "id"
	WFMetaCreated  = "created_ms"
	WFMetaPolicy   = "policy"      // "cancel" or "continue"
	WFMetaGen      = "gen"         // bumped by each retry
	WFMetaN        = "n"           // nodes
	WFMetaNames    = "names"       // the node names, comma-joined, in the order given
	WFMetaEnded    = "ended"       // nodes whose outcome is recorded
	WFMetaStarted  = "started"     // "1" once every node's job exists (wf_start.lua): releases begin then
	WFMetaCanceled = "canceled_ms" // when the whole workflow was canceled
	WFMetaEndedAt  = "ended_ms"    // when its last node ended
	WFMetaEndedBy  = "ended_by"    // the node whose end, recorded last, ended it (its outbox entry's ack writes the workflow.ended event)
	WFMetaStatus   = "end_status"  // "completed", "failed" or "canceled", once it ended
	WFMetaUpMax    = "upmax"       // MaxUpstreamBytes when it was created (see wf_upstream in common.lua)
)

// The workflow hash's per-node fields: "<prefix>:<node name>".
const (
	WFNodeJob      = "q" // "<queue>|<job id>"
	WFNodeParents  = "p" // parent names, comma-joined
	WFNodeChildren = "c" // child names, comma-joined
	WFNodeLeft     = "r" // parents whose outcome is not recorded yet
	WFNodeFailed   = "f" // parents recorded as dead or canceled
	WFNodeOutcome  = "o" // "completed", "dead" or "canceled", once recorded
	WFNodeUp       = "u" // what its children receive of it: JSON {job_id, queue, status, result, artifacts, error}
	WFNodeUpBrief  = "v" // the same without result and artifacts ("omitted": true), for a child whose upstream would pass upmax
	WFNodeGen      = "g" // the gen its job was (re)armed at: outbox entries of another gen are stale
	WFNodeExternal = "x" // "1": a job that existed before (a single job's depends_on): its ends are recorded, nothing else is done to it
)

// WFNodeField is the field of node's prefix (one of the wfNode* constants)
// in a workflow's hash.
func WFNodeField(prefix, node string) string { return prefix + ":" + node }

// wfPrelude names, for the scripts of a workflow's slot, the hash's meta
// fields (WF_<name>) and the prefixes of its per-node fields
// (NODE_<name>, the ":" included: the field of node x is NODE_up .. x), so
// that no script spells a field of its own.
var wfPrelude = []struct{ lua, field string }{
	{"WF_id", WFMetaID}, {"WF_created", WFMetaCreated}, {"WF_policy", WFMetaPolicy}, {"WF_gen", WFMetaGen},
	{"WF_n", WFMetaN}, {"WF_names", WFMetaNames}, {"WF_ended", WFMetaEnded}, {"WF_started", WFMetaStarted},
	{"WF_canceled", WFMetaCanceled}, {"WF_ended_at", WFMetaEndedAt}, {"WF_upmax", WFMetaUpMax},
	{"WF_ended_by", WFMetaEndedBy}, {"WF_end_status", WFMetaStatus},
	{"NODE_job", WFNodeField(WFNodeJob, "")}, {"NODE_parents", WFNodeField(WFNodeParents, "")},
	{"NODE_children", WFNodeField(WFNodeChildren, "")}, {"NODE_left", WFNodeField(WFNodeLeft, "")},
	{"NODE_failed", WFNodeField(WFNodeFailed, "")}, {"NODE_outcome", WFNodeField(WFNodeOutcome, "")},
	{"NODE_up", WFNodeField(WFNodeUp, "")}, {"NODE_brief", WFNodeField(WFNodeUpBrief, "")},
	{"NODE_gen", WFNodeField(WFNodeGen, "")}, {"NODE_external", WFNodeField(WFNodeExternal, "")},
}

// WorkflowsKey and the other global workflow keys are never touched
// inside a script of a queue or a workflow: the list of recent workflows, and the indexes the releasers
// read (in the attention slot, see attentionKeys).
func WorkflowsKey(ns string) string { return ns + ":workflows" } // ZSET workflow id -> created ms, capped

// WFAttnKeys are the releasers' indexes: outbox, each queue with outbox
// entries (ms of its first unacked entry, as marks and parks keep the
// other indexes); dirty, each workflow whose multi-step change (creation,
// cancel, retry) is under way, by when it began, for a releaser to finish
// one whose process died.
type WFAttnKeys struct {
	Outbox, OutboxSeq, Dirty string
}

// WorkflowAttentionKeys answers the releasers' indexes in namespace ns.
func WorkflowAttentionKeys(ns string) WFAttnKeys {
	p := ns + ":{" + ns + ":attn}:"
	return WFAttnKeys{Outbox: p + "wf", OutboxSeq: p + "wf_seq", Dirty: p + "wf_dirty"}
}

// wfKeysOf answers the declared keys of s, a script of wfSpecs.
func (s scriptSpec) wfKeysOf(k WFKeys) []string {
	out := make([]string, len(s.keys))
	for i, n := range s.keys {
		out[i] = k.ByName(n)
	}
	return out
}

// TakesSets reports whether the script called name is given the label
// sets' keys after its own (see setKeyScripts).
func TakesSets(name string) bool { return setKeyScripts[name] }

// HookKeys are the keys of one event webhook subscription, in the slot of
// the namespace's hooks ("<ns>:{<ns>:hooks}:"), in the order the hook
// scripts declare them (see hookKeys in ops.go; hook_common.lua says what
// each holds). Subs and Seq are the namespace's, the rest the
// subscription's own.
type HookKeys struct {
	Subs, Seq, Ev, Pend, Dead, DeadEv, Cur string
}

// HookKeysOf answers the keys of subscription id in namespace ns ("" for
// the namespace's keys only).
func HookKeysOf(ns, id string) HookKeys {
	p := ns + ":{" + ns + ":hooks}:"
	s := p + "s:" + id + ":"
	return HookKeys{Subs: p + "subs", Seq: p + "seq", Ev: s + "ev", Pend: s + "pend", Dead: s + "dead", DeadEv: s + "deadev", Cur: s + "cur"}
}

// HooksAllKey is "1" while an event webhook subscription takes every
// queue's events: a queue made then starts with its hooks setting on
// (create.lua), so its first events are not missed. Written by package
// dispatch, read by a client before it creates a queue.
func HooksAllKey(ns string) string { return ns + ":{" + ns + ":hooks}:all" }

// List is k in the order the scripts declare them.
func (k HookKeys) List() []string {
	return []string{k.Subs, k.Seq, k.Ev, k.Pend, k.Dead, k.DeadEv, k.Cur}
}

// Own are the keys of the subscription alone, deleted with it.
func (k HookKeys) Own() []string { return []string{k.Ev, k.Pend, k.Dead, k.DeadEv, k.Cur} }
