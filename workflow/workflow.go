// Package workflow runs graphs of jobs: each node a job in a queue of its
// own choosing, run when its parents have ended, with their results and
// artifacts (its "upstream").
//
// It exists apart from package queue because a workflow spans queues, and
// so Redis Cluster slots: package queue keeps every change of one queue
// (or of one workflow's hash) in one atomic script, and this package
// orchestrates across them, on top of it. A node's job is created
// "waiting"; the script that ends a node's job leaves an entry in its
// queue's outbox; a [Releaser] (any number, in every `chronoq serve`)
// records the end in the workflow's hash (and in those of the implicit
// workflows watching the job: [Client.EnqueueAfter]; the ends it reads of
// one workflow in one call), releases or cancels
// the children, and only then acks the entry. Each step is idempotent, so a
// crash anywhere between them re-runs from the outbox: no child is lost,
// none released twice. docs/ARCHITECTURE.md ("Workflows") has the design
// and the argument.
package workflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// Caps and defaults.
const (
	// MaxNodes is the most nodes a workflow may have.
	MaxNodes = 1000
	// MaxNameLen is the longest node name (1 to 64 of [A-Za-z0-9._-]).
	MaxNameLen = 64
	// DefaultRetention is how long a workflow is kept once its last node
	// ended.
	DefaultRetention = 7 * 24 * time.Hour
	// MaxRecent is how many workflows the recent list (List) keeps.
	MaxRecent = 1000
	// DefaultListLimit and MaxListLimit bound List.
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// Policy is what a node's death does to its descendants.
type Policy string

// The failure policies.
const (
	// PolicyCancel cancels the descendants of a node that died (or was
	// canceled). The default.
	PolicyCancel Policy = "cancel"
	// PolicyContinue runs them all the same once their parents have
	// ended; their upstream shows the parent's status and error.
	PolicyContinue Policy = "continue"
)

// Node is one node of a workflow to enqueue.
type Node struct {
	// Name is the node's name within the workflow: 1 to 64 of
	// [A-Za-z0-9._-], unique.
	Name string
	// DependsOn names the nodes that must end before this one runs.
	DependsOn []string
	// Job is the node's job, as for queue.Client.Enqueue (no idempotency
	// key, no debounce). Its RunAt or Delay is when it runs at the
	// earliest; its FlowKey puts it under its queue's flow control once
	// released.
	Job queue.NewJob
}

// Spec is a workflow to enqueue.
type Spec struct {
	Nodes []Node
	// OnFailure defaults to PolicyCancel.
	OnFailure Policy
}

// Status is where a workflow is.
type Status string

// The statuses of a workflow.
const (
	StatusRunning   Status = "running"   // some node has not ended
	StatusCompleted Status = "completed" // every node completed
	StatusFailed    Status = "failed"    // every node ended, some dead or canceled
	StatusCanceled  Status = "canceled"  // canceled as a whole (nodes already running may still end)
)

// Workflow is a workflow as stored.
type Workflow struct {
	ID         string
	Status     Status
	OnFailure  Policy
	CreatedAt  time.Time
	EndedAt    time.Time // zero while it runs
	CanceledAt time.Time // zero unless canceled
	Nodes      []NodeState
}

// NodeState is one node of a stored workflow: its job's status and
// timings.
type NodeState struct {
	Name      string
	DependsOn []string
	Queue     string
	JobID     string
	// Status is its job's: StatusWaiting until its parents end; ""
	// when the job is gone (deleted, or past its retention).
	Status     queue.Status
	Attempts   int
	EnqueuedAt time.Time
	StartedAt  time.Time // its last claim
	EndedAt    time.Time // completed, died or canceled
	LastError  string
}

// Config configures a [Client].
type Config struct {
	// Queue is the job store. Required.
	Queue *queue.Client
	// Retention is how long a workflow is kept once its last node ended.
	// Defaults to DefaultRetention.
	Retention time.Duration
	// OnApplied, when set, is called with every step this client (and its
	// releasers) applied to a node's job and how it went: for metrics and
	// tests. It must not block.
	OnApplied func(Step)
}

// Step is a step applied to a workflow node's job, as Config.OnApplied
// sees it: count the steps that took effect (Code 1) by Mode for metrics.
type Step struct {
	Mode  string // "release", "cancel", "abort" or "rearm"
	Node  string
	Queue string
	JobID string
	// Code is 1 applied, 0 not applicable now (Status is the job's), -1
	// no such job.
	Code   int
	Status queue.Status
}

// Client enqueues and manages workflows. It is safe for concurrent use.
type Client struct {
	q         *queue.Client
	st        plumbing.Workflows
	ret       time.Duration
	onApplied func(Step)
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Client, error) {
	if cfg.Queue == nil {
		return nil, errors.New("workflow: Config.Queue is required")
	}
	return &Client{q: cfg.Queue, st: plumbing.Of(cfg.Queue), ret: cmp.Or(cfg.Retention, DefaultRetention), onApplied: cfg.OnApplied}, nil
}

// ErrNotFound is the error of an unknown workflow (or one past its
// retention). It wraps queue.ErrNotFound.
var ErrNotFound = fmt.Errorf("workflow %w", queue.ErrNotFound)

// errNoDebounce refuses a debounce on a workflow's job: its parents, not
// its flow key's later jobs, decide when it runs.
var errNoDebounce = fmt.Errorf("%w: a workflow's job takes no debounce: its parents decide when it runs", queue.ErrInvalid)

func invalid(field, format string, args ...any) error {
	return &queue.FieldError{Index: -1, Field: field, Err: fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalid}, args...)...)}
}

