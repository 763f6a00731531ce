package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/workflow"
)

// WorkflowStore keeps the workflows: the /v1/workflows routes, registered
// only when [Config.Workflows] is set. *workflow.Client is one.
//
// Errors: a *queue.FieldError (wrapping queue.ErrInvalid) for a bad graph
// or node (400, naming the field: "nodes[3].depends_on"), one wrapping
// queue.ErrNotFound for an unknown workflow (404), queue.ErrConflict for
// a cancel of an ended workflow or a retry with nothing to retry (409).
type WorkflowStore interface {
	Enqueue(ctx context.Context, s workflow.Spec) (*workflow.Workflow, error)
	Get(ctx context.Context, id string) (*workflow.Workflow, error)
	List(ctx context.Context, limit int) ([]*workflow.Workflow, error)
	Cancel(ctx context.Context, id string) (*workflow.Workflow, error)
	Retry(ctx context.Context, id string) (*workflow.Workflow, error)
	// EnqueueAfter is POST /v1/jobs with depends_on.
	EnqueueAfter(ctx context.Context, nj queue.NewJob, parents []queue.JobRef, policy workflow.Policy) (*queue.Job, error)
}

var _ WorkflowStore = (*workflow.Client)(nil)

// workflowRequest is the body of POST /v1/workflows.
type workflowRequest struct {
	Nodes     []json.RawMessage `json:"nodes"`
	OnFailure *string           `json:"on_failure"`
}

// nodeRequest is one node of a workflowRequest; its job is decoded apart
// to name its fields ("nodes[2].job.kind").
type nodeRequest struct {
	Name      string          `json:"name"`
	DependsOn []string        `json:"depends_on"`
	Job       json.RawMessage `json:"job"`
}

// prefixed names the fields of err under prefix.
func prefixed(err error, prefix string) error {
	var ae *Error
	var we *wire.Error
	switch {
	case errors.As(err, &ae) && ae.Field != "":
		cp := *ae
		cp.Field = prefix + ae.Field
		return &cp
	case errors.As(err, &we) && we.Field != "":
		cp := *we
		cp.Field = prefix + we.Field
		return &cp
	}
	return err
}

// spec reads a workflowRequest: each node's job as POST /v1/jobs reads
// one. The graph itself is checked by the store.
func (s *Server) workflowSpec(r *workflowRequest) (workflow.Spec, error) {
	var sp workflow.Spec
	if r.OnFailure != nil {
		sp.OnFailure = workflow.Policy(*r.OnFailure)
	}
	if len(r.Nodes) == 0 || len(r.Nodes) > workflow.MaxNodes {
		return sp, invalidArg("nodes", "a workflow has 1 to %d nodes, got %d", workflow.MaxNodes, len(r.Nodes))
	}
	sp.Nodes = make([]workflow.Node, len(r.Nodes))
	for i, raw := range r.Nodes {
		prefix := fmt.Sprintf("nodes[%d].", i)
		var nr nodeRequest
		if err := wire.Raw(raw, &nr, prefix); err != nil {
			return sp, err
		}
		if len(nr.Job) == 0 || string(nr.Job) == "null" {
			return sp, invalidArg(prefix+"job", "a node's job is required")
		}
		var jr enqueueRequest
		if err := wire.Raw(nr.Job, &jr, prefix+"job."); err != nil {
			return sp, err
		}
		if jr.DependsOn != nil || jr.OnFailure != nil {
			return sp, invalidArg(prefix+"job.depends_on", "a node's job takes no depends_on nor on_failure: give the node's depends_on, and the workflow's on_failure")
		}
		nj, err := jr.newJob(-1)
		if err != nil {
			return sp, prefixed(err, prefix+"job.")
		}
		if nj, err = s.pushJob(nj, &jr, prefix+"job."); err != nil {
			return sp, err
		}
		sp.Nodes[i] = workflow.Node{Name: nr.Name, DependsOn: nr.DependsOn, Job: nj}
	}
	return sp, nil
}

// enqueueAfter: POST /v1/jobs with depends_on: a job that runs once the
// jobs it names have ended (an implicit workflow, see
// workflow.Client.EnqueueAfter); with a wait, answered once it has ended
// or as it is when the wait runs out.
func (s *Server) enqueueAfter(c echo.Context, nj queue.NewJob, req *enqueueRequest, wait time.Duration) error {
	if s.cfg.Workflows == nil {
		return invalidArg("depends_on", "workflows are not configured on this server")
	}
	if len(req.DependsOn) == 0 {
		return invalidArg("depends_on", "name 1 to %d jobs (with on_failure, depends_on is required)", workflow.MaxDependsOn)
	}
	if nj.IdempotencyKey != "" {
		return invalidArg("idempotency_key", "a job with depends_on takes none")
	}
	refs := make([]queue.JobRef, len(req.DependsOn))
	for i, r := range req.DependsOn {
		refs[i] = queue.JobRef{Queue: r.Queue, ID: r.ID}
	}
	var policy workflow.Policy
	if req.OnFailure != nil {
		policy = workflow.Policy(*req.OnFailure)
	}
	j, err := s.cfg.Workflows.EnqueueAfter(c.Request().Context(), nj, refs, policy)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, jobLocation(j))
	return writeJob(c, http.StatusCreated, s.afterEnqueue(c, j, wait))
}

