package queue

import (
	"context"
	"crypto/sha1" //nolint:gosec // G505: matches Redis's redis.sha1hex, an identity check, not a security one
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/internal/tracing"
	"go.opentelemetry.io/otel/trace"

	"github.com/redis/go-redis/v9"
)

// Workflows: the store's single-slot steps of package workflow.
//
// A workflow's nodes are jobs in their own queues, hence in other Cluster
// slots than the workflow's own hash (see workflowKeys), so no one script
// can release a node's children. Each step here is one script in one
// slot, and each is safe to run again, late, or by two processes at once;
// package workflow chains them:
//
//  1. A node's job is created "waiting" (wfadd.lua): in no list, claimed
//     by no one.
//  2. Whatever ends a node's job (complete, fail to the dead set, cancel,
//     the reclaim sweep) leaves, in the same script, an entry in its
//     queue's outbox (keyOutbox; wf_ended in common.lua) and marks the
//     outbox index (attention.go).
//  3. A releaser reads the outbox (ReadOutbox), records the end in the
//     slot of each workflow the entry names (its Refs: the job's own, and
//     the implicit workflows watching it, see AdoptJob; RecordNodeEnds:
//     the ends of one workflow in one call, each once, gated by the
//     node's outcome field), which answers what the children's jobs
//     need now; applies that in each child's slot
//     (ApplyNodeActions: a release moves a job from waiting to pending
//     only while it is waiting); and only then, every ref recorded, acks
//     the entry (AckOutbox). A crash anywhere leaves the entry, and
//     the next releaser does it all again: the record answers the same
//     actions, and the actions that were applied change nothing.

// MaxUpstreamBytes caps a workflow node's upstream: past it, the upstream
// holds its parents' job ids, queues, statuses and errors, but not their
// results and artifacts ("omitted": true; the children read them by job
// id).
const MaxUpstreamBytes = 4 << 20

// WorkflowScriptsBatch is the most node jobs a wfadd.lua or actions a
// wfnode.lua call takes.
const workflowBatch = MaxBatch

// PrepareNode validates job, a NewJob, as the job of node of workflow (as Enqueue
// would, but it takes no idempotency key) and gives it its id. Its
// RunAt or Delay is when it is released at the earliest (a delay counts
// from the workflow's enqueue).
func (in *inside) PrepareNode(job any, workflow, node string) (plumbing.PreparedNode, error) {
	c := (*Client)(in)
	nj, err := asNewJob(job)
	if err != nil {
		return plumbing.PreparedNode{}, err
	}
	if nj.IdempotencyKey != "" {
		return plumbing.PreparedNode{}, invalid("idempotency_key", "a workflow node's job takes none")
	}
	p, err := c.prepare(nj, c.clock.Now(), -1)
	if err != nil {
		return plumbing.PreparedNode{}, err
	}
	a := p.item
	return plumbing.PreparedNode{ID: p.job.ID, Queue: p.job.Queue, Labels: p.labels,
		Item: store.WFAddItem{ID: a.ID, Kind: a.Kind, Payload: a.Payload, Spec: a.Spec, When: a.When, ResultTTLMs: a.ResultTTLMs,
			Workflow: workflow + "|" + node + "|0", Labels: a.Labels, Trace: a.Trace, Flow: a.Flow}}, nil
}

// AddNodeJobs writes prepared node jobs, waiting, into their queues: one
// script call per queue and MaxBatch jobs. Safe to call again with the
// same nodes (a job written already is kept as it is). While tracing is
// on, each queue's jobs are written under the span "send <queue>", a
// child of ctx's, whose context the jobs given none store.
func (in *inside) AddNodeJobs(ctx context.Context, nodes []plumbing.PreparedNode) error {
	c := (*Client)(in)
	order, byQueue := groupBy(nodes, func(n plumbing.PreparedNode) string { return n.Queue })
	for _, q := range order {
		if err := c.register(ctx, q); err != nil {
			return err
		}
	}
	t, traced := tracing.Tracer()
	for _, q := range order {
		if !traced {
			if err := c.addNodeJobs(ctx, q, byQueue[q]); err != nil {
				return err
			}
			continue
		}
		ctx, span := tracing.Start(ctx, t, q, "send", tracing.OpSend, trace.SpanKindProducer, tracing.AttrBatchCount.Int(len(byQueue[q])))
		own := tracing.Format(span.SpanContext())
		ns := slices.Clone(byQueue[q])
		for i := range ns {
			if ns[i].Item.Trace == "" {
				ns[i].Item.Trace = own
			}
		}
		err := c.addNodeJobs(ctx, q, ns)
		tracing.End(span, err)
		if err != nil {
			return err
		}
	}
	return nil
}

