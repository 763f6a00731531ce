package store

import "time"

// The scripts, each declared once: its file, its keys (in KEYS order),
// its arguments after the common ones (the params type's tags, see
// declare) and its reply (the reply type's tags). The Lua file's header
// says what each argument and reply element means. A reply read here is
// the script's own answer: the marks that reply() in common.lua wraps
// around some are taken off first (see UnwrapMarks).

// Code is a reply that is one integer.
type Code struct {
	Code int64 `reply:"code,scalar"`
}

// Rows is a reply read element by element by its caller (see Int, Str).
type Rows struct {
	Rows []any `reply:"rows,rest"`
}

// CodeStatusJob is the reply { code, status, job packed }.
type CodeStatusJob struct {
	Code   int64  `reply:"code"`
	Status string `reply:"status"`
	Job    string `reply:"job"`
}

// CodeRows is the reply { code, rows... }.
type CodeRows struct {
	Code int64 `reply:"code"`
	Rows []any `reply:"rows,rest"`
}

// None are the arguments of a script that takes only the common ones.
type None struct{}

// Queues (one queue's slot).
type (
	// CreateArgs are the arguments of create.lua.
	CreateArgs struct {
		// Hooks sets the queue's hooks setting (SettingHooks): a
		// subscription to every queue's events exists (HooksAllKey).
		Hooks bool `arg:"hooks"`
	}
	// EnqueueArgs are enqueue.lua's arguments: the jobs, a group each.
	EnqueueArgs struct {
		IdemTTLMs   int64         `arg:"idem_ttl_ms"`
		MaxSets     int           `arg:"max_sets"`
		RetentionMs int64         `arg:"retention_ms"` // of a job a flow strategy cancels at once
		TombMs      int64         `arg:"tomb_ms"`
		Jobs        []EnqueueItem `arg:"n"`
	}
	// EnqueueItem is one element of EnqueueArgs's batch.
	EnqueueItem struct {
		ID          string `arg:"id"`
		Kind        string `arg:"kind"`
		Payload     string `arg:"payload"`
		Spec        string `arg:"spec"`
		When        string `arg:"when"`
		Idem        string `arg:"idem"`
		ResultTTLMs string `arg:"result_ttl_ms"` // "" for the client's retention
		Labels      string `arg:"labels"`
		Trace       string `arg:"trace"`    // the enqueue's W3C traceparent; "" none
		Flow        string `arg:"flow"`     // the job's flow key; "" none
		Debounce    string `arg:"debounce"` // "<period ms>|<max wait ms>": fold into the key's waiting debounced job; "" none
	}
	// EnqueueReply is enqueue.lua's reply: First -1 (no such queue), -2 (Rest: the labels of a
	// set past max_sets) or Redis's now in µs (Rest: id, replayed, due
	// per job).
	EnqueueReply struct {
		First int64 `reply:"first"`
		Rest  []any `reply:"rest,rest"`
	}
	// PromoteArgs are the arguments of promote.lua.
	PromoteArgs struct {
		Limit int `arg:"limit"`
	}
	// PromoteReply is the reply of promote.lua.
	PromoteReply struct {
		Moved int64 `reply:"moved"`
		Next  any   `reply:"next"`
		NowUs int64 `reply:"now_us"`
	}
	// ClaimArgs are the arguments of claim.lua.
	ClaimArgs struct {
		Max          int    `arg:"max"`
		TokenBase    string `arg:"token_base"`
		VisibilityMs int64  `arg:"visibility_ms"`
		WantNext     bool   `arg:"want_next"`
		WaitMs       int64  `arg:"wait_ms"`
		AheadMs      int64  `arg:"ahead_ms"`
		Eligible     string `arg:"eligible"`
	}
	// ClaimReply is claim.lua's reply: Paused is 1 (paused), 0, or "L<ms>" (held back by the
	// queue's limits); Starts "" (every job starts at once) or Redis's µs at the script's
	// end, a space, and job by job the µs after NowUs before which it must not start,
	// comma-joined (a job claimed ahead).
	ClaimReply struct {
		Paused any   `reply:"paused"`
		Next   any   `reply:"next"`
		NowUs  int64 `reply:"now_us"`
		Starts any   `reply:"starts"`
		Jobs   []any `reply:"jobs,rest"`
	}
	// WaitArgs are the arguments of wait.lua.
	WaitArgs struct {
		WaitMs   int64  `arg:"wait_ms"`
		Eligible string `arg:"eligible"`
	}
	// WaitReply is the reply of wait.lua.
	WaitReply struct {
		Paused  int64 `reply:"paused"`
		Pending int64 `reply:"pending"`
		At      any   `reply:"at,opt"`
	}
	// CompleteArgs are the arguments of complete.lua.
	CompleteArgs struct {
		RetentionMs int64          `arg:"retention_ms"`
		History     int            `arg:"history"`
		TombMs      int64          `arg:"tomb_ms"`
		Answer      bool           `arg:"answer"`
		Acks        []CompleteItem `arg:"n"`
	}
	// CompleteItem is one element of CompleteArgs's batch.
	CompleteItem struct {
		ID        string `arg:"id"`
		Token     string `arg:"token"`
		Result    string `arg:"result"`
		Artifacts string `arg:"artifacts"`
	}
	// FailArgs are the arguments of fail.lua: the failed attempts, a
	// group each.
	FailArgs struct {
		DeadMax     int        `arg:"dead_max"`
		DeadAgeMs   int64      `arg:"dead_age_ms"`
		RetentionMs int64      `arg:"retention_ms"`
		TombMs      int64      `arg:"tomb_ms"`
		Answer      bool       `arg:"answer"`
		Fails       []FailItem `arg:"n"`
	}
	// FailItem is one element of FailArgs's batch: retry_at is "-1" (the
	// backoff), a due score, or "d<µs>" after Redis's now.
	FailItem struct {
		ID      string  `arg:"id"`
		Token   string  `arg:"token"`
		Error   string  `arg:"error"`
		RetryAt string  `arg:"retry_at"`
		Dead    bool    `arg:"dead"`
		Jitter  float64 `arg:"jitter"`
	}
	// HeartbeatArgs are the arguments of heartbeat.lua.
	HeartbeatArgs struct {
		ID       string `arg:"id"`
		Token    string `arg:"token"`
		ExtendMs int64  `arg:"extend_ms"`
		Progress string `arg:"progress"`
	}
	// HeartbeatReply is the reply of heartbeat.lua.
	HeartbeatReply struct {
		Code            int64 `reply:"code"`
		LeaseUntilMs    int64 `reply:"lease_until_ms"`
		CancelRequested int64 `reply:"cancel_requested"`
	}
	// ReleaseArgs are the arguments of release.lua.
	ReleaseArgs struct {
		ID          string `arg:"id"`
		Token       string `arg:"token"`
		RetentionMs int64  `arg:"retention_ms"`
		TombMs      int64  `arg:"tomb_ms"`
	}
	// ReclaimArgs are the arguments of reclaim.lua.
	ReclaimArgs struct {
		Limit       int   `arg:"limit"`
		DeadMax     int   `arg:"dead_max"`
		DeadAgeMs   int64 `arg:"dead_age_ms"`
		RetentionMs int64 `arg:"retention_ms"`
		TombMs      int64 `arg:"tomb_ms"`
	}
	// ReclaimReply is the reply of reclaim.lua.
	ReclaimReply struct {
		More   int64 `reply:"more"`
		NextMs int64 `reply:"next"`
		NowUs  int64 `reply:"now_us"`
		WF     int64 `reply:"wf"`
		IDs    []any `reply:"ids,rest"`
	}
	// CancelArgs are the arguments of cancel.lua.
	CancelArgs struct {
		ID          string `arg:"id"`
		Request     string `arg:"request"`
		RetentionMs int64  `arg:"retention_ms"`
		ClaimToken  string `arg:"claim_token"`
		TombMs      int64  `arg:"tomb_ms"`
	}
	// RescheduleArgs are the arguments of reschedule.lua.
	RescheduleArgs struct {
		ID   string `arg:"id"`
		When string `arg:"when"`
	}
	// RunNowArgs are the arguments of runnow.lua.
	RunNowArgs struct {
		ID string `arg:"id"`
	}
	// DeadArgs are the arguments of dead.lua.
	DeadArgs struct {
		Mode        string `arg:"mode"`
		Kind        string `arg:"kind"`
		Batch       int    `arg:"batch"`
		Upto        int64  `arg:"upto"`
		CursorScore string `arg:"cursor_score"`
		CursorID    string `arg:"cursor_id"`
		TombMs      int64  `arg:"tomb_ms"`
	}
	// DeadReply is the reply of dead.lua.
	DeadReply struct {
		Done      int64  `reply:"done"`
		Count     int64  `reply:"count"`
		LastScore string `reply:"last_score"`
		LastID    string `reply:"last_id"`
		Upto      int64  `reply:"upto"`
	}
	// DeleteArgs are the arguments of delete.lua.
	DeleteArgs struct {
		Force  bool  `arg:"force"`
		IdleMs int64 `arg:"idle_ms"`
	}
	// FlowOverrideArgs are the arguments of flow_override.lua.
	FlowOverrideArgs struct {
		Key   string `arg:"key"`
		Value string `arg:"value"` // "" deletes the key's override
		Max   int    `arg:"max"`   // the most overrides the queue may hold
	}
	// SettingsArgs are the arguments of settings.lua.
	SettingsArgs struct {
		Fields []SettingsItem `arg:"n"`
	}
	// SettingsItem is one element of SettingsArgs's batch.
	SettingsItem struct {
		Field string `arg:"field"`
		Value string `arg:"value"`
	}
	// NoteArgs are the arguments of note.lua.
	NoteArgs struct {
		Keep  int        `arg:"keep"`
		Notes []NoteItem `arg:"n"`
	}
	// NoteItem is one element of NoteArgs's batch.
	NoteItem struct {
		ID    string `arg:"id"`
		Token string `arg:"token"`
		Entry string `arg:"entry"`
	}
	// ListArgs are the arguments of list.lua.
	ListArgs struct {
		Status    string `arg:"status"`
		Limit     int    `arg:"limit"`
		CursorNum string `arg:"cursor_num"`
		CursorID  string `arg:"cursor_id"`
	}
	// ListReply is the reply of list.lua.
	ListReply struct {
		More    int64  `reply:"more"`
		LastNum string `reply:"last_num"`
		LastID  string `reply:"last_id"`
		Jobs    []any  `reply:"jobs,rest"`
	}
	// ArtifactsArgs are the arguments of artifacts.lua.
	ArtifactsArgs struct {
		ID        string `arg:"id"`
		Token     string `arg:"token"`
		Artifacts string `arg:"artifacts"`
	}
	// LogArgs are the arguments of log.lua.
	LogArgs struct {
		ID       string    `arg:"id"`
		Token    string    `arg:"token"`
		Batch    string    `arg:"batch"`
		MaxLines int       `arg:"max_lines"`
		MaxBytes int       `arg:"max_bytes"`
		Lines    []LogLine `arg:"n"`
	}
	// LogLine is one element of LogArgs's batch.
	LogLine struct {
		Line string `arg:"line"`
	}
	// LogReply is the reply of log.lua.
	LogReply struct {
		Code      int64 `reply:"code"`
		Added     int64 `reply:"added"`
		LastSeq   int64 `reply:"last_seq"`
		Truncated int64 `reply:"truncated"`
	}
)