// ValidateNodeName reports whether name can name a node.
func ValidateNodeName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: a node name is 1 to %d characters, got %d", queue.ErrInvalid, MaxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: node name %q: only [A-Za-z0-9._-]", queue.ErrInvalid, name)
		}
	}
	return nil
}

// graph is a validated Spec.
type graph struct {
	names    []string
	index    map[string]int
	parents  [][]string
	children [][]string
}

// validate checks s before anything is written: a node count within
// MaxNodes, names valid and unique, every dependency known, no cycle. The
// error is a *queue.FieldError naming the field ("nodes[3].depends_on"),
// and for a cycle its nodes.
func validate(s Spec) (*graph, error) {
	switch {
	case len(s.Nodes) == 0 || len(s.Nodes) > MaxNodes:
		return nil, invalid("nodes", "a workflow has 1 to %d nodes, got %d", MaxNodes, len(s.Nodes))
	case s.OnFailure != "" && s.OnFailure != PolicyCancel && s.OnFailure != PolicyContinue:
		return nil, invalid("on_failure", "must be %q or %q, got %q", PolicyCancel, PolicyContinue, s.OnFailure)
	}
	g := &graph{index: map[string]int{}, parents: make([][]string, len(s.Nodes)), children: make([][]string, len(s.Nodes))}
	for i, n := range s.Nodes {
		if err := ValidateNodeName(n.Name); err != nil {
			return nil, &queue.FieldError{Index: -1, Field: fmt.Sprintf("nodes[%d].name", i), Err: err}
		}
		if j, dup := g.index[n.Name]; dup {
			return nil, invalid(fmt.Sprintf("nodes[%d].name", i), "node %q is named twice (nodes[%d] too)", n.Name, j)
		}
		g.index[n.Name] = i
		g.names = append(g.names, n.Name)
	}
	for i, n := range s.Nodes {
		seen := map[string]bool{}
		for _, d := range n.DependsOn {
			j, ok := g.index[d]
			switch {
			case !ok:
				return nil, invalid(fmt.Sprintf("nodes[%d].depends_on", i), "node %q depends on %q, which is not a node of the workflow", n.Name, d)
			case j == i:
				return nil, invalid(fmt.Sprintf("nodes[%d].depends_on", i), "node %q depends on itself: a cycle", n.Name)
			case seen[d]:
				return nil, invalid(fmt.Sprintf("nodes[%d].depends_on", i), "node %q names %q twice", n.Name, d)
			}
			seen[d] = true
			g.parents[i] = append(g.parents[i], d)
			g.children[j] = append(g.children[j], n.Name)
		}
	}
	if cyc := g.cycle(); cyc != nil {
		return nil, invalid("nodes", "the graph has a cycle: %s", strings.Join(cyc, " -> "))
	}
	return g, nil
}

