package queue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	keyMeta    = "meta"    // HASH: created_ms, paused, the counters (stat*), stale, waker, waiting_until, sweep_hint (attention.go)
	keyJobs    = "jobs"    // HASH: job id -> record (see the rec* fields), or a tombstone
	keyData    = "data"    // HASH: job id -> payload; job id + ".r" -> result; job id + ".n" -> notes; ".a" artifacts, ".l.<seq>" log lines
	keySched   = "sched"   // ZSET: due score (Unix ms, µs as decimals) -> id of a scheduled job
	keyPending = "pending" // LIST: ids of pending jobs, oldest at the right, the sentinel rightmost
	keyLeases  = "leases"  // ZSET: lease deadline ms -> id of a processing job
	keyDead    = "dead"    // ZSET: died-at ms -> id, capped by count and age
	keyDone    = "done"    // ZSET: completed-at ms -> id, the capped history of completions
	keyIdem    = "idem"    // HASH: idempotency key -> "<job id>|<expires ms>", gone with its job
	keyExpiry  = "expiry"  // ZSET: when -> the job id the sweep deletes then (retention, tombstones)
	keyClaims  = "claims"  // HASH: claim token base -> ids it claimed, until the claim's first ack
	keyWake    = "wake"    // STREAM: one entry each time jobs become pending while a claimer waits
	keyLsets   = "lsets"   // HASH: label set id -> its labels, canonical (see labels.go); the sets' own keys below
	keyOutbox  = "wfout"   // HASH: job id -> the outbox entry of a workflow node's job that ended, until a releaser acks it (see workflow.go)
)

// sentinel is the member, field or element that keeps each key of a queue
// in existence while it is otherwise empty. It is the byte 0x01, which no
// member can hold: job ids and claim tokens are validated, and
// idempotency keys refuse control characters (a printable sentinel such
// as "~" would be an idempotency key someone can send). In the sorted sets it has
// the score +inf, in the pending list it is the rightmost element, in the
// hashes it is a field with an empty value, and the wake stream always
// keeps its last entry.
const sentinel = "\x01"

// wakeGroup is the consumer group of every queue's wake stream. Waiting
// claimers read the stream through it (XREADGROUP ... NOACK), so that each
// entry wakes one of them, not all: a job that becomes pending makes one
// claim, not one per waiting claimer. (A claimer that takes all it asked
// for while more are pending writes an entry for the next.)
const wakeGroup = "w"

// sentinels is how many members of each kind of key are the sentinel.
const sentinels = 1

// keys are the Redis keys of one queue. Build them with queueKeys only
// after the queue name was validated.
type keys struct {
	name                                                                             string // the queue's name (not a key)
	meta, jobs, data, sched, pending, leases, dead, done, idem, expiry, claims, wake string
	outbox                                                                           string // workflows: see keyOutbox
	events                                                                           string // pub/sub channel of job events (sharded pub/sub in a cluster): a channel, not a key
	lsets                                                                            string // the registry of label sets (keyLsets)
}

func queueKeys(ns, queue string) keys {
	p := ns + ":{" + queue + "}:"
	return keys{
		name: queue, meta: p + keyMeta, jobs: p + keyJobs, data: p + keyData, sched: p + keySched,
		pending: p + keyPending, leases: p + keyLeases, dead: p + keyDead, done: p + keyDone,
		idem: p + keyIdem, expiry: p + keyExpiry, claims: p + keyClaims, wake: p + keyWake,
		events: p + "events", lsets: p + keyLsets, outbox: p + keyOutbox,
	}
}

// all lists every key of the queue, in layout order.
func (k keys) all() []string {
	return []string{k.meta, k.jobs, k.data, k.sched, k.pending, k.leases, k.dead, k.done, k.idem, k.expiry, k.claims, k.wake, k.lsets, k.outbox}
}