// The declarations of the queue scripts.
var (
	Create = declare[CreateArgs, Code]("create",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyLeases, KeyDead, KeyDone, KeyIdem, KeyExpiry, KeyClaims, KeyWake, KeyLsets, KeyOutbox, KeyHooks)...)
	Enqueue = declare[EnqueueArgs, EnqueueReply]("enqueue",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyIdem, KeyExpiry, KeyWake, KeyLsets, KeyOutbox, KeyHooks)...)
	Promote = declare[PromoteArgs, PromoteReply]("promote",
		withFlow(KeyMeta, KeyJobs, KeySched, KeyPending, KeyWake)...)
	Claim = declare[ClaimArgs, ClaimReply]("claim",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyLeases, KeyClaims, KeyWake)...)
	Wait = declare[WaitArgs, WaitReply]("wait",
		withFlow(KeyMeta, KeyPending, KeyLeases, KeyWake)...)
	// Complete answers a code per ack, then with Answer each job packed.
	Complete = declare[CompleteArgs, Rows]("complete",
		withFlow(KeyMeta, KeyJobs, KeyData, KeyLeases, KeyDone, KeyIdem, KeyExpiry, KeyClaims, KeyWake, KeyOutbox, KeyPending, KeyHooks)...)
	// Fail answers four rows a failure: code, status, run_at_ms, due;
	// with Answer, then a row a failure: the job packed, or "".
	Fail = declare[FailArgs, Rows]("fail",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyLeases, KeyDead, KeyIdem, KeyExpiry, KeyClaims, KeyWake, KeyOutbox, KeyHooks)...)
	Heartbeat = declare[HeartbeatArgs, HeartbeatReply]("heartbeat",
		KeyJobs, KeyLeases)
	Release = declare[ReleaseArgs, Code]("release",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyLeases, KeyIdem, KeyExpiry, KeyClaims, KeyWake, KeyOutbox, KeyHooks)...)
	Reclaim = declare[ReclaimArgs, ReclaimReply]("reclaim",
		withFlow(KeyMeta, KeyJobs, KeyData, KeyPending, KeyLeases, KeyDead, KeyDone, KeyIdem, KeyExpiry, KeyClaims, KeyWake, KeyOutbox, KeyHooks)...)
	Cancel = declare[CancelArgs, CodeStatusJob]("cancel",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyLeases, KeyDead, KeyDone, KeyIdem, KeyExpiry, KeyClaims, KeyWake, KeyOutbox, KeyPending, KeyHooks)...)
	Reschedule = declare[RescheduleArgs, CodeStatusJob]("reschedule",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyWake)...)
	RunNow = declare[RunNowArgs, CodeStatusJob]("runnow",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyDead, KeyWake)...)
	Dead = declare[DeadArgs, DeadReply]("dead",
		withFlow(KeyMeta, KeyJobs, KeyData, KeyPending, KeyDead, KeyIdem, KeyExpiry, KeyWake)...)
	Delete = declare[DeleteArgs, Code]("delete",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyLeases, KeyDead, KeyDone, KeyIdem, KeyExpiry, KeyClaims, KeyWake, KeyLsets, KeyOutbox, KeyHooks)...)
	Settings = declare[SettingsArgs, Code]("settings",
		KeyMeta)
	FlowOverride = declare[FlowOverrideArgs, Code]("flow_override",
		withFlow(KeyMeta, KeyWake)...)
	// Note answers a code per note.
	Note = declare[NoteArgs, Rows]("note",
		KeyJobs, KeyData)
	List = declare[ListArgs, ListReply]("list",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyLeases, KeyDead, KeyDone)...)
	Artifacts = declare[ArtifactsArgs, Code]("artifacts",
		KeyJobs, KeyData)
	Log = declare[LogArgs, LogReply]("log",
		KeyJobs, KeyData)
)