// cycle answers the nodes of a cycle (the first again at the end), nil
// when the graph has none: a depth-first search, iterative so that a
// chain of MaxNodes cannot grow the stack.
func (g *graph) cycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(g.names))
	from := make([]int, len(g.names))
	type frame struct{ node, next int }
	for root := range g.names {
		if color[root] != white {
			continue
		}
		stack := []frame{{root, 0}}
		color[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(g.children[top.node]) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			c := g.index[g.children[top.node][top.next]]
			top.next++
			switch color[c] {
			case white:
				color[c], from[c] = grey, top.node
				stack = append(stack, frame{c, 0})
			case grey: // back to a node on the path: c -> ... -> top.node -> c
				path := []string{g.names[c]}
				for x := top.node; x != c; x = from[x] {
					path = append(path, g.names[x])
				}
				slices.Reverse(path[1:])
				return append(path, g.names[c])
			}
		}
	}
	return nil
}

// Enqueue validates s as a whole (the graph, then every node's job), and
// only then writes it: the workflow's hash, every node's job waiting,
// then it starts, which releases the roots. It answers the workflow as
// it stands then.
//
// It is several steps in several slots. A crash or a Redis failure
// part-way answers an error and leaves a workflow that never started: a
// Releaser cancels it after its DirtyGrace (its jobs never ran). One that
// started is finished by a Releaser in the same way, so the caller of a
// failed Enqueue should look the workflow up (the error names its id)
// rather than enqueue it again.
func (c *Client) Enqueue(ctx context.Context, s Spec) (*Workflow, error) {
	g, err := validate(s)
	if err != nil {
		return nil, err
	}
	id, err := names.NewID()
	if err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	preps := make([]plumbing.PreparedNode, len(s.Nodes))
	specs := make([]plumbing.NodeSpec, len(s.Nodes))
	for i, n := range s.Nodes {
		if n.Job.Debounce != nil {
			return nil, &queue.FieldError{Index: -1, Field: fmt.Sprintf("nodes[%d].job.debounce", i), Err: errNoDebounce}
		}
		p, err := c.st.PrepareNode(n.Job, id, n.Name)
		if err != nil {
			var fe *queue.FieldError
			if errors.As(err, &fe) {
				return nil, &queue.FieldError{Index: -1, Field: fmt.Sprintf("nodes[%d].job.%s", i, fe.Field), Err: fe.Err}
			}
			return nil, err
		}
		preps[i] = p
		specs[i] = plumbing.NodeSpec{Name: n.Name, Queue: p.Queue, JobID: p.ID, Parents: g.parents[i], Children: g.children[i]}
	}
	policy := cmp.Or(s.OnFailure, PolicyCancel)
	mark, err := c.st.MarkWorkflowDirty(ctx, id, "create")
	if err != nil {
		return nil, fmt.Errorf("workflow: enqueue: %w", err)
	}
	fail := func(err error) (*Workflow, error) {
		return nil, fmt.Errorf("workflow %s: enqueue: %w", id, err)
	}
	if err := c.st.CreateWorkflow(ctx, id, string(policy), specs); err != nil {
		return fail(err)
	}
	if err := c.st.AddNodeJobs(ctx, preps); err != nil {
		return fail(err)
	}
	if err := c.start(ctx, id, mark); err != nil {
		return fail(err)
	}
	return c.Get(ctx, id)
}

// validID checks a workflow id (as ids of jobs are: 1 to 64 of
// [A-Za-z0-9_-]).
func validID(id string) error {
	if err := names.ValidateID(id); err != nil {
		return fmt.Errorf("%w: workflow id %q", queue.ErrInvalid, id)
	}
	return nil
}

