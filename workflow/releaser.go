package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/queue"
)

// Defaults of [ReleaserConfig].
const (
	DefaultReleaseInterval = 100 * time.Millisecond
	DefaultDirtyGrace      = 3 * time.Minute
	// outboxPage is how many outbox entries a read takes.
	outboxPage = 100
	// maxPasses bounds the passes over one outbox in one visit.
	maxPasses = 100
)

// ReleaserConfig configures a [Releaser].
type ReleaserConfig struct {
	// Client is the workflows' client. Required.
	Client *Client
	// Interval is how often the releaser reads the outbox index for
	// queues with entries: the most an entry written by another process
	// waits (entries of this process's own client are read at once).
	// Defaults to 100 ms.
	Interval time.Duration
	// ReconcileInterval is how often it reads every queue's outbox
	// instead of the index's queues only (an entry whose mark was lost:
	// its client died between its script and the mark), and finishes the
	// changes (creation, cancel, retry) left unfinished for DirtyGrace.
	// The first pass is one. Defaults to queue.DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// DirtyGrace is how long a creation, cancel or retry may take before
	// a releaser finishes it: a workflow whose creation is that old and
	// has not started is canceled; any other is brought to what its hash
	// says. It must be longer than a call may take (a cluster migration
	// holds a call up to two minutes). Defaults to 3 minutes.
	DirtyGrace time.Duration
	// Logger receives errors. Defaults to slog.Default().
	Logger *slog.Logger
}

// Releaser moves workflows on: it reads the outboxes of queues (the
// entries that the scripts ending a node's job left), records each end in
// its workflow, releases or cancels the children, and acks the entry
// only then. Any number may run at once, in any processes: every step is
// idempotent and guarded in its own slot, so an entry handled twice, or a
// releaser that dies between steps, releases no child twice and loses
// none (see the package documentation).
type Releaser struct {
	cfg        ReleaserConfig
	c          *Client
	clock      clockwork.Clock
	log        *slog.Logger
	running    atomic.Bool
	reconciled time.Time
}

// testHookStop is the tests' seam into handle: it is called with the
// releaser at each step of handling a batch ("ref": before recording a
// later workflow's batch of ends, "recorded", "applied"), and when it
// answers true the handling stops there, as a crash of the releaser at
// that step would. It answers false; the package's tests set it once,
// before any test runs, to a function that dies at the steps a test chose
// for its own releasers.
var testHookStop = func(*Releaser, string) bool { return false }

// NewReleaser checks cfg and fills its defaults.
func NewReleaser(cfg ReleaserConfig) (*Releaser, error) {
	if cfg.Client == nil {
		return nil, errors.New("workflow: ReleaserConfig.Client is required")
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultReleaseInterval)
	cfg.ReconcileInterval = cmp.Or(cfg.ReconcileInterval, queue.DefaultReconcileInterval)
	cfg.DirtyGrace = cmp.Or(cfg.DirtyGrace, DefaultDirtyGrace)
	return &Releaser{cfg: cfg, c: cfg.Client, clock: plumbing.Of(cfg.Client.q).Clock(), log: cmp.Or(cfg.Logger, slog.Default())}, nil
}

// Run releases until ctx ends, then returns nil. One Run at a time.
func (r *Releaser) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("workflow: the releaser is running already")
	}
	defer r.running.Store(false)
	nudges := r.c.st.ReleaserNudges(ctx)
	for {
		r.Pass(ctx)
		// Until the next pass, the queues this process's own scripts wrote
		// entries into are read at once.
		t := r.clock.NewTimer(r.cfg.Interval)
	wait:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				for range nudges { // drained until closed
					continue
				}
				return nil
			case q := <-nudges:
				r.visit(ctx, q)
			case <-t.Chan():
				break wait
			}
		}
	}
}

// Pass is one round: a reconcile when one is due, then the queues the
// outbox index names.
func (r *Releaser) Pass(ctx context.Context) {
	if r.reconciled.IsZero() || r.clock.Since(r.reconciled) >= r.cfg.ReconcileInterval {
		if r.reconcile(ctx) {
			r.reconciled = r.clock.Now()
		}
	}
	seen := map[string]bool{}
	for range maxPasses {
		qs, err := r.c.st.OutboxDue(ctx, 1000)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("releaser: reading the outbox index failed", "err", err)
			}
			return
		}
		fresh := 0
		for _, q := range qs {
			if !seen[q] {
				seen[q] = true
				fresh++
				r.visit(ctx, q)
			}
		}
		if fresh == 0 {
			return
		}
	}
}