// withFlow answers keys followed by the flow keys (FlowKeys): the
// declared keys of every script that makes jobs pending or ends a lease.
func withFlow(keys ...string) []string { return append(keys, FlowKeys...) }

// Workflows: in a queue's slot, wfadd writes node jobs (waiting), wfnode
// moves them (release, cancel, abort, rearm), wfread and wfack read and
// ack the outbox; in a workflow's slot (keys WFKeys), the rest.
type (
	// WFAddArgs are wfadd.lua's arguments: a workflow's node jobs.
	WFAddArgs struct {
		MaxSets int         `arg:"max_sets"`
		Jobs    []WFAddItem `arg:"n"`
	}
	// WFAddItem is one element of WFAddArgs's batch.
	WFAddItem struct {
		ID          string `arg:"id"`
		Kind        string `arg:"kind"`
		Payload     string `arg:"payload"`
		Spec        string `arg:"spec"`
		When        string `arg:"when"`
		ResultTTLMs string `arg:"result_ttl_ms"` // "" for the client's retention
		Workflow    string `arg:"workflow"`
		Labels      string `arg:"labels"`
		Trace       string `arg:"trace"`    // the enqueue's W3C traceparent; "" none
		Flow        string `arg:"flow"`     // the job's flow key; "" none
		Debounce    string `arg:"debounce"` // "<period ms>|<max wait ms>": fold into the key's waiting debounced job; "" none
	}
	// WFNodeArgs are the arguments of wfnode.lua.
	WFNodeArgs struct {
		RetentionMs int64        `arg:"retention_ms"`
		TombMs      int64        `arg:"tomb_ms"`
		Nodes       []WFNodeItem `arg:"n"`
	}
	// WFNodeItem is one element of WFNodeArgs's batch.
	WFNodeItem struct {
		Mode     string `arg:"mode"`
		ID       string `arg:"id"`
		Gen      int64  `arg:"gen"`
		Upstream string `arg:"upstream"`
	}
	// WFReadArgs are the arguments of wfread.lua.
	WFReadArgs struct {
		Cursor string `arg:"cursor"`
		Count  int    `arg:"count"`
	}
	// WFReadReply is the reply of wfread.lua.
	WFReadReply struct {
		NowUs  int64  `reply:"now_us"`
		Cursor string `reply:"next_cursor"`
		Rows   []any  `reply:"entries,rest"`
	}
	// WFAckArgs are the arguments of wfack.lua.
	WFAckArgs struct {
		Entries []WFAckItem `arg:"n"`
	}
	// WFAckItem is one element of WFAckArgs's batch.
	WFAckItem struct {
		ID    string `arg:"id"`
		Entry string `arg:"entry"`
		// Ended are the workflows the entry's end ended (a code 3 of
		// wf_record.lua), each "<workflow id>|<status>|<ended ms>",
		// comma-joined ("" none): the ack writes their workflow.ended
		// events to the hooks outbox.
		Ended string `arg:"ended"`
	}
	// WFAdoptArgs are the arguments of wfadopt.lua.
	WFAdoptArgs struct {
		ID          string `arg:"id"`
		Workflow    string `arg:"workflow"`
		MaxWatchers int    `arg:"max_watchers"`
	}
	// WFAdoptReply is the reply of wfadopt.lua.
	WFAdoptReply struct {
		Code   int64  `reply:"code"`
		Status string `reply:"status"`
	}
	// WFCreateArgs are the arguments of wf_create.lua.
	WFCreateArgs struct {
		ID          string         `arg:"id"`
		Policy      string         `arg:"policy"`
		UpstreamMax int            `arg:"upstream_max"`
		Nodes       []WFCreateNode `arg:"n"`
	}
	// WFCreateNode is one element of WFCreateArgs's batch.
	WFCreateNode struct {
		Name     string `arg:"name"`
		Job      string `arg:"job"`
		Parents  string `arg:"parents"`
		Children string `arg:"children"`
		External string `arg:"external"`
	}
	// WFRecordArgs are the arguments of wf_record.lua.
	WFRecordArgs struct {
		RetentionMs int64          `arg:"retention_ms"`
		Ends        []WFRecordItem `arg:"n"`
	}
	// WFRecordItem is one element of WFRecordArgs's batch.
	WFRecordItem struct {
		Node    string `arg:"node"`
		Gen     int64  `arg:"gen"`
		Outcome string `arg:"outcome"`
		Up      string `arg:"up"`
		Brief   string `arg:"brief"`
	}
	// WFCancelArgs are the arguments of wf_cancel.lua.
	WFCancelArgs struct {
		RetentionMs int64 `arg:"retention_ms"`
	}
)

