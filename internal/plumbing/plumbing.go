// Package plumbing is the side of a queue.Client that chronoq's own
// packages use and its users do not: the single-slot steps of workflows
// (package workflow), the engine, the client's clock, Redis and
// namespace and the Redis clock (cron, registry, api, chronoq serve), a
// push queue's settings and notes (dispatch), the claims and waits of a
// worker's loop, the chaos battery's dump. Keeping them here keeps package
// queue's documented surface to what producers, workers and operators
// call.
//
// A *queue.Client is handed over by [Of], which package queue fills in
// when it is loaded: queue imports this package, so this package cannot
// name queue's types, and the few steps that take or give a job say so
// in their comment. The model is river's riverdriver: one narrow seam
// between the public client and the engine.
package plumbing

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/store"
)

// Client is what chronoq's own packages call on a *queue.Client beyond
// its public methods.
type Client interface {
	Workflows
	Push
	Gauges

	// Engine is the client's engine: its Redis, namespace, scripts and
	// Redis clock.
	Engine() *store.Store
	// Clock is the client's clock (queue.Config.Clock, its default
	// filled in), for the code built on the client (a worker, a cron
	// scheduler, the API) to sleep by the same one.
	Clock() clockwork.Clock
	// Redis is the client's Redis connection (queue.Config.Redis).
	Redis() redis.UniversalClient
	// Namespace is the prefix of every key of the client
	// (queue.Config.Namespace).
	Namespace() string
	// ClaimNext is queue.Client.Claim (o is a queue.ClaimOptions, jobs a
	// []*queue.Job), and also answers a time to wake at: when the
	// queue's earliest scheduled job is due, as the claim saw it before
	// any wait. A worker that has run out of jobs sleeps until then and
	// claims again: the claim promotes the job itself. Of the ClaimNext
	// calls that see the same earliest due time, only the first is
	// answered it, so that of many idle workers one wakes for each due
	// time; the others get the zero time, as when nothing is scheduled
	// or the queue is paused. With ahead (at most queue.MaxAhead), a
	// claim that takes due jobs straight from the scheduled set also takes
	// those due within ahead: starts[i], an instant of Clock, is when
	// jobs[i] may start (zero: at once; starts is nil when all may).
	ClaimNext(ctx context.Context, queue string, o any, ahead time.Duration) (jobs any, starts []time.Time, next time.Time, err error)
	// Dump reads the whole of queue (a *queue.Dump): every job and every
	// entry of its sets and lists. It is O(jobs), for the chaos
	// battery's checker and tests, not for serving requests; it reads
	// without a script, so on a queue in use its parts may be of
	// slightly different moments.
	Dump(ctx context.Context, queue string) (any, error)
	// WaitClaimable waits up to wait for a job of queue that a claimer
	// with labels could take, without claiming it (a worker's idle
	// wait), on the client's wake hub as a claim's wait is: true when
	// there may be one now.
	WaitClaimable(ctx context.Context, queue string, wait time.Duration, labels []string) (bool, error)
	// WaitPending is WaitClaimable for a claimer without labels.
	WaitPending(ctx context.Context, queue string, wait time.Duration) (bool, error)
	// LabelSets answers the distinct sets of labels the jobs of queue
	// have required, in the order the queue first saw them (at most
	// queue.MaxLabelSets).
	LabelSets(ctx context.Context, queue string) ([][]string, error)
}