// Get reads a workflow and the state of every node's job.
func (c *Client) Get(ctx context.Context, id string) (*Workflow, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	rec, err := c.st.ReadWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	w := &Workflow{ID: id, OnFailure: Policy(rec.Policy), CreatedAt: rec.CreatedAt, EndedAt: rec.EndedAt, CanceledAt: rec.CanceledAt}
	refs := make([]queue.JobRef, len(rec.Nodes))
	w.Nodes = make([]NodeState, len(rec.Nodes))
	anyFailed := false
	for i, n := range rec.Nodes {
		refs[i] = queue.JobRef{Queue: n.Queue, ID: n.JobID}
		w.Nodes[i] = NodeState{Name: n.Name, DependsOn: n.Parents, Queue: n.Queue, JobID: n.JobID}
		if n.Outcome != "" && queue.Status(n.Outcome) != queue.StatusCompleted {
			anyFailed = true
		}
	}
	jobs, err := c.q.Jobs(ctx, refs)
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		if j == nil {
			continue
		}
		ns := &w.Nodes[i]
		ns.Status, ns.Attempts, ns.EnqueuedAt, ns.StartedAt, ns.LastError = j.Status, j.Attempts, j.EnqueuedAt, j.ClaimedAt, j.LastError
		switch j.Status {
		case queue.StatusCompleted:
			ns.EndedAt = j.CompletedAt
		case queue.StatusDead:
			ns.EndedAt = j.DiedAt
		case queue.StatusCanceled:
			ns.EndedAt = j.CanceledAt
		}
	}
	switch {
	case !w.CanceledAt.IsZero():
		w.Status = StatusCanceled
	case w.EndedAt.IsZero():
		w.Status = StatusRunning
	case anyFailed:
		w.Status = StatusFailed
	default:
		w.Status = StatusCompleted
	}
	return w, nil
}

// List answers up to limit (DefaultListLimit when 0, at most
// MaxListLimit) of the recent workflows, newest first. Workflows gone
// since (past their retention) leave the list.
func (c *Client) List(ctx context.Context, limit int) ([]*Workflow, error) {
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, invalid("limit", "must be in [1, %d], got %d", MaxListLimit, limit)
	}
	ids, err := c.st.RecentWorkflows(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*Workflow, 0, len(ids))
	var gone []string
	for _, id := range ids {
		w, err := c.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			gone = append(gone, id)
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	if err := c.st.ForgetRecentWorkflows(ctx, gone); err != nil {
		return nil, err
	}
	return out, nil
}

// Cancel cancels a workflow: every node that has not ended is canceled
// (a running one is asked to stop, as queue.Client.Cancel asks). It
// answers queue.ErrConflict for a workflow that has ended.
func (c *Client) Cancel(ctx context.Context, id string) (*Workflow, error) {
	return c.change(ctx, id, "cancel", func() (plumbing.WorkflowStep, error) { return c.st.CancelWorkflow(ctx, id, c.ret) },
		"it has ended")
}

// Retry runs a workflow's dead and canceled nodes again, and lifts a
// cancel of the whole: those nodes wait again for their parents (each
// dead node's run again at once, each canceled descendant when its
// parents complete), so the graph resumes. It answers queue.ErrConflict
// when there is nothing to retry.
func (c *Client) Retry(ctx context.Context, id string) (*Workflow, error) {
	return c.change(ctx, id, "retry", func() (plumbing.WorkflowStep, error) { return c.st.RetryWorkflow(ctx, id) },
		"it has no dead or canceled node")
}

// change runs a multi-step change: marked dirty first, so that a
// releaser finishes it if this process dies part-way.
func (c *Client) change(ctx context.Context, id, what string, step func() (plumbing.WorkflowStep, error), conflict string) (*Workflow, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	mark, err := c.st.MarkWorkflowDirty(ctx, id, what)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %s: %w", id, what, err)
	}
	st, err := step()
	if err != nil {
		return nil, err
	}
	switch st.Code {
	case -1:
		_ = c.st.ClearWorkflowDirty(ctx, mark)
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	case 0:
		_ = c.st.ClearWorkflowDirty(ctx, mark)
		return nil, fmt.Errorf("%w: workflow %s: %s", queue.ErrConflict, id, conflict)
	}
	if err := c.apply(ctx, st.Actions); err != nil {
		return nil, fmt.Errorf("workflow %s: %s: %w", id, what, err)
	}
	if err := c.st.ClearWorkflowDirty(ctx, mark); err != nil {
		return nil, fmt.Errorf("workflow %s: %s: %w", id, what, err)
	}
	return c.Get(ctx, id)
}