// The declarations of the workflow scripts.
var (
	// WFAdd answers { -1 }, { -2, labels } or { now_us, added }.
	WFAdd = declare[WFAddArgs, EnqueueReply]("wfadd",
		KeyMeta, KeyJobs, KeyData, KeyLsets)
	// WFNode answers a code and a status per node.
	WFNode = declare[WFNodeArgs, Rows]("wfnode",
		withFlow(KeyMeta, KeyJobs, KeyData, KeySched, KeyPending, KeyDead, KeyIdem, KeyExpiry, KeyWake, KeyOutbox, KeyHooks)...)
	WFRead   = declare[WFReadArgs, WFReadReply]("wfread", KeyOutbox)
	WFAck    = declare[WFAckArgs, Code]("wfack", KeyMeta, KeyJobs, KeyOutbox, KeyHooks)
	WFAdopt  = declare[WFAdoptArgs, WFAdoptReply]("wfadopt", KeyMeta, KeyJobs, KeyData, KeyOutbox)
	WFCreate = declare[WFCreateArgs, Code]("wf_create", KeyWorkflow)
	WFStart  = declare[None, CodeRows]("wf_start", KeyWorkflow)
	// WFRecord answers a code per end, the workflow's end, then actions.
	WFRecord = declare[WFRecordArgs, Rows]("wf_record", KeyWorkflow)
	WFPlan   = declare[None, CodeRows]("wf_plan", KeyWorkflow)
	WFCancel = declare[WFCancelArgs, CodeRows]("wf_cancel", KeyWorkflow)
	WFRetry  = declare[None, CodeRows]("wf_retry", KeyWorkflow)
)