// addNodeJobs writes ns, node jobs of queue q.
func (c *Client) addNodeJobs(ctx context.Context, q string, ns []plumbing.PreparedNode) error {
	for part := range slices.Chunk(ns, workflowBatch) {
		p := store.WFAddArgs{MaxSets: MaxLabelSets, Jobs: make([]store.WFAddItem, 0, len(part))}
		k := store.QueueKeys(c.ns, q)
		var sets jobSets
		for _, n := range part {
			p.Jobs = append(p.Jobs, n.Item)
			sets.add(k, n.Labels)
		}
		res, err := callCreating(ctx, c, store.WFAdd, q, k, sets, &p)
		if labels, over := setsOver(res); err == nil && over {
			err = tooManySets(q, labels, -1)
		}
		if err != nil {
			return fmt.Errorf("queue: adding workflow jobs to %s: %w", q, err)
		}
	}
	return nil
}

// MaxWatchers is the most implicit workflows (jobs enqueued with
// depends_on, see package workflow) that may wait for one job: AdoptJob
// refuses one more (ErrTooManyWatchers). Each is a ref in the job's record
// and in its outbox entry when it ends.
const MaxWatchers = 100

// ErrTooManyWatchers is answered when a job has MaxWatchers dependents
// already (AdoptJob). It is an ErrConflict.
var ErrTooManyWatchers = fmt.Errorf("%w: too many dependents", ErrConflict)

// AdoptJob makes the existing job queue/id a watched parent of the
// implicit workflow (wfadopt.lua): its ref (workflow, node) joins the
// job's watchers, so that its end is recorded in that workflow too (at
// once when it has ended already). A job may have many watchers, and be a
// node of a workflow of its own as well. Safe to call again (a second
// call changes nothing). It answers ErrNotFound for no such job, and
// ErrTooManyWatchers (an ErrConflict) when it has MaxWatchers already.
func (in *inside) AdoptJob(ctx context.Context, queue, id, workflow, node string) error {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	if err := names.ValidateID(id); err != nil {
		return err
	}
	res, err := call(ctx, c, store.WFAdopt, k, &store.WFAdoptArgs{ID: id, Workflow: workflow + "|" + node + "|0", MaxWatchers: MaxWatchers})
	if err != nil {
		return fmt.Errorf("queue: adopting %s/%s: %w", queue, id, err)
	}
	switch res.Code {
	case -1:
		return fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	case -2:
		return fmt.Errorf("%w: job %s/%s has %d dependents already, the cap (MaxWatchers)", ErrTooManyWatchers, queue, id, MaxWatchers)
	}
	return nil
}

// CreateWorkflow writes a workflow's graph (wf_create.lua). The caller
// validated it. policy is "cancel" or "continue". Safe to call again.
func (in *inside) CreateWorkflow(ctx context.Context, id, policy string, nodes []plumbing.NodeSpec) error {
	c := (*Client)(in)
	p := store.WFCreateArgs{ID: id, Policy: policy, UpstreamMax: MaxUpstreamBytes, Nodes: make([]store.WFCreateNode, 0, len(nodes))}
	for _, n := range nodes {
		ext := ""
		if n.External {
			ext = "1"
		}
		p.Nodes = append(p.Nodes, store.WFCreateNode{Name: n.Name, Job: n.Queue + "|" + n.JobID,
			Parents: strings.Join(n.Parents, ","), Children: strings.Join(n.Children, ","), External: ext})
	}
	if _, err := callWF(ctx, c, store.WFCreate, id, &p); err != nil {
		return fmt.Errorf("queue: creating workflow %s: %w", id, err)
	}
	return nil
}