// byName answers the key of the queue called name (one of the key*
// constants).
func (k keys) byName(name string) string {
	switch name {
	case keyMeta:
		return k.meta
	case keyJobs:
		return k.jobs
	case keyData:
		return k.data
	case keySched:
		return k.sched
	case keyPending:
		return k.pending
	case keyLeases:
		return k.leases
	case keyDead:
		return k.dead
	case keyDone:
		return k.done
	case keyIdem:
		return k.idem
	case keyExpiry:
		return k.expiry
	case keyClaims:
		return k.claims
	case keyWake:
		return k.wake
	case keyLsets:
		return k.lsets
	case keyOutbox:
		return k.outbox
	}
	panic("queue: no key " + name) // the script table names only the constants above
}

// resultField is the field of a job's result in the data hash.
func resultField(id string) string { return id + ".r" }

// Global keys: never touched inside a per-queue script.
func queuesKey(ns string) string     { return ns + ":queues" }     // SET of known queue names
func nudgeChannel(ns string) string  { return ns + ":nudge" }      // pub/sub: "<queue>|<due ms>|<instance>"
func eventsPattern(ns string) string { return ns + ":{*}:events" } // PSUBSCRIBE pattern, single node only

// The attention indexes (see attention.go), in one slot of their own.
type attnKeys struct {
	due, dueSeq     string // ZSET queue -> the ms its earliest scheduled job is due; HASH queue -> seq of the last write
	sweep, sweepSeq string // ZSET queue -> the ms its next sweep work falls due; HASH queue -> seq of the last write
}

func attentionKeys(ns string) attnKeys {
	p := ns + ":{" + ns + ":attn}:"
	return attnKeys{due: p + "due", dueSeq: p + "due_seq", sweep: p + "sweep", sweepSeq: p + "sweep_seq"}
}

// Meta hash fields.
const (
	metaCreated      = "created_ms"
	metaActive       = "active_ms"      // the last enqueue, to the minute: an empty queue idle since long is forgotten
	metaPaused       = "paused"         // "1" while paused
	metaStale        = "stale"          // ids in the pending list whose job is no longer pending
	metaWaker        = "waker"          // the due score last handed to a claimer to wake at
	metaWakerUntil   = "waker_until"    // ms until which that hand-out holds
	metaWaitingUntil = "waiting_until"  // ms until which a claimer may be waiting on the wake stream
	metaLimitRate    = "limit_rate"     // Limits.Rate, jobs a second (absent: none)
	metaLimitBurst   = "limit_burst"    // Limits.Burst
	metaLimitFlight  = "limit_inflight" // Limits.MaxInFlight (absent: none)
	metaTBTokens     = "tb_tokens"      // the rate limit's token bucket: tokens left at tb_ms
	metaTBAt         = "tb_ms"          // ms the bucket was last counted at (Redis's clock)
)

// Settings: a queue's own configuration, fields of its meta hash written by
// settings.lua (see Client.SetSettings) and read from Go. Only these names
// can be set.
const (
	// SettingPush is the queue's push target, JSON written and read by
	// package dispatch.
	SettingPush = "push"
)

// settingFields are the meta fields SetSettings may write.
var settingFields = []string{SettingPush}

// noteField is the field of a job's attempt notes in the data hash.
func noteField(id string) string { return id + ".n" }

// artifactsField is the field of a job's artifacts in the data hash: one
// JSON object, artifact name -> value (see artifacts.go).
func artifactsField(id string) string { return id + ".a" }

// logLineField is the field of line seq (from 1) of a job's log in the
// data hash: "<at ms>|<line>" (see logs.go). The record's "log" field
// counts them.
func logLineField(id string, seq int64) string { return id + ".l." + strconv.FormatInt(seq, 10) }

// A job's record: its fields joined by NUL bytes, in this order. No value
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
// the data hash (field: the job's id), as every payload was before. A
// record with no recInline byte in front has its payload in the data hash.
// Common values have short forms, spelled out again by every reader: the
// status is a one-byte code (statusCodes), the default spec
// (specDefault) is specDefaultCode, run_at is "" when it equals
// enqueued_at (and enqueue.lua writes a scheduled job's as "+<ms after
// enqueued_at>"), attempts and fence are "" for "0". Fields are only ever
// added, at the end: a record written before them is read with those
// fields empty (jobFromRecord, and common.lua's load).
var recFields = []string{
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
}