// reconcile reads every queue's outbox, and finishes the unfinished
// changes; it answers whether it read every queue.
func (r *Releaser) reconcile(ctx context.Context) bool {
	ok := true
	qs, err := r.c.q.Queues(ctx)
	if err == nil {
		qs, err = r.c.st.OutboxQueues(ctx, qs)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("releaser: reading the outboxes failed", "err", err)
		}
		ok = false
	}
	for _, q := range qs {
		r.visit(ctx, q)
	}
	return r.finishDirty(ctx) && ok
}

// finishDirty finishes the creations, cancels and retries that have been
// under way for longer than DirtyGrace.
func (r *Releaser) finishDirty(ctx context.Context) bool {
	ids, whats, marks, err := r.c.st.DirtyWorkflows(ctx, r.cfg.DirtyGrace, 100)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("releaser: reading unfinished workflow changes failed", "err", err)
		}
		return false
	}
	for i, id := range ids {
		if err := r.finish(ctx, id, whats[i]); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("releaser: finishing a workflow change failed", "workflow", id, "change", whats[i], "err", err)
			}
			continue
		}
		if err := r.c.st.ClearWorkflowDirty(ctx, marks[i]); err != nil && ctx.Err() == nil {
			r.log.Warn("releaser: clearing a workflow change failed", "workflow", id, "err", err)
		}
	}
	return true
}

// finish brings workflow id's jobs to what its hash says; a creation that
// never started is canceled.
func (r *Releaser) finish(ctx context.Context, id, what string) error {
	rec, err := r.c.st.ReadWorkflow(ctx, id)
	if err != nil {
		return err
	}
	if rec == nil {
		return nil // never written, or gone
	}
	var st plumbing.WorkflowStep
	if what == "create" && !rec.Started && rec.CanceledAt.IsZero() {
		r.log.Warn("releaser: canceling a workflow whose creation did not finish", "workflow", id)
		st, err = r.c.st.CancelWorkflow(ctx, id, r.c.ret)
	} else {
		st, err = r.c.st.PlanWorkflow(ctx, id)
	}
	if err != nil {
		return err
	}
	return r.apply(ctx, st.Actions)
}

// visit handles queue's outbox until it is empty (then takes it out of
// the index) or a step fails (then leaves it in the index for the next
// pass).
func (r *Releaser) visit(ctx context.Context, q string) {
	for range maxPasses {
		cursor, seen, failed := "0", 0, false
		var seq int64
		for range maxPasses {
			es, next, s, err := r.c.st.ReadOutbox(ctx, q, cursor, outboxPage)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("releaser: reading an outbox failed", "queue", q, "err", err)
				}
				return
			}
			if cursor == "0" {
				seq = s
			}
			seen += len(es)
			if len(es) > 0 && !r.handle(ctx, q, es) {
				failed = true
			}
			if cursor = next; cursor == "0" {
				break
			}
		}
		if failed || ctx.Err() != nil {
			return
		}
		if seen == 0 {
			if err := r.c.st.ParkOutbox(ctx, q, seq); err != nil && ctx.Err() == nil {
				r.log.Warn("releaser: parking an outbox failed", "queue", q, "err", err)
			}
			return
		}
	}
}

// upstreamEntry is what a node's children receive of it.
type upstreamEntry struct {
	JobID     string          `json:"job_id"`
	Queue     string          `json:"queue"`
	Status    queue.Status    `json:"status"`
	Result    json.RawMessage `json:"result"`
	Artifacts json.RawMessage `json:"artifacts"`
	Error     string          `json:"error,omitempty"`
	// Omitted: the result and artifacts are left out, the upstream being
	// over queue.MaxUpstreamBytes with them.
	Omitted bool `json:"omitted,omitempty"`
}

// handle records the entries of one queue's outbox in their workflows,
// applies what their children need, and acks those that went through:
// each entry is acked only after its actions were applied. The ends are
// recorded per workflow, up to queue.MaxBatch in one call (a fan-in's
// entries in one pass mostly name the same workflow). It answers whether
// all went through.
func (r *Releaser) handle(ctx context.Context, q string, es []plumbing.OutboxEntry) bool {
	failed, acts, stopped := r.record(ctx, es)
	if stopped {
		return false
	}
	ok := true
	done := make([]plumbing.OutboxEntry, 0, len(es))
	for i, e := range es {
		if failed[i] {
			ok = false
			continue
		}
		done = append(done, e)
	}
	if testHookStop(r, "recorded") {
		return false
	}
	if err := r.apply(ctx, acts); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("releaser: applying workflow actions failed", "queue", q, "err", err)
		}
		return false
	}
	if testHookStop(r, "applied") {
		return false
	}
	if _, err := r.c.st.AckOutbox(ctx, q, done); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("releaser: acking an outbox failed", "queue", q, "err", err)
		}
		return false
	}
	return ok
}