// apply applies acts to the nodes' jobs.
func (c *Client) apply(ctx context.Context, acts []plumbing.NodeAction) error {
	if len(acts) == 0 {
		return nil
	}
	res, err := c.st.ApplyNodeActions(ctx, acts, c.ret)
	if err != nil {
		return err
	}
	if c.onApplied != nil {
		for _, x := range res {
			c.onApplied(Step{Mode: x.Action.Mode, Node: x.Action.Node, Queue: x.Action.Queue, JobID: x.Action.JobID,
				Code: x.Code, Status: queue.Status(x.Status)})
		}
	}
	return nil
}

// MaxDependsOn is the most jobs a single job may depend on
// (EnqueueAfter).
const MaxDependsOn = MaxNodes - 1

// jobNode is the node name of the job EnqueueAfter enqueues; its parents'
// nodes are named by their job ids (which cannot be "job": a job id is
// 26 characters, or 32 hex digits when an earlier release made it).
const jobNode = "job"

// EnqueueAfter enqueues nj to run once the existing jobs parents have
// ended, with their results and artifacts as its upstream, keyed by their
// job ids. It is an implicit workflow of those jobs and nj (nj's
// Workflow names it): under policy (PolicyCancel by default) nj is
// canceled when a parent dies or is canceled; under PolicyContinue it
// runs all the same. A cancel or retry of that workflow concerns nj only:
// the parents are only watched. A parent may have other dependents
// (each its own implicit workflow), up to queue.MaxWatchers (past it
// queue.ErrTooManyWatchers, an ErrConflict), and may be a node of a
// workflow of its own; it may have ended already. An unknown one is
// queue.ErrNotFound.
func (c *Client) EnqueueAfter(ctx context.Context, nj queue.NewJob, parents []queue.JobRef, policy Policy) (*queue.Job, error) {
	nodes, err := checkDependsOn(parents, policy)
	if err != nil {
		return nil, err
	}
	id, err := names.NewID()
	if err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	if nj.Debounce != nil {
		return nil, &queue.FieldError{Index: -1, Field: "debounce", Err: errNoDebounce}
	}
	prep, err := c.st.PrepareNode(nj, id, jobNode)
	if err != nil {
		return nil, err
	}
	// The parents are looked at first, so that a wrong one is refused
	// before anything is written (a race with its deletion, or with
	// other dependents' adoptions up to the cap, is caught by the
	// adoption below).
	jobs, err := c.q.Jobs(ctx, parents)
	if err != nil {
		return nil, err
	}
	if err := checkParents(parents, jobs); err != nil {
		return nil, err
	}
	specs := afterSpecs(parents, nodes, prep)
	mark, err := c.st.MarkWorkflowDirty(ctx, id, "create")
	if err != nil {
		return nil, fmt.Errorf("workflow: enqueue: %w", err)
	}
	if err := c.createAfter(ctx, id, policy, specs, prep); err != nil {
		return nil, fmt.Errorf("workflow %s: enqueue: %w", id, err)
	}
	if err := c.adoptParents(ctx, id, parents); err != nil {
		return nil, err
	}
	if err := c.start(ctx, id, mark); err != nil {
		return nil, fmt.Errorf("workflow %s: enqueue: %w", id, err)
	}
	return c.q.Get(ctx, prep.Queue, prep.ID)
}