// Global scripts: the attention indexes (queue/attention.go) and the set
// of queue names, each in a slot of its own, not a queue's.
type (
	// MarkArgs are mark.lua's arguments: a queue's entries in two indexes.
	MarkArgs struct {
		Queue   string `arg:"queue"`
		AtA     int64  `arg:"at_a"`
		AtB     int64  `arg:"at_b"`
		Seq     int64  `arg:"seq"`
		Channel string `arg:"channel"`
		Nudge   string `arg:"nudge"`
	}
	// ParkArgs are the arguments of park.lua.
	ParkArgs struct {
		Queue string `arg:"queue"`
		At    int64  `arg:"at"`
		Seq   int64  `arg:"seq"`
	}
	// UnmarkArgs are the arguments of unmark.lua.
	UnmarkArgs struct {
		Queue string `arg:"queue"`
	}
	// RegisterArgs are the arguments of register.lua.
	RegisterArgs struct {
		Name string `arg:"name"`
		Max  int    `arg:"max"`
	}
)

// The declarations of the global scripts.
var (
	Mark     = declareGlobal[MarkArgs, Code]("mark", "index_a", "seqs_a", "index_b", "seqs_b")
	Park     = declareGlobal[ParkArgs, Code]("park", "index", "seqs")
	Unmark   = declareGlobal[UnmarkArgs, Code]("unmark", "due", "due_seq", "sweep", "sweep_seq")
	Register = declareGlobal[RegisterArgs, Code]("register", "queues")
)