// Push is what package dispatch keeps in a queue: its settings (the push
// target, queue.SettingPush) and a claimed job's notes (its delivery
// attempts, read with Notes).
type Push interface {
	// Settings reads the settings of queue that are set: a field absent
	// from the map is unset. A queue that does not exist has none.
	Settings(ctx context.Context, queue string) (map[string]string, error)
	// SetSettings writes settings of queue, creating the queue when it
	// does not exist (within queue.Config.MaxQueues); a value "" unsets
	// its field. One script: the fields change together.
	SetSettings(ctx context.Context, queue string, set map[string]string) error
	// SettingsOf reads one setting of many queues in one round trip: the
	// value of field for each queue of queues that has it set.
	SettingsOf(ctx context.Context, field string, queues []string) (map[string]string, error)
	// Note appends a line (no newline in it) to a claimed job's notes,
	// the last queue.MaxNotes of which are kept with the job. It answers
	// queue.ErrLeaseLost, and writes nothing, when token is not the
	// job's current claim.
	Note(ctx context.Context, queue, id, token, line string) error
	// NoteMany is Note for up to queue.MaxBatch jobs of one queue in one
	// script call. err is for the call as a whole; otherwise errs[i] is
	// the answer for notes[i] (nil, queue.ErrLeaseLost or
	// queue.ErrNotFound).
	NoteMany(ctx context.Context, queue string, notes []NoteItem) (errs []error, err error)
	// Notes reads a job's notes, oldest first (none: nil).
	Notes(ctx context.Context, queue, id string) ([]string, error)
}

// Gauges are what chronoq serve's /metrics reads of a client besides
// the queues' own figures.
type Gauges interface {
	// RedisClock is the client's estimate of Redis's clock against its
	// own (store.Estimate): from the last script that answered Redis's
	// time or the last MeasureRedisClock. GET /v1/status and the gauge
	// chronoq_redis_clock_offset_seconds show it.
	RedisClock() store.Estimate
	// MeasureRedisClock measures the distance to Redis's clock now, with
	// one TIME, and answers the estimate (queue.Client.RedisClock).
	MeasureRedisClock(ctx context.Context) (store.Estimate, error)
	// LimitWait is the time the client's claims and waits have spent
	// held back by queues' limits, over its life.
	LimitWait() time.Duration
	// MarkFailures is how many times the client could not lower an
	// attention index after a change (Redis unreachable at that
	// instant).
	MarkFailures() int64
	// Waiters counts the claims (and waits) of the client that wait in
	// its wake hubs now, all queues together.
	Waiters() int
	// JobWaiters counts the queue.Client.WaitEnded calls of the client
	// that wait now, all queues together.
	JobWaiters() int
}

// NoteItem is one line for a claimed job's notes (see Push.Note).
type NoteItem struct {
	ID, Token, Line string
}