// parseActions reads the actions in script's reply: groups of mode, node,
// job ("<queue>|<id>"), gen, upstream (see wf_plan in common.lua).
func parseActions(script string, res []any) ([]plumbing.NodeAction, error) {
	if len(res)%5 != 0 {
		return nil, &store.ReplyError{Script: script, Field: "actions", Reply: res, Want: "groups of 5"}
	}
	acts := make([]plumbing.NodeAction, 0, len(res)/5)
	for g := range slices.Chunk(res, 5) {
		var f [5]string
		for k, name := range []string{"mode", "node", "job", "gen", "upstream"} {
			if k == 3 {
				if n, ok := g[k].(int64); ok {
					f[k] = strconv.FormatInt(n, 10)
					continue
				}
			}
			var err error
			if f[k], err = store.Str(script, g, k, "action's "+name); err != nil {
				return nil, err
			}
		}
		gen, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, &store.ReplyError{Script: script, Field: "action's gen", Reply: g, Want: "a number"}
		}
		q, id, _ := strings.Cut(f[2], "|")
		acts = append(acts, plumbing.NodeAction{Mode: f[0], Node: f[1], Queue: q, JobID: id, Gen: gen, Upstream: f[4]})
	}
	return acts, nil
}

// wfStep runs op, a script that answers { code, actions... }, on workflow
// id.
func wfStep[P any](ctx context.Context, c *Client, what string, op *store.Op[P, store.CodeRows], id string, p *P) (plumbing.WorkflowStep, error) {
	res, err := callWF(ctx, c, op, id, p)
	if err != nil {
		return plumbing.WorkflowStep{}, fmt.Errorf("queue: %s workflow %s: %w", what, id, err)
	}
	acts, err := parseActions(op.Name(), res.Rows)
	if err != nil {
		return plumbing.WorkflowStep{}, fmt.Errorf("queue: %s workflow %s: %w", what, id, err)
	}
	return plumbing.WorkflowStep{Code: int(res.Code), Actions: acts}, nil
}

// StartWorkflow starts a workflow whose jobs all exist (wf_start.lua):
// Code -1 no such workflow, 0 canceled before it started, 1 started.
func (in *inside) StartWorkflow(ctx context.Context, id string) (plumbing.WorkflowStep, error) {
	c := (*Client)(in)
	return wfStep(ctx, c, "starting", store.WFStart, id, &store.None{})
}

// PlanWorkflow answers what every node's job needs now (wf_plan.lua).
func (in *inside) PlanWorkflow(ctx context.Context, id string) (plumbing.WorkflowStep, error) {
	c := (*Client)(in)
	return wfStep(ctx, c, "planning", store.WFPlan, id, &store.None{})
}

// CancelWorkflow cancels a workflow (wf_cancel.lua): Code -1 no such
// workflow, 0 it had ended, 1 canceled.
func (in *inside) CancelWorkflow(ctx context.Context, id string, retention time.Duration) (plumbing.WorkflowStep, error) {
	c := (*Client)(in)
	return wfStep(ctx, c, "canceling", store.WFCancel, id, &store.WFCancelArgs{RetentionMs: retention.Milliseconds()})
}

// RetryWorkflow retries a workflow's dead and canceled nodes
// (wf_retry.lua): Code -1 no such workflow, 0 nothing to retry, 1 retried.
func (in *inside) RetryWorkflow(ctx context.Context, id string) (plumbing.WorkflowStep, error) {
	c := (*Client)(in)
	return wfStep(ctx, c, "retrying", store.WFRetry, id, &store.None{})
}