// The worker registry (package registry): its keys are namespace-level
// ones in a slot of their own, named here for the scripts' prelude, given
// by the caller in this order (registry.Keys).
var registryKeys = []string{"info", "state", "queues", "held", "expiry", "ids"}

// RegistryRetryFor bounds the retries of a registry script while its
// slot migrates: a worker's sighting is retried by its next heartbeat.
const RegistryRetryFor = 10 * time.Second

type (
	// RegistryTouchArgs are registry_touch.lua's arguments: a worker's sighting.
	RegistryTouchArgs struct {
		OffsetUs     int64      `arg:"offset_us"`
		ID           string     `arg:"id"`
		TTLMs        int64      `arg:"ttl_ms"`
		DefaultTTLMs int64      `arg:"default_ttl_ms"`
		MaxWorkers   int        `arg:"max_workers"`
		Sweep        int        `arg:"sweep"`
		Info         string     `arg:"info"`
		Queue        string     `arg:"queue"`
		MaxQueues    int        `arg:"max_queues"`
		Mode         string     `arg:"mode"`
		MaxHeld      int        `arg:"max_held"`
		InfoNX       bool       `arg:"info_nx"`
		Jobs         []HeldItem `arg:"n"`
	}
	// HeldItem is one job a worker holds, as RegistryTouchArgs sends it.
	HeldItem struct {
		Job string `arg:"job"` // "<queue>/<id>"
	}
	// RegistryTouchReply is registry_touch.lua's reply: Code 1 (Now, Started, TTLMs follow) or 0 (the
	// worker is new and Now is the count of live workers, the cap).
	RegistryTouchReply struct {
		Code    int64 `reply:"code"`
		Now     int64 `reply:"now"`
		Started int64 `reply:"started,opt"`
		TTLMs   int64 `reply:"ttl_ms,opt"`
	}
	// RegistryListArgs are registry_list.lua's arguments.
	RegistryListArgs struct {
		OffsetUs int64  `arg:"offset_us"`
		From     string `arg:"from"`
		Limit    int    `arg:"limit"`
		Sweep    int    `arg:"sweep"`
	}
	// RegistryListReply is registry_list.lua's reply.
	RegistryListReply struct {
		Now     int64  `reply:"now"`
		Live    int64  `reply:"live"`
		Next    string `reply:"next"`
		Workers []any  `reply:"workers,rest"` // six values a worker
	}
	// RegistryRemoveArgs are registry_remove.lua's arguments.
	RegistryRemoveArgs struct {
		OffsetUs int64  `arg:"offset_us"`
		ID       string `arg:"id"`
	}
)