// Compact records (issue 19: Redis memory per job; see the record's doc
// above).
const (
	// recInline is the first byte of a record that holds its payload: no
	// status, nor a tombstone's "-", begins with it.
	recInline = "\x02"
	// inlinePayloadMax is the largest payload kept in the record (a JSON
	// payload holds no NUL). A payload in the data hash costs a field of
	// its own there, about 90 bytes besides the payload itself.
	inlinePayloadMax = 128
	// specDefault is the spec of a job enqueued with the package's
	// defaults (DefaultMaxAttempts, DefaultVisibility, DefaultBackoff),
	// stored as specDefaultCode. It is fixed here, not derived from the
	// variables, so that the code always means the same spec.
	specDefault     = "3|30000|1000:2:3600000:0.2"
	specDefaultCode = "d"
)

// statusCodes are the one-byte codes a record's status field is stored
// as (a record written before them spells the status: both read). Every
// name is longer than a code.
var statusCodes = []struct {
	status Status
	code   string
}{
	{StatusScheduled, "s"}, {StatusPending, "p"}, {StatusProcessing, "r"}, {StatusCompleted, "c"},
	{StatusDead, "d"}, {StatusCanceled, "x"}, {StatusWaiting, "w"},
}

// statusOfCode maps each code of statusCodes to its status.
var statusOfCode = func() map[string]Status {
	m := map[string]Status{}
	for _, c := range statusCodes {
		m[c.code] = c.status
	}
	return m
}()

// Indexes into a record split on NUL (0-based; Lua's are 1 more).
const (
	rStatus = iota
	rKind
	rSpec
	rEnqueuedAt
	rRunAt
	rAttempts
	rFence
	rToken
	rClaimedAt
	rLeaseUntil
	rCompletedAt
	rDiedAt
	rCanceledAt
	rLastError
	rIdemKey
	rResultTTL
	rCancelReq
	rCancelToken
	rAck
	rProgress
	rLog
	rLabels
	rWorkflow
	rWatchers
	nRec
)

// scriptSpec declares one script: the keys it is given, by name, and its
// arguments after the common ones.
type scriptSpec struct {
	name string
	keys []string
	args []string
}

// commonArgs come first in every script's ARGV.
var commonArgs = []string{
	"offset_us", // added to Redis's TIME: 0, except under a test's fake clock (see Client.timeOffset)
	"pubcmd",    // "PUBLISH", "SPUBLISH" or "" (events off)
	"channel",   // the queue's events channel
	"lsets",     // the label sets whose keys follow the declared ones (see setKeyScripts); "" none
}