// RecordNodeEnds records 1 to MaxBatch ends of nodes of workflow id in
// one call (wf_record.lua), each once: a rerun, or an end recorded
// before, changes nothing. It answers a code per end, in order (-1 no
// such workflow or node, 2 a stale entry, 1 recorded, now or before, 3
// the same and the end that ended the workflow), the workflow's end when
// an end is coded 3, and what the children of the ends coded 1 or 3 need
// now, each child planned once, after all the ends were recorded.
func (in *inside) RecordNodeEnds(ctx context.Context, id string, ends []plumbing.NodeEnd, retention time.Duration) ([]int, *plumbing.WorkflowEnd, []plumbing.NodeAction, error) {
	c := (*Client)(in)
	if len(ends) == 0 || len(ends) > workflowBatch {
		return nil, nil, nil, invalid("ends", "a batch holds 1 to %d, got %d", workflowBatch, len(ends))
	}
	p := store.WFRecordArgs{RetentionMs: retention.Milliseconds(), Ends: make([]store.WFRecordItem, 0, len(ends))}
	for _, e := range ends {
		p.Ends = append(p.Ends, store.WFRecordItem{Node: e.Node, Gen: e.Gen, Outcome: e.Outcome, Up: string(e.Up), Brief: string(e.Brief)})
	}
	res, err := callWF(ctx, c, store.WFRecord, id, &p)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("queue: recording in workflow %s: %w", id, err)
	}
	if len(res.Rows) < len(ends)+1 {
		return nil, nil, nil, fmt.Errorf("queue: recording in workflow %s: %w", id, &store.ReplyError{Script: "wf_record", Reply: res.Rows, Want: "a code an end, and the end"})
	}
	codes := make([]int, len(ends))
	for i := range ends {
		code, err := store.Int("wf_record", res.Rows, i, "code")
		if err != nil {
			return nil, nil, nil, fmt.Errorf("queue: recording in workflow %s: %w", id, err)
		}
		codes[i] = int(code)
	}
	ended, err := store.Str("wf_record", res.Rows, len(ends), "ended")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("queue: recording in workflow %s: %w", id, err)
	}
	var end *plumbing.WorkflowEnd
	if ended != "" {
		status, ms, _ := strings.Cut(ended, "|")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || status == "" {
			return nil, nil, nil, fmt.Errorf("queue: recording in workflow %s: %w", id, &store.ReplyError{Script: "wf_record", Field: "ended", Reply: res.Rows, Want: "<status>|<ms>"})
		}
		end = &plumbing.WorkflowEnd{ID: id, Status: status, EndedAt: time.UnixMilli(n).UTC()}
	}
	acts, err := parseActions("wf_record", res.Rows[len(ends)+1:])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("queue: recording in workflow %s: %w", id, err)
	}
	return codes, end, acts, nil
}

// ApplyNodeActions applies acts in their jobs' slots (wfnode.lua), in
// order within a queue: one script call per queue and MaxBatch actions.
// A job they cancel is kept at least keep (its workflow's retention, so
// that a retry finds it), and at least Config.Retention. It answers each
// action's result, in the order of acts.
func (in *inside) ApplyNodeActions(ctx context.Context, acts []plumbing.NodeAction, keep time.Duration) ([]plumbing.NodeResult, error) {
	c := (*Client)(in)
	out := make([]plumbing.NodeResult, len(acts))
	for i, a := range acts {
		if err := names.ValidateQueue(a.Queue); err != nil {
			return nil, err
		}
		if err := names.ValidateID(a.JobID); err != nil {
			return nil, err
		}
		out[i].Action = a
	}
	order, byQueue := groupBy(indexes(len(acts)), func(i int) string { return acts[i].Queue })
	for _, q := range order {
		idx := byQueue[q]
		for part := range slices.Chunk(idx, workflowBatch) {
			p := store.WFNodeArgs{RetentionMs: max(c.cfg.Retention.Milliseconds(), keep.Milliseconds(), 0), TombMs: c.tombMs(),
				Nodes: make([]store.WFNodeItem, 0, len(part))}
			for _, i := range part {
				a := acts[i]
				p.Nodes = append(p.Nodes, store.WFNodeItem{Mode: a.Mode, ID: a.JobID, Gen: a.Gen, Upstream: a.Upstream})
			}
			res, err := call(ctx, c, store.WFNode, store.QueueKeys(c.ns, q), &p)
			if err != nil {
				return nil, fmt.Errorf("queue: workflow jobs of %s: %w", q, err)
			}
			if len(res.Rows) != 2*len(part) {
				return nil, fmt.Errorf("queue: workflow jobs of %s: %w", q, &store.ReplyError{Script: "wfnode", Reply: res.Rows, Want: "a code and a status a node"})
			}
			for n, i := range part {
				code, err := store.Int("wfnode", res.Rows, 2*n, "code")
				if err != nil {
					return nil, fmt.Errorf("queue: workflow jobs of %s: %w", q, err)
				}
				st, err := store.Str("wfnode", res.Rows, 2*n+1, "status")
				if err != nil {
					return nil, fmt.Errorf("queue: workflow jobs of %s: %w", q, err)
				}
				out[i].Code, out[i].Status = int(code), st
			}
		}
	}
	return out, nil
}