// The declarations of the registry scripts.
var (
	RegistryTouch  = declareRegistry[RegistryTouchArgs, RegistryTouchReply]("registry_touch")
	RegistryList   = declareRegistry[RegistryListArgs, RegistryListReply]("registry_list")
	RegistryRemove = declareRegistry[RegistryRemoveArgs, Code]("registry_remove")
)

func declareRegistry[P, R any](name string) *Op[P, R] {
	op := declareSpec[P, R](scriptSpec{name: name, keys: registryKeys, global: true, common: "registry_common"})
	op.retryFor = RegistryRetryFor
	return op
}

// Cron (package cron): the entries hash and its due index sit in one
// slot, an entry's run and done ticks in another of their own; the keys
// are named here for the scripts' prelude and given by the caller in this
// order (see cron/keys.go). Every cron script runs with CallGlobal.
type (
	// CronDueArgs are the arguments of cron_due.lua.
	CronDueArgs struct {
		OffsetUs int64 `arg:"offset_us"`
		Limit    int   `arg:"limit"`
	}
	// CronDueReply is the reply of cron_due.lua: Next is the first cursor after now ("" when none);
	// Rows are four strings a due entry: name, cursor, version, JSON.
	CronDueReply struct {
		NowUs    int64  `reply:"now_us"`
		Next     string `reply:"next"`
		Entries  int64  `reply:"entries"`
		Versions int64  `reply:"versions"`
		Rows     []any  `reply:"rows,rest"`
	}
	// CronAdvanceArgs are the arguments of cron_advance.lua.
	CronAdvanceArgs struct {
		OffsetUs int64             `arg:"offset_us"`
		Moves    []CronAdvanceItem `arg:"n"`
	}
	// CronAdvanceItem is one element of CronAdvanceArgs's batch.
	CronAdvanceItem struct {
		Name      string `arg:"name"`
		Version   string `arg:"version"`
		ThroughMs int64  `arg:"through_ms"`
		Cursor    string `arg:"cursor"` // "" when the entry leaves the index
	}
	// CronRepairArgs are the arguments of cron_repair.lua.
	CronRepairArgs struct {
		Entries []CronRepairItem `arg:"n"`
	}
	// CronRepairItem is one element of CronRepairArgs's batch.
	CronRepairItem struct {
		Name   string `arg:"name"`
		Cursor string `arg:"cursor"` // "" for none
	}
	// CronPutArgs are the arguments of cron_put.lua.
	CronPutArgs struct {
		Name       string `arg:"name"`
		Digest     string `arg:"digest"`
		Stored     string `arg:"stored"`
		Cursor     string `arg:"cursor"`
		MaxEntries int    `arg:"max_entries"`
	}
	// CronPutReply is the reply of cron_put.lua: Status "changed", "full" (N: the entries stored),
	// "created" or "replaced".
	CronPutReply struct {
		Status string `reply:"status"`
		N      int64  `reply:"n,opt"`
	}
	// CronRecordArgs are the arguments of cron_record.lua.
	CronRecordArgs struct {
		Tick    string `arg:"tick"` // "" for a trigger
		RunAtMs int64  `arg:"run_at_ms"`
		Queue   string `arg:"queue"`
		JobID   string `arg:"job_id"`
		TrimMs  int64  `arg:"trim_ms"`
	}
)

// The declarations of the cron scripts.
var (
	CronDue     = declareGlobal[CronDueArgs, CronDueReply]("cron_due", "entries", "versions", "due")
	CronAdvance = declareGlobal[CronAdvanceArgs, Code]("cron_advance", "versions", "due")
	CronRepair  = declareGlobal[CronRepairArgs, Code]("cron_repair", "entries", "versions", "due", "seq")
	CronPut     = declareGlobal[CronPutArgs, CronPutReply]("cron_put", "entries", "versions", "due", "seq")
	CronRecord  = declareGlobal[CronRecordArgs, Code]("cron_record", "run", "ticks")
)