// checkDependsOn checks EnqueueAfter's parents and policy and answers the
// parents' names (their job ids).
func checkDependsOn(parents []queue.JobRef, policy Policy) ([]string, error) {
	if len(parents) == 0 || len(parents) > MaxDependsOn {
		return nil, invalid("depends_on", "a job depends on 1 to %d jobs, got %d", MaxDependsOn, len(parents))
	}
	if policy != "" && policy != PolicyCancel && policy != PolicyContinue {
		return nil, invalid("on_failure", "must be %q or %q, got %q", PolicyCancel, PolicyContinue, policy)
	}
	seen := map[string]bool{}
	ids := make([]string, len(parents))
	for i, p := range parents {
		field := fmt.Sprintf("depends_on[%d]", i)
		if err := names.ValidateQueue(p.Queue); err != nil {
			return nil, &queue.FieldError{Index: -1, Field: field + ".queue", Err: err}
		}
		if err := names.ValidateID(p.ID); err != nil || p.ID == jobNode {
			return nil, invalid(field+".id", "not a job id: %q", p.ID)
		}
		if seen[p.ID] {
			return nil, invalid(field+".id", "job %s is named twice", p.ID)
		}
		seen[p.ID] = true
		ids[i] = p.ID
	}
	return ids, nil
}

// checkParents refuses parents of which a job (jobs[i], nil: not found) is
// missing or has queue.MaxWatchers dependents already.
func checkParents(parents []queue.JobRef, jobs []*queue.Job) error {
	for i, j := range jobs {
		switch {
		case j == nil:
			return fmt.Errorf("%w: depends_on[%d]: %s/%s", queue.ErrNotFound, i, parents[i].Queue, parents[i].ID)
		case len(j.Watchers) >= queue.MaxWatchers:
			return fmt.Errorf("%w: depends_on[%d]: job %s/%s has %d dependents already, the cap (queue.MaxWatchers)",
				queue.ErrTooManyWatchers, i, parents[i].Queue, parents[i].ID, queue.MaxWatchers)
		}
	}
	return nil
}

// afterSpecs are the nodes of EnqueueAfter's implicit workflow: each
// parent, external, then the job, a child of them all.
func afterSpecs(parents []queue.JobRef, names []string, prep plumbing.PreparedNode) []plumbing.NodeSpec {
	specs := make([]plumbing.NodeSpec, 0, len(parents)+1)
	for _, p := range parents {
		specs = append(specs, plumbing.NodeSpec{Name: p.ID, Queue: p.Queue, JobID: p.ID, Children: []string{jobNode}, External: true})
	}
	return append(specs, plumbing.NodeSpec{Name: jobNode, Queue: prep.Queue, JobID: prep.ID, Parents: names})
}

// createAfter writes EnqueueAfter's workflow hash and its job.
func (c *Client) createAfter(ctx context.Context, id string, policy Policy, specs []plumbing.NodeSpec, prep plumbing.PreparedNode) error {
	if err := c.st.CreateWorkflow(ctx, id, string(cmp.Or(policy, PolicyCancel)), specs); err != nil {
		return err
	}
	return c.st.AddNodeJobs(ctx, []plumbing.PreparedNode{prep})
}

// adoptParents makes workflow id a watcher of each parent. One lost to a
// race cancels the workflow's job (its parents are left alone) and
// answers the adoption's error.
func (c *Client) adoptParents(ctx context.Context, id string, parents []queue.JobRef) error {
	for _, p := range parents {
		if err := c.st.AdoptJob(ctx, p.Queue, p.ID, id, p.ID); err != nil {
			if st, cerr := c.st.CancelWorkflow(ctx, id, c.ret); cerr == nil {
				_ = c.apply(ctx, st.Actions)
			}
			return err
		}
	}
	return nil
}

// start ends a creation whose workflow hash and node jobs are written:
// lists the workflow among the recent ones, starts it (its releases may
// begin), applies what the start answers (the roots' releases), and
// clears the creation's dirty mark.
func (c *Client) start(ctx context.Context, id, mark string) error {
	if err := c.st.AddRecentWorkflow(ctx, id, plumbing.Of(c.q).Clock().Now(), MaxRecent); err != nil {
		return err
	}
	st, err := c.st.StartWorkflow(ctx, id)
	if err != nil {
		return err
	}
	if st.Code != 1 {
		return fmt.Errorf("%w: it was canceled before it started (a releaser found its creation unfinished)", queue.ErrConflict)
	}
	if err := c.apply(ctx, st.Actions); err != nil {
		return err
	}
	return c.st.ClearWorkflowDirty(ctx, mark)
}