// ReadOutbox reads a page of queue's outbox from cursor ("0" first),
// answering the entries, the next cursor ("0" at the end) and the Redis
// time of the read, for ParkOutbox.
func (in *inside) ReadOutbox(ctx context.Context, queue, cursor string, count int) ([]plumbing.OutboxEntry, string, int64, error) {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, "", 0, err
	}
	res, err := call(ctx, c, store.WFRead, k, &store.WFReadArgs{Cursor: cursor, Count: count})
	if err != nil {
		return nil, "", 0, fmt.Errorf("queue: reading the outbox of %s: %w", queue, err)
	}
	if len(res.Rows)%2 != 0 {
		return nil, "", 0, fmt.Errorf("queue: reading the outbox of %s: %w", queue, &store.ReplyError{Script: "wfread", Reply: res.Rows, Want: "pairs of id and entry"})
	}
	seq, next := res.NowUs, res.Cursor
	es := make([]plumbing.OutboxEntry, 0, len(res.Rows)/2)
	for i := 0; i < len(res.Rows); i += 2 {
		id, err := store.Str("wfread", res.Rows, i, "id")
		if err != nil {
			return nil, "", 0, fmt.Errorf("queue: reading the outbox of %s: %w", queue, err)
		}
		raw, err := store.Str("wfread", res.Rows, i+1, "entry")
		if err != nil {
			return nil, "", 0, fmt.Errorf("queue: reading the outbox of %s: %w", queue, err)
		}
		e, ok := parseOutboxEntry(queue, id, raw)
		if !ok {
			continue // not ours to read: left for a newer version
		}
		es = append(es, e)
	}
	return es, next, seq, nil
}

// parseOutboxEntry reads "<refs>\0outcome\0result\0artifacts\0error",
// the refs "<wf>|<node>|<gen>" joined by "," (one, in an entry written
// before watchers).
func parseOutboxEntry(queue, id, raw string) (plumbing.OutboxEntry, bool) {
	f := strings.SplitN(raw, "\x00", 5)
	if len(f) != 5 {
		return plumbing.OutboxEntry{}, false
	}
	var refs []plumbing.Ref
	for _, s := range strings.Split(f[0], ",") {
		ref := parseWorkflowRef(s)
		if ref == nil {
			return plumbing.OutboxEntry{}, false
		}
		refs = append(refs, plumbing.Ref{ID: ref.ID, Node: ref.Node, Gen: ref.Gen})
	}
	sum := sha1.Sum([]byte(raw)) //nolint:gosec // G401: see the import
	e := plumbing.OutboxEntry{Queue: queue, JobID: id, Refs: refs, Outcome: f[1], Error: f[4], Sum: hex.EncodeToString(sum[:])}
	if f[2] != "" {
		e.Result = json.RawMessage(f[2])
	}
	if f[3] != "" {
		e.Artifacts = json.RawMessage(f[3])
	}
	return e, true
}

// AckOutbox deletes handled entries of queue's outbox, each only if it is
// still the entry read, and answers how many went. An entry deleted now
// writes the workflow.ended events of its Ended to queue's hooks outbox
// (while the queue's setting "hooks" is on), in the same script.
func (in *inside) AckOutbox(ctx context.Context, queue string, es []plumbing.OutboxEntry) (int, error) {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return 0, err
	}
	acked := 0
	for part := range slices.Chunk(es, workflowBatch) {
		p := store.WFAckArgs{Entries: make([]store.WFAckItem, 0, len(part))}
		for _, e := range part {
			ended := make([]string, len(e.Ended))
			for i, w := range e.Ended {
				ended[i] = w.ID + "|" + w.Status + "|" + strconv.FormatInt(w.EndedAt.UnixMilli(), 10)
			}
			p.Entries = append(p.Entries, store.WFAckItem{ID: e.JobID, Entry: e.Sum, Ended: strings.Join(ended, ",")})
		}
		n, err := call(ctx, c, store.WFAck, k, &p)
		if err != nil {
			return acked, fmt.Errorf("queue: acking the outbox of %s: %w", queue, err)
		}
		acked += int(n.Code)
	}
	return acked, nil
}

// OutboxDue answers up to limit queues the outbox index names as having
// entries by now (see attention.go; it may name a queue whose outbox is
// empty: a read finds out and parks it).
func (in *inside) OutboxDue(ctx context.Context, limit int) ([]string, error) {
	c := (*Client)(in)
	// An entry is work due at once: every queue in the index is read, in
	// the order of its oldest mark.
	qs, err := c.rdb.ZRange(ctx, store.WorkflowAttentionKeys(c.ns).Outbox, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, wrapRedis(err)
	}
	out := qs[:0]
	for _, q := range qs {
		if names.ValidateQueue(q) == nil {
			out = append(out, q)
		}
	}
	return out, nil
}