// endGroup is the ends of one workflow among a pass's outbox entries,
// and for each the index of its entry.
type endGroup struct {
	ends    []plumbing.NodeEnd
	entries []int
}

// groupEnds groups the refs of the entries by workflow, in the order
// first named.
func groupEnds(es []plumbing.OutboxEntry) (map[string]*endGroup, []string) {
	byWF := map[string]*endGroup{}
	var order []string
	for i, e := range es {
		up, brief := endJSON(e)
		for _, ref := range e.Refs {
			g := byWF[ref.ID]
			if g == nil {
				g = &endGroup{}
				byWF[ref.ID] = g
				order = append(order, ref.ID)
			}
			g.ends = append(g.ends, plumbing.NodeEnd{Node: ref.Node, Gen: ref.Gen, Outcome: e.Outcome, Up: up, Brief: brief})
			g.entries = append(g.entries, i)
		}
	}
	return byWF, order
}

// record records the ends in each workflow the entries name (a job's
// own, then those watching it), each record idempotent, and answers
// which entries failed and the actions their children need; stopped when
// a test's hook stopped it. An entry is acked only when every one of its
// refs went through, so a failed call, or a crash between two, leaves its
// entries, and the next pass records them all again. The entry of the end
// that ended its workflow gets that end (its ack writes the
// workflow.ended event, on a rerun too, as long as the entry was not
// acked).
func (r *Releaser) record(ctx context.Context, es []plumbing.OutboxEntry) (failed []bool, acts []plumbing.NodeAction, stopped bool) {
	byWF, order := groupEnds(es)
	failed = make([]bool, len(es))
	called := false
	for _, id := range order {
		g := byWF[id]
		for lo := 0; lo < len(g.ends); lo += queue.MaxBatch {
			hi := min(lo+queue.MaxBatch, len(g.ends))
			if called && testHookStop(r, "ref") {
				return nil, nil, true
			}
			called = true
			// codes -1 (the workflow is gone: expired, or never created)
			// and 2 (an entry of a run before a retry): nothing is to do;
			// 3: the end that ended the workflow.
			codes, end, got, err := r.c.st.RecordNodeEnds(ctx, id, g.ends[lo:hi], r.c.ret)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("releaser: recording nodes' ends failed", "workflow", id, "ends", hi-lo, "err", err)
				}
				for _, i := range g.entries[lo:hi] {
					failed[i] = true
				}
				continue
			}
			acts = append(acts, got...)
			for k, code := range codes {
				if code == 3 && end != nil {
					i := g.entries[lo+k]
					es[i].Ended = append(es[i].Ended, *end)
				}
			}
		}
	}
	return failed, acts, false
}

// endJSON answers what the children of an outbox entry's node receive
// of it (plumbing.NodeEnd's Up) and the same without its result and
// artifacts (Brief).
func endJSON(e plumbing.OutboxEntry) (up, brief json.RawMessage) {
	if queue.Status(e.Outcome) == queue.StatusCompleted {
		// The job's last_error is its last failed attempt's, kept after
		// it completes (on a later attempt, or after a workflow retry):
		// the children of a node that completed are shown no error.
		e.Error = ""
	}
	up, err := json.Marshal(upstreamEntry{JobID: e.JobID, Queue: e.Queue, Status: queue.Status(e.Outcome),
		Result: nullIfEmpty(e.Result), Artifacts: nullIfEmpty(e.Artifacts), Error: e.Error})
	if err != nil { // a result or artifacts that are not JSON: the scripts' callers validate them
		up, _ = json.Marshal(upstreamEntry{JobID: e.JobID, Queue: e.Queue, Status: queue.Status(e.Outcome), Error: e.Error})
	}
	brief, _ = json.Marshal(upstreamEntry{JobID: e.JobID, Queue: e.Queue, Status: queue.Status(e.Outcome), Result: json.RawMessage("null"),
		Artifacts: json.RawMessage("null"), Error: e.Error, Omitted: true})
	return up, brief
}

func (r *Releaser) apply(ctx context.Context, acts []plumbing.NodeAction) error {
	return r.c.apply(ctx, acts)
}

func nullIfEmpty(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("null")
	}
	return m
}