// Workflows are the single-slot steps of package workflow (see
// queue/workflow.go for how they chain).
type Workflows interface {
	// PrepareNode validates nj, a queue.NewJob, as the job of node of
	// workflow (as Enqueue would, but it takes no idempotency key) and
	// gives it its id. Its RunAt or Delay is when it is released at the
	// earliest (a delay counts from the workflow's enqueue).
	PrepareNode(nj any, workflow, node string) (PreparedNode, error)
	// AddNodeJobs writes prepared node jobs, waiting, into their queues:
	// one script call per queue and MaxBatch jobs. Safe to call again
	// with the same nodes (a job written already is kept as it is).
	AddNodeJobs(ctx context.Context, nodes []PreparedNode) error
	// AdoptJob makes the existing job queue/id a watched parent of the
	// implicit workflow (wfadopt.lua): its ref (workflow, node) joins
	// the job's watchers, so that its end is recorded in that workflow
	// too (at once when it has ended already). Safe to call again. It
	// answers queue.ErrNotFound for no such job, and
	// queue.ErrTooManyWatchers when it has queue.MaxWatchers already.
	AdoptJob(ctx context.Context, queue, id, workflow, node string) error
	// CreateWorkflow writes a workflow's graph (wf_create.lua). The
	// caller validated it. policy is "cancel" or "continue". Safe to
	// call again.
	CreateWorkflow(ctx context.Context, id, policy string, nodes []NodeSpec) error
	// StartWorkflow starts a workflow whose jobs all exist
	// (wf_start.lua): Code -1 no such workflow, 0 canceled before it
	// started, 1 started.
	StartWorkflow(ctx context.Context, id string) (WorkflowStep, error)
	// PlanWorkflow answers what every node's job needs now
	// (wf_plan.lua).
	PlanWorkflow(ctx context.Context, id string) (WorkflowStep, error)
	// CancelWorkflow cancels a workflow (wf_cancel.lua): Code -1 no such
	// workflow, 0 it had ended, 1 canceled.
	CancelWorkflow(ctx context.Context, id string, retention time.Duration) (WorkflowStep, error)
	// RetryWorkflow retries a workflow's dead and canceled nodes
	// (wf_retry.lua): Code -1 no such workflow, 0 nothing to retry, 1
	// retried.
	RetryWorkflow(ctx context.Context, id string) (WorkflowStep, error)
	// RecordNodeEnds records 1 to MaxBatch ends of nodes of workflow id
	// in one call (wf_record.lua), each once: a rerun, or an end
	// recorded before, changes nothing. It answers a code per end, in
	// order (-1 no such workflow or node, 2 a stale entry, 1 recorded,
	// now or before, 3 the same and the end that ended the workflow, at
	// most one), the workflow's end when an end is coded 3 (nil
	// otherwise), and what the children of the ends coded 1 or 3 need
	// now, each child planned once, after all the ends were recorded.
	RecordNodeEnds(ctx context.Context, id string, ends []NodeEnd, retention time.Duration) ([]int, *WorkflowEnd, []NodeAction, error)
	// ApplyNodeActions applies acts in their jobs' slots (wfnode.lua),
	// in order within a queue: one script call per queue and MaxBatch
	// actions. A job they cancel is kept at least keep (its workflow's
	// retention, so that a retry finds it), and at least the client's
	// Retention. It answers each action's result, in the order of acts.
	ApplyNodeActions(ctx context.Context, acts []NodeAction, keep time.Duration) ([]NodeResult, error)
	// ReadOutbox reads a page of queue's outbox from cursor ("0" first),
	// answering the entries, the next cursor ("0" at the end) and the
	// Redis time of the read, for ParkOutbox.
	ReadOutbox(ctx context.Context, queue, cursor string, count int) ([]OutboxEntry, string, int64, error)
	// AckOutbox deletes handled entries of queue's outbox, each only if
	// it is still the entry read, and answers how many went.
	AckOutbox(ctx context.Context, queue string, es []OutboxEntry) (int, error)
	// OutboxDue answers up to limit queues the outbox index names as
	// having entries by now (it may name a queue whose outbox is empty:
	// a read finds out and parks it).
	OutboxDue(ctx context.Context, limit int) ([]string, error)
	// ParkOutbox takes queue out of the outbox index, found empty by a
	// read at seq, unless a later mark was applied.
	ParkOutbox(ctx context.Context, queue string, seq int64) error
	// OutboxQueues answers those of queues whose outbox holds entries,
	// in one pipeline: a releaser's reconcile, for marks that were lost.
	OutboxQueues(ctx context.Context, queues []string) ([]string, error)
	// ReleaserNudges delivers the name of a queue when a script of this
	// client left an outbox entry in it, so that a releaser in this
	// process reads it at once (other processes' releasers find it in
	// the outbox index). The channel closes when ctx ends.
	ReleaserNudges(ctx context.Context) <-chan string
	// ReadWorkflow reads a workflow's hash: nil when there is none
	// (never made, or expired).
	ReadWorkflow(ctx context.Context, id string) (*WorkflowRecord, error)
	// AddRecentWorkflow adds id to the list of recent workflows, kept to
	// the newest keep.
	AddRecentWorkflow(ctx context.Context, id string, at time.Time, keep int) error
	// RecentWorkflows answers the ids of up to limit recent workflows,
	// newest first.
	RecentWorkflows(ctx context.Context, limit int) ([]string, error)
	// ForgetRecentWorkflows takes ids (workflows gone) out of the list.
	ForgetRecentWorkflows(ctx context.Context, ids []string) error
	// MarkWorkflowDirty notes that a multi-step change of workflow id
	// begins (creation, cancel, retry), and answers the mark, for
	// ClearWorkflowDirty when it is done. A releaser finishes the change
	// when the mark is older than its grace (DirtyWorkflows).
	MarkWorkflowDirty(ctx context.Context, id, what string) (string, error)
	// ClearWorkflowDirty drops a mark of MarkWorkflowDirty.
	ClearWorkflowDirty(ctx context.Context, mark string) error
	// DirtyWorkflows answers up to limit marks of MarkWorkflowDirty
	// older than grace: the workflow's id, what began, and the mark.
	DirtyWorkflows(ctx context.Context, grace time.Duration, limit int) (ids, whats, marks []string, err error)
}