// ParkOutbox takes queue out of the outbox index, found empty by a read at
// seq, unless a later mark was applied.
func (in *inside) ParkOutbox(ctx context.Context, queue string, seq int64) error {
	c := (*Client)(in)
	w := store.WorkflowAttentionKeys(c.ns)
	return c.park(ctx, w.Outbox, w.OutboxSeq, queue, 0, seq)
}

// OutboxQueues answers those of queues whose outbox holds entries, in
// one pipeline: a releaser's reconcile, for marks that were lost.
func (in *inside) OutboxQueues(ctx context.Context, queues []string) ([]string, error) {
	c := (*Client)(in)
	if len(queues) == 0 {
		return nil, nil
	}
	pipe := c.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		k, err := c.keysFor(q)
		if err != nil {
			return nil, err
		}
		lens[i] = pipe.HLen(ctx, k.Outbox)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapRedis(err)
	}
	var out []string
	for i, l := range lens {
		if l.Val() > store.Sentinels {
			out = append(out, queues[i])
		}
	}
	return out, nil
}

// ReleaserNudges delivers the name of a queue when a script of this
// client left an outbox entry in it, so that a releaser in this process
// reads it at once (other processes' releasers find it in the outbox
// index). The channel closes when ctx ends.
func (in *inside) ReleaserNudges(ctx context.Context) <-chan string {
	c := (*Client)(in)
	ch := make(chan string, 256)
	c.mu.Lock()
	if c.wfListeners == nil {
		c.wfListeners = map[chan string]struct{}{}
	}
	c.wfListeners[ch] = struct{}{}
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		delete(c.wfListeners, ch)
		close(ch)
		c.mu.Unlock()
	})
	return ch
}

func (c *Client) nudgeReleasers(queue string) {
	c.mu.Lock()
	for ch := range c.wfListeners {
		select {
		case ch <- queue:
		default:
		}
	}
	c.mu.Unlock()
}

// ReadWorkflow reads a workflow's hash: nil when there is none (never
// made, or expired).
func (in *inside) ReadWorkflow(ctx context.Context, id string) (*plumbing.WorkflowRecord, error) {
	c := (*Client)(in)
	h, err := c.rdb.HGetAll(ctx, store.WorkflowKeys(c.ns, id).WF).Result()
	if err != nil {
		return nil, wrapRedis(err)
	}
	if h[store.WFMetaID] == "" {
		return nil, nil
	}
	w := &plumbing.WorkflowRecord{ID: h[store.WFMetaID], Policy: h[store.WFMetaPolicy], Gen: int64(atoi(h[store.WFMetaGen])), Started: h[store.WFMetaStarted] == "1",
		Ended: atoi(h[store.WFMetaEnded]), CreatedAt: msTime(h[store.WFMetaCreated]), EndedAt: msTime(h[store.WFMetaEndedAt]),
		CanceledAt: msTime(h[store.WFMetaCanceled])}
	list := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for _, n := range list(h[store.WFMetaNames]) {
		f := func(prefix string) string { return h[store.WFNodeField(prefix, n)] }
		q, jid, _ := strings.Cut(f(store.WFNodeJob), "|")
		w.Nodes = append(w.Nodes, plumbing.WorkflowNodeRecord{Name: n, Queue: q, JobID: jid, Parents: list(f(store.WFNodeParents)),
			Children: list(f(store.WFNodeChildren)), Left: atoi(f(store.WFNodeLeft)), Failed: atoi(f(store.WFNodeFailed)),
			Outcome: f(store.WFNodeOutcome), Gen: int64(atoi(f(store.WFNodeGen)))})
	}
	return w, nil
}

// JobRef names a job: for Jobs, and for the parents a job depends on
// (workflow.Client.EnqueueAfter).
type JobRef struct{ Queue, ID string }