// The scripts. A batch script's arguments end with "n" and then n groups
// of the fields named after it ("n", "id", "token", "result": n groups of
// id, token, result).
var (
	specCreate = scriptSpec{"create",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyLeases, keyDead, keyDone, keyIdem, keyExpiry, keyClaims, keyWake, keyLsets, keyOutbox},
		nil}
	specEnqueue = scriptSpec{"enqueue",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyIdem, keyExpiry, keyWake, keyLsets},
		[]string{"idem_ttl_ms", "max_sets", "n", "id", "kind", "payload", "spec", "when", "idem", "result_ttl_ms", "labels"}}
	specPromote = scriptSpec{"promote",
		[]string{keyMeta, keyJobs, keySched, keyPending, keyWake},
		[]string{"limit"}}
	specClaim = scriptSpec{"claim",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyLeases, keyClaims, keyWake},
		[]string{"max", "token_base", "visibility_ms", "want_next", "wait_ms", "eligible"}}
	specWait = scriptSpec{"wait",
		[]string{keyMeta, keyPending, keyLeases, keyWake},
		[]string{"wait_ms", "eligible"}}
	specComplete = scriptSpec{"complete",
		[]string{keyMeta, keyJobs, keyData, keyLeases, keyDone, keyIdem, keyExpiry, keyClaims, keyWake, keyOutbox, keyPending},
		[]string{"retention_ms", "history", "tomb_ms", "answer", "n", "id", "token", "result", "artifacts"}}
	specFail = scriptSpec{"fail",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyLeases, keyDead, keyIdem, keyExpiry, keyClaims, keyWake, keyOutbox},
		[]string{"id", "token", "error", "retry_at", "dead", "jitter", "dead_max", "dead_age_ms", "retention_ms", "tomb_ms"}}
	specHeartbeat = scriptSpec{"heartbeat",
		[]string{keyJobs, keyLeases},
		[]string{"id", "token", "extend_ms", "progress"}}
	specRelease = scriptSpec{"release",
		[]string{keyMeta, keyJobs, keyData, keyPending, keyLeases, keyIdem, keyExpiry, keyClaims, keyWake, keyOutbox},
		[]string{"id", "token", "retention_ms", "tomb_ms"}}
	specReclaim = scriptSpec{"reclaim",
		[]string{keyMeta, keyJobs, keyData, keyPending, keyLeases, keyDead, keyDone, keyIdem, keyExpiry, keyClaims, keyWake, keyOutbox},
		[]string{"limit", "dead_max", "dead_age_ms", "retention_ms", "tomb_ms"}}
	specCancel = scriptSpec{"cancel",
		[]string{keyMeta, keyJobs, keyData, keySched, keyLeases, keyDead, keyDone, keyIdem, keyExpiry, keyClaims, keyWake, keyOutbox, keyPending},
		[]string{"id", "request", "retention_ms", "claim_token", "tomb_ms"}}
	specReschedule = scriptSpec{"reschedule",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyWake},
		[]string{"id", "when"}}
	specRunNow = scriptSpec{"runnow",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyDead, keyWake},
		[]string{"id"}}
	specDead = scriptSpec{"dead",
		[]string{keyMeta, keyJobs, keyData, keyPending, keyDead, keyIdem, keyExpiry, keyWake},
		[]string{"mode", "kind", "batch", "upto", "cursor_score", "cursor_id", "tomb_ms"}}
	specDelete = scriptSpec{"delete",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyLeases, keyDead, keyDone, keyIdem, keyExpiry, keyClaims, keyWake, keyLsets, keyOutbox},
		[]string{"force", "idle_ms"}}
	specSettings = scriptSpec{"settings",
		[]string{keyMeta},
		[]string{"n", "field", "value"}}
	specNote = scriptSpec{"note",
		[]string{keyJobs, keyData},
		[]string{"keep", "n", "id", "token", "entry"}}
	specList = scriptSpec{"list",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyLeases, keyDead, keyDone},
		[]string{"status", "limit", "cursor_num", "cursor_id"}}
	// Artifacts and logs (artifacts.go, logs.go).
	specArtifacts = scriptSpec{"artifacts",
		[]string{keyJobs, keyData},
		[]string{"id", "token", "artifacts"}}
	specLog = scriptSpec{"log",
		[]string{keyJobs, keyData},
		[]string{"id", "token", "batch", "max_lines", "max_bytes", "n", "line"}}
)

var allSpecs = []scriptSpec{specCreate, specEnqueue, specPromote, specClaim, specWait, specComplete, specFail, specHeartbeat,
	specRelease, specReclaim, specCancel, specReschedule, specRunNow, specDead, specList, specDelete,
	specSettings, specNote, specArtifacts, specLog,
	specWFAdd, specWFNode, specWFRead, specWFAck, specWFAdopt}