var of func(any) Client

// Register is called once, by package queue when it is loaded, with the
// function that answers a *queue.Client's plumbing.
func Register(f func(any) Client) { of = f }

// Of answers the plumbing of c, a *queue.Client (anything else is a
// programming error, and panics).
func Of(c any) Client { return of(c) }

// NodeAction is one step of a workflow node's job, decided in the
// workflow's slot and applied in the job's (see wfnode.lua).
type NodeAction struct {
	Mode     string // "release", "cancel", "abort" or "rearm"
	Node     string
	Queue    string
	JobID    string
	Gen      int64
	Upstream string // a release's upstream (JSON), "" for none
}

// NodeResult is how a NodeAction went: Code 1 applied, 0 not applicable
// now (Status is the job's, a queue.Status), -1 no such job.
type NodeResult struct {
	Action NodeAction
	Code   int
	Status string
}

// OutboxEntry is a workflow node's job that ended, as its queue's outbox
// holds it until a releaser acks it.
type OutboxEntry struct {
	Queue, JobID string
	// Refs are the workflow nodes the end is recorded in: the job's own
	// workflow's first (when it is a node of one), then those of the
	// implicit workflows watching it (AdoptJob). An entry is acked only
	// once it is recorded in each (each record is idempotent).
	Refs      []Ref
	Outcome   string // a queue.Status: completed, dead or canceled
	Result    json.RawMessage
	Artifacts json.RawMessage
	Error     string
	Sum       string // SHA1 of the entry as read, for its ack
	// Ended are the workflows this end ended (a code 3 of
	// RecordNodeEnds), set by the releaser: the ack (AckOutbox) writes
	// their workflow.ended events to the queue's hooks outbox.
	Ended []WorkflowEnd
}

// WorkflowEnd is a workflow that ended: its id, its status ("completed",
// "failed" or "canceled", as package workflow's Status) and when.
type WorkflowEnd struct {
	ID, Status string
	EndedAt    time.Time
}

// Ref names a workflow node: the workflow's id, the node, and the
// workflow's generation (its retries) when the ref was written.
type Ref struct {
	ID, Node string
	Gen      int64
}

// NodeSpec is one node of a workflow's graph as the store keeps it.
type NodeSpec struct {
	Name, Queue, JobID string
	Parents, Children  []string
	// External: a job that existed before (AdoptJob): only its ends are
	// recorded.
	External bool
}

// PreparedNode is a workflow node's job, validated and given its id, for
// AddNodeJobs.
type PreparedNode struct {
	ID, Queue string
	Labels    string // the job's labels, canonical and joined ("" none)
	Item      store.WFAddItem
}

// WorkflowStep answers a step of a workflow's slot: Code as the script
// answered it (see its file), and what the nodes' jobs need now.
type WorkflowStep struct {
	Code    int
	Actions []NodeAction
}

// NodeEnd is one end of a node's job to record in its workflow (see
// RecordNodeEnds): an outbox entry's, for one of its refs.
type NodeEnd struct {
	Node    string
	Gen     int64
	Outcome string // a queue.Status: completed, dead or canceled
	// Up is what the node's children receive of it (JSON), Brief the same
	// without its result and artifacts (see queue.MaxUpstreamBytes).
	Up, Brief []byte
}

// WorkflowRecord is a workflow's hash as the store keeps it.
type WorkflowRecord struct {
	ID         string
	Policy     string // "cancel" or "continue"
	Gen        int64  // retries so far
	Started    bool   // every node's job exists, and releases have begun
	Ended      int    // nodes whose outcome is recorded
	CreatedAt  time.Time
	EndedAt    time.Time // when its last node's end was recorded
	CanceledAt time.Time
	Nodes      []WorkflowNodeRecord // in the order given at enqueue
}

// WorkflowNodeRecord is one node of a WorkflowRecord.
type WorkflowNodeRecord struct {
	Name, Queue, JobID string
	Parents, Children  []string
	Left, Failed       int    // parents not ended; parents dead or canceled
	Outcome            string // a queue.Status, "" until its end is recorded
	Gen                int64
}