// Jobs reads jobs' records in one pipeline (nil for a job that is gone):
// status, attempts, times, last error, workflow and watchers, and a
// payload kept in the record; not the result, the upstream, or a payload
// kept in the data hash, which a workflow's view and a parent's check do
// not show (an upstream may be megabytes). No claim token is shown.
func (c *Client) Jobs(ctx context.Context, refs []JobRef) ([]*Job, error) {
	pipe := c.rdb.Pipeline()
	recs := make([]*redis.StringCmd, len(refs))
	for i, r := range refs {
		k, err := c.keysFor(r.Queue)
		if err != nil {
			return nil, err
		}
		if err := names.ValidateID(r.ID); err != nil {
			return nil, err
		}
		recs[i] = pipe.HGet(ctx, k.Jobs, r.ID)
	}
	if len(refs) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, wrapRedis(err)
		}
	}
	out := make([]*Job, len(refs))
	for i, r := range refs {
		j, err := jobFromRecord(r.Queue, r.ID, recs[i].Val(), "", "")
		if err != nil {
			continue
		}
		j.Token = ""
		out[i] = j
	}
	return out, nil
}

// The recent workflows, and the workflows whose multi-step change is
// under way (see wfAttnKeys.dirty).

// AddRecentWorkflow adds id to the list of recent workflows, kept to the
// newest keep.
func (in *inside) AddRecentWorkflow(ctx context.Context, id string, at time.Time, keep int) error {
	c := (*Client)(in)
	pipe := c.rdb.Pipeline()
	pipe.ZAdd(ctx, store.WorkflowsKey(c.ns), redis.Z{Score: float64(at.UnixMilli()), Member: id})
	pipe.ZRemRangeByRank(ctx, store.WorkflowsKey(c.ns), 0, int64(-keep-1))
	_, err := pipe.Exec(ctx)
	return wrapRedis(err)
}

// RecentWorkflows answers the ids of up to limit recent workflows, newest
// first.
func (in *inside) RecentWorkflows(ctx context.Context, limit int) ([]string, error) {
	c := (*Client)(in)
	ids, err := c.rdb.ZRevRange(ctx, store.WorkflowsKey(c.ns), 0, int64(limit-1)).Result()
	return ids, wrapRedis(err)
}

// ForgetRecentWorkflows takes ids (workflows gone) out of the list.
func (in *inside) ForgetRecentWorkflows(ctx context.Context, ids []string) error {
	c := (*Client)(in)
	if len(ids) == 0 {
		return nil
	}
	ms := make([]any, len(ids))
	for i, id := range ids {
		ms[i] = id
	}
	return wrapRedis(c.rdb.ZRem(ctx, store.WorkflowsKey(c.ns), ms...).Err())
}

// MarkWorkflowDirty notes that a multi-step change of workflow id begins
// (creation, cancel, retry), and answers the mark, for
// ClearWorkflowDirty when it is done. A releaser finishes the change
// when the mark is older than its grace (DirtyWorkflows).
func (in *inside) MarkWorkflowDirty(ctx context.Context, id, what string) (string, error) {
	c := (*Client)(in)
	m := id + "|" + what + "|" + newToken()[:8]
	err := c.rdb.ZAdd(ctx, store.WorkflowAttentionKeys(c.ns).Dirty, redis.Z{Score: float64(c.redisNow().UnixMilli()), Member: m}).Err()
	return m, wrapRedis(err)
}

// ClearWorkflowDirty drops a mark of MarkWorkflowDirty.
func (in *inside) ClearWorkflowDirty(ctx context.Context, mark string) error {
	c := (*Client)(in)
	return wrapRedis(c.rdb.ZRem(ctx, store.WorkflowAttentionKeys(c.ns).Dirty, mark).Err())
}

// DirtyWorkflows answers up to limit marks of MarkWorkflowDirty older than
// grace: the workflow's id, what began, and the mark.
func (in *inside) DirtyWorkflows(ctx context.Context, grace time.Duration, limit int) (ids, whats, marks []string, err error) {
	c := (*Client)(in)
	by := c.redisNow().Add(-grace).UnixMilli()
	ms, err := c.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: store.WorkflowAttentionKeys(c.ns).Dirty, ByScore: true, Start: "-inf",
		Stop: strconv.FormatInt(by, 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, nil, nil, wrapRedis(err)
	}
	for _, m := range ms {
		parts := strings.Split(m, "|")
		if len(parts) != 3 {
			continue
		}
		ids, whats, marks = append(ids, parts[0]), append(whats, parts[1]), append(marks, m)
	}
	return ids, whats, marks, nil
}