// Event webhooks (package dispatch): the subscriptions and their
// deliveries sit in one slot of their own, "<ns>:{<ns>:hooks}:*"; each
// script is given one subscription's keys, in this order (HookKeys), and
// runs with CallGlobal. The queue's side is its hooks outbox (KeyHooks).
var hookKeys = []string{"subs", "seq", "ev", "pend", "dead", "deadev", "cur"}

type (
	// HookFanoutArgs are the arguments of hook_fanout.lua.
	HookFanoutArgs struct {
		ID         string           `arg:"id"`
		Queue      string           `arg:"queue"`
		MaxPending int              `arg:"max_pending"`
		Entries    []HookFanoutItem `arg:"n"`
	}
	// HookFanoutItem is one outbox entry of HookFanoutArgs.
	HookFanoutItem struct {
		SID  string `arg:"sid"`
		Job  string `arg:"job"`
		Body string `arg:"body"`
	}
	// HookFanoutReply is the reply of hook_fanout.lua.
	HookFanoutReply struct {
		Added   int64 `reply:"added"`
		Dropped int64 `reply:"dropped"`
	}
	// HookClaimArgs are the arguments of hook_claim.lua.
	HookClaimArgs struct {
		OffsetUs int64  `arg:"offset_us"`
		ID       string `arg:"id"`
		Scan     int    `arg:"scan"`
		Max      int    `arg:"max"`
		LeaseMs  int64  `arg:"lease_ms"`
	}
	// HookClaimReply is the reply of hook_claim.lua: Now -1 when the
	// subscription is gone; Rows three values a delivery (key, attempts,
	// body).
	HookClaimReply struct {
		Now     int64 `reply:"now"`
		Pending int64 `reply:"pending,opt"`
		Next    int64 `reply:"next,opt"`
		Rows    []any `reply:"rows,rest"`
	}
	// HookAckArgs are the arguments of hook_ack.lua.
	HookAckArgs struct {
		OffsetUs int64         `arg:"offset_us"`
		ID       string        `arg:"id"`
		MaxDead  int           `arg:"max_dead"`
		Acks     []HookAckItem `arg:"n"`
	}
	// HookAckItem is one attempt of HookAckArgs.
	HookAckItem struct {
		Key      string `arg:"key"`
		Attempts int    `arg:"attempts"`
		Outcome  string `arg:"outcome"` // "ok", "retry" or "dead"
		DelayMs  int64  `arg:"delay_ms"`
		Dead     string `arg:"dead"`
	}
	// HookRedriveArgs are the arguments of hook_redrive.lua.
	HookRedriveArgs struct {
		ID      string            `arg:"id"`
		Entries []HookRedriveItem `arg:"n"`
	}
	// HookRedriveItem is one dead delivery of HookRedriveArgs.
	HookRedriveItem struct {
		Key  string `arg:"key"`
		Job  string `arg:"job"`
		Body string `arg:"body"`
	}
	// HookPutArgs are the arguments of hook_put.lua.
	HookPutArgs struct {
		ID    string `arg:"id"`
		Value string `arg:"value"`
		Mode  string `arg:"mode"`
		Max   int    `arg:"max"`
	}
	// HookOutAckArgs are the arguments of hookack.lua.
	HookOutAckArgs struct {
		Entries []HookOutAckItem `arg:"n"`
	}
	// HookOutAckItem is one outbox entry of HookOutAckArgs.
	HookOutAckItem struct {
		SID string `arg:"sid"`
	}
)

// The declarations of the event webhook scripts.
var (
	HookFanout  = declareHook[HookFanoutArgs, HookFanoutReply]("hook_fanout")
	HookClaim   = declareHook[HookClaimArgs, HookClaimReply]("hook_claim")
	HookAck     = declareHook[HookAckArgs, Code]("hook_ack")
	HookRedrive = declareHook[HookRedriveArgs, Code]("hook_redrive")
	HookPut     = declareHook[HookPutArgs, Code]("hook_put")
	HookOutAck  = declare[HookOutAckArgs, Code]("hookack", KeyHooks)
)

func declareHook[P, R any](name string) *Op[P, R] {
	return declareSpec[P, R](scriptSpec{name: name, keys: hookKeys, global: true, common: "hook_common"})
}