// keysOf answers the declared keys of s for queue keys k.
func (s scriptSpec) keysOf(k keys) []string {
	out := make([]string, len(s.keys))
	for i, n := range s.keys {
		out[i] = k.byName(n)
	}
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
//	local NREC, REC_PATTERN = 19, '^(%Z*)%z...(%Z*)%z*$'
func (s scriptSpec) prelude() string {
	var b strings.Builder
	b.WriteString("-- generated from queue/layout.go: " + s.name + "\n")
	for i, k := range s.keys {
		fmt.Fprintf(&b, "local K_%s = KEYS[%d]\n", k, i+1)
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
	for i, f := range recFields {
		fmt.Fprintf(&b, "local R_%s = %d\n", f, i+1)
	}
	fmt.Fprintf(&b, "local NREC = %d\n", len(recFields))
	// A record's fields in one match: %Z is any byte but NUL, and one
	// string.match costs Redis less than half of a gmatch loop.
	// Records are stored without their trailing empty fields: load
	// appends NREC-1 NULs (REC_PAD) before matching, and the pattern takes
	// the NULs left over.
	fmt.Fprintf(&b, "local REC_PATTERN = '^%s(%%Z*)%%z*$'\n", strings.Repeat("(%Z*)%z", len(recFields)-1))
	fmt.Fprintf(&b, "local REC_PAD = string.rep(string.char(0), %d)\n", len(recFields)-1)
	fmt.Fprintf(&b, "local REC_INLINE = string.char(%d)\n", recInline[0])
	fmt.Fprintf(&b, "local INLINE_MAX = %d\n", inlinePayloadMax)
	fmt.Fprintf(&b, "local SPEC_DEFAULT, SPEC_DEFAULT_CODE = %q, %q\n", specDefault, specDefaultCode)
	b.WriteString("local STATUS_CODE, STATUS_OF_CODE = {")
	for _, c := range statusCodes {
		fmt.Fprintf(&b, " [%q] = %q,", c.status, c.code)
	}
	b.WriteString(" }, {")
	for _, c := range statusCodes {
		fmt.Fprintf(&b, " [%q] = %q,", c.code, c.status)
	}
	b.WriteString(" }\n")
	fmt.Fprintf(&b, "local SENTINEL = string.char(%d)\n", sentinel[0]) // Lua 5.1 reads no \x escapes
	fmt.Fprintf(&b, "local WAKE_GROUP = %q\n", wakeGroup)
	fmt.Fprintf(&b, "local SWEEP_HINT_MS = %d\n", sweepHintFor.Milliseconds())
	fmt.Fprintf(&b, "local NKEYS = %d\n", len(s.keys)) // label set keys follow (see setKeyScripts)
	if slices.Contains(s.keys, keyWorkflow) {
		for _, f := range wfPrelude {
			fmt.Fprintf(&b, "local %s = %q\n", f.lua, f.field)
		}
	}
	return b.String()
}

// argv builds the ARGV of s: the common arguments, then args, checked
// against the declared count so that Go and Lua cannot drift apart.
func (s scriptSpec) argv(common []any, args []any) []any {
	out := make([]any, 0, len(common)+len(args))
	out = append(out, common...)
	out = append(out, args...)
	fixed, g := s.fixedArgs(), s.groupSize()
	if g == 0 && len(out) != fixed || g > 0 && (len(out) < fixed || (len(out)-fixed)%g != 0) {
		panic("queue: " + s.name + ".lua called with " + strconv.Itoa(len(out)) + " arguments") // a bug in this package
	}
	return out
}

func init() {
	if len(recFields) != nRec {
		panic("queue: recFields and the r* indexes disagree") // caught by every test run
	}
}

// Label sets (see labels.go). A job may require labels; the pending jobs
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
const (
	metaLsets = "lsets" // meta: the queue's label set ids, in registration order, joined by ","
	// MaxLabelSets caps the distinct label sets a queue has had: an
	// enqueue that would register one more is refused with
	// ErrTooManyLabelSets. Sets are forgotten only with their queue.
	MaxLabelSets = 64
)

// setListKey and setWakeKey are the pending list and wake stream of the
// label set id of queue k.
func (k keys) setListKey(id string) string { return k.pending + ":" + id }
func (k keys) setWakeKey(id string) string { return k.wake + ":" + id }

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

// upstreamField is the field of a workflow node's upstream (the results
// and artifacts of its parents, JSON) in the data hash, written when the
// node is released.
func upstreamField(id string) string { return id + ".u" }

// A job's artifacts are the data hash's field "<id>.a" (one JSON object,
// name -> value; absent: none): wf_ended (common.lua) reads it when a
// workflow node's job ends, to pass them downstream.

// A workflow's keys carry "wf:<id>" as their hash tag, so that they sit in
// one slot of their own (no queue name holds a ':'): "<ns>:{wf:<id>}:wf".
// The one key is a HASH of the workflow's meta fields (wfMeta*) and, for
// each node, the fields "<prefix>:<node>" (wfNode*). It is written only by
// the wf*.lua scripts below, and expires WorkflowRetention after the
// workflow's last node ended.
type wfKeys struct {
	wf string
}

func workflowKeys(ns, id string) wfKeys { return wfKeys{wf: ns + ":{wf:" + id + "}:wf"} }

// keyWorkflow names the workflow hash in the wf scripts' declarations.
const keyWorkflow = "wf"

func (k wfKeys) byName(name string) string {
	if name == keyWorkflow {
		return k.wf
	}
	panic("queue: no workflow key " + name) // the script table names only keyWorkflow
}

// The workflow hash's meta fields.
const (
	wfMetaID       = "id"
	wfMetaCreated  = "created_ms"
	wfMetaPolicy   = "policy"      // "cancel" or "continue"
	wfMetaGen      = "gen"         // bumped by each retry
	wfMetaN        = "n"           // nodes
	wfMetaNames    = "names"       // the node names, comma-joined, in the order given
	wfMetaEnded    = "ended"       // nodes whose outcome is recorded
	wfMetaStarted  = "started"     // "1" once every node's job exists (wf_start.lua): releases begin then
	wfMetaCanceled = "canceled_ms" // when the whole workflow was canceled
	wfMetaEndedAt  = "ended_ms"    // when its last node ended
	wfMetaUpMax    = "upmax"       // MaxUpstreamBytes when it was created (see wf_upstream in common.lua)
)

// The workflow hash's per-node fields: "<prefix>:<node name>".
const (
	wfNodeJob      = "q" // "<queue>|<job id>"
	wfNodeParents  = "p" // parent names, comma-joined
	wfNodeChildren = "c" // child names, comma-joined
	wfNodeLeft     = "r" // parents whose outcome is not recorded yet
	wfNodeFailed   = "f" // parents recorded as dead or canceled
	wfNodeOutcome  = "o" // "completed", "dead" or "canceled", once recorded
	wfNodeUp       = "u" // what its children receive of it: JSON {job_id, queue, status, result, artifacts, error}
	wfNodeUpBrief  = "v" // the same without result and artifacts ("omitted": true), for a child whose upstream would pass upmax
	wfNodeGen      = "g" // the gen its job was (re)armed at: outbox entries of another gen are stale
	wfNodeExternal = "x" // "1": a job that existed before (a single job's depends_on): its ends are recorded, nothing else is done to it
)

// wfNodeField is the field of node's prefix (one of the wfNode* constants)
// in a workflow's hash.
func wfNodeField(prefix, node string) string { return prefix + ":" + node }

// wfPrelude names, for the scripts of a workflow's slot, the hash's meta
// fields (WF_<name>) and the prefixes of its per-node fields
// (NODE_<name>, the ":" included: the field of node x is NODE_up .. x), so
// that no script spells a field of its own.
var wfPrelude = []struct{ lua, field string }{
	{"WF_id", wfMetaID}, {"WF_created", wfMetaCreated}, {"WF_policy", wfMetaPolicy}, {"WF_gen", wfMetaGen},
	{"WF_n", wfMetaN}, {"WF_names", wfMetaNames}, {"WF_ended", wfMetaEnded}, {"WF_started", wfMetaStarted},
	{"WF_canceled", wfMetaCanceled}, {"WF_ended_at", wfMetaEndedAt}, {"WF_upmax", wfMetaUpMax},
	{"NODE_job", wfNodeField(wfNodeJob, "")}, {"NODE_parents", wfNodeField(wfNodeParents, "")},
	{"NODE_children", wfNodeField(wfNodeChildren, "")}, {"NODE_left", wfNodeField(wfNodeLeft, "")},
	{"NODE_failed", wfNodeField(wfNodeFailed, "")}, {"NODE_outcome", wfNodeField(wfNodeOutcome, "")},
	{"NODE_up", wfNodeField(wfNodeUp, "")}, {"NODE_brief", wfNodeField(wfNodeUpBrief, "")},
	{"NODE_gen", wfNodeField(wfNodeGen, "")}, {"NODE_external", wfNodeField(wfNodeExternal, "")},
}

// Global workflow keys, never touched inside a script of a queue or a
// workflow: the list of recent workflows, and the indexes the releasers
// read (in the attention slot, see attentionKeys).
func workflowsKey(ns string) string { return ns + ":workflows" } // ZSET workflow id -> created ms, capped

// wfAttnKeys are the releasers' indexes: outbox, each queue with outbox
// entries (ms of its first unacked entry, as marks and parks keep the
// other indexes); dirty, each workflow whose multi-step change (creation,
// cancel, retry) is under way, by when it began, for a releaser to finish
// one whose process died.
type wfAttnKeys struct {
	outbox, outboxSeq, dirty string
}

func workflowAttentionKeys(ns string) wfAttnKeys {
	p := ns + ":{" + ns + ":attn}:"
	return wfAttnKeys{outbox: p + "wf", outboxSeq: p + "wf_seq", dirty: p + "wf_dirty"}
}

// The scripts of workflows. In a queue's slot: wfadd writes node jobs
// (waiting), wfnode moves them (release, cancel, abort, rearm), wfread
// and wfack read and ack the outbox. In a workflow's slot (keys
// wfKeys): the rest.
var (
	specWFAdd = scriptSpec{"wfadd",
		[]string{keyMeta, keyJobs, keyData, keyLsets},
		[]string{"max_sets", "n", "id", "kind", "payload", "spec", "when", "result_ttl_ms", "workflow", "labels"}}
	specWFNode = scriptSpec{"wfnode",
		[]string{keyMeta, keyJobs, keyData, keySched, keyPending, keyDead, keyIdem, keyExpiry, keyWake, keyOutbox},
		[]string{"retention_ms", "tomb_ms", "n", "mode", "id", "gen", "upstream"}}
	specWFRead = scriptSpec{"wfread",
		[]string{keyOutbox},
		[]string{"cursor", "count"}}
	specWFAck = scriptSpec{"wfack",
		[]string{keyOutbox},
		[]string{"n", "id", "entry"}}
	specWFAdopt = scriptSpec{"wfadopt",
		[]string{keyMeta, keyJobs, keyData, keyOutbox},
		[]string{"id", "workflow", "max_watchers"}}

	specWFCreate = scriptSpec{"wf_create",
		[]string{keyWorkflow},
		[]string{"id", "policy", "upstream_max", "n", "name", "job", "parents", "children", "external"}}
	specWFStart = scriptSpec{"wf_start",
		[]string{keyWorkflow},
		nil}
	specWFRecord = scriptSpec{"wf_record",
		[]string{keyWorkflow},
		[]string{"retention_ms", "n", "node", "gen", "outcome", "up", "brief"}}
	specWFPlan = scriptSpec{"wf_plan",
		[]string{keyWorkflow},
		nil}
	specWFCancel = scriptSpec{"wf_cancel",
		[]string{keyWorkflow},
		[]string{"retention_ms"}}
	specWFRetry = scriptSpec{"wf_retry",
		[]string{keyWorkflow},
		nil}
)

// wfSpecs are the scripts of a workflow's slot.
var wfSpecs = []scriptSpec{specWFCreate, specWFStart, specWFRecord, specWFPlan, specWFCancel, specWFRetry}

// wfKeysOf answers the declared keys of s, a script of wfSpecs.
func (s scriptSpec) wfKeysOf(k wfKeys) []string {
	out := make([]string, len(s.keys))
	for i, n := range s.keys {
		out[i] = k.byName(n)
	}
	return out
}