// enqueueWorkflow: POST /v1/workflows.
func (s *Server) enqueueWorkflow(c echo.Context) error {
	var req workflowRequest
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	sp, err := s.workflowSpec(&req)
	if err != nil {
		return err
	}
	njs := make([]queue.NewJob, len(sp.Nodes))
	for i, n := range sp.Nodes {
		njs[i] = n.Job
	}
	if err := s.pushQueues(c.Request().Context(), njs, func(i int) string { return fmt.Sprintf("nodes[%d].job.", i) }); err != nil {
		return err
	}
	w, err := s.cfg.Workflows.Enqueue(c.Request().Context(), sp)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/workflows/"+w.ID)
	return writeJSON(c, http.StatusCreated, toWorkflowJSON(w))
}

// listWorkflows: GET /v1/workflows?limit=N.
func (s *Server) listWorkflows(c echo.Context) error {
	limit := 0
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > workflow.MaxListLimit {
			return invalidArg("limit", "must be an integer in [1, %d], got %q", workflow.MaxListLimit, l)
		}
		limit = n
	}
	ws, err := s.cfg.Workflows.List(c.Request().Context(), limit)
	if err != nil {
		return err
	}
	out := workflowsJSON{Workflows: make([]workflowSummaryJSON, len(ws))}
	for i, w := range ws {
		out.Workflows[i] = toWorkflowSummary(w)
	}
	return writeJSON(c, http.StatusOK, out)
}

// getWorkflow: GET /v1/workflows/{id}.
func (s *Server) getWorkflow(c echo.Context) error {
	w, err := s.cfg.Workflows.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toWorkflowJSON(w))
}

// cancelWorkflow: POST /v1/workflows/{id}/cancel.
func (s *Server) cancelWorkflow(c echo.Context) error {
	w, err := s.cfg.Workflows.Cancel(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toWorkflowJSON(w))
}

// retryWorkflow: POST /v1/workflows/{id}/retry.
func (s *Server) retryWorkflow(c echo.Context) error {
	w, err := s.cfg.Workflows.Retry(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toWorkflowJSON(w))
}

// workflowHead is what the Workflow resource and its summary in a list
// share.
type workflowHead struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	OnFailure  string  `json:"on_failure"`
	CreatedAt  *string `json:"created_at"`
	EndedAt    *string `json:"ended_at"`
	CanceledAt *string `json:"canceled_at"`
}

func toWorkflowHead(w *workflow.Workflow) workflowHead {
	return workflowHead{ID: w.ID, Status: string(w.Status), OnFailure: string(w.OnFailure), CreatedAt: wire.Time(w.CreatedAt),
		EndedAt: wire.Time(w.EndedAt), CanceledAt: wire.Time(w.CanceledAt)}
}

// workflowJSON is the Workflow resource.
type workflowJSON struct {
	workflowHead
	Nodes []nodeJSON `json:"nodes"`
}

type nodeJSON struct {
	Name       string   `json:"name"`
	DependsOn  []string `json:"depends_on"`
	Queue      string   `json:"queue"`
	JobID      string   `json:"job_id"`
	Status     *string  `json:"status"`
	Attempts   int      `json:"attempts"`
	EnqueuedAt *string  `json:"enqueued_at"`
	StartedAt  *string  `json:"started_at"`
	EndedAt    *string  `json:"ended_at"`
	LastError  *string  `json:"last_error"`
}

type workflowSummaryJSON struct {
	workflowHead
	Nodes  int            `json:"nodes"`
	Counts map[string]int `json:"counts"`
}

type workflowsJSON struct {
	Workflows []workflowSummaryJSON `json:"workflows"`
}

func toWorkflowJSON(w *workflow.Workflow) workflowJSON {
	out := workflowJSON{workflowHead: toWorkflowHead(w), Nodes: make([]nodeJSON, len(w.Nodes))}
	for i, n := range w.Nodes {
		deps := n.DependsOn
		if deps == nil {
			deps = []string{}
		}
		out.Nodes[i] = nodeJSON{Name: n.Name, DependsOn: deps, Queue: n.Queue, JobID: n.JobID, Status: nilIfEmpty(string(n.Status)),
			Attempts: n.Attempts, EnqueuedAt: wire.Time(n.EnqueuedAt), StartedAt: wire.Time(n.StartedAt), EndedAt: wire.Time(n.EndedAt),
			LastError: nilIfEmpty(n.LastError)}
	}
	return out
}

func toWorkflowSummary(w *workflow.Workflow) workflowSummaryJSON {
	out := workflowSummaryJSON{workflowHead: toWorkflowHead(w), Nodes: len(w.Nodes), Counts: map[string]int{}}
	for _, n := range w.Nodes {
		st := string(n.Status)
		if st == "" {
			st = "gone"
		}
		out.Counts[st]++
	}
	return out
}
