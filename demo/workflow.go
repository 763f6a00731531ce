package demo

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/workflow"
)

// Sample workflows: a fan-out/fan-in the pool works, so that a workflow's
// graph has something real to show.
const (
	DefaultWorkflowWidth = 6
	MaxWorkflowWidth     = 50
)

// SampleWorkflow is a fan-out/fan-in in queue q: "fetch", then width
// "part-<i>" nodes after it, then "merge" after them all, then "notify";
// its jobs are of the demo's kinds, so the pool works them (with its
// latency and failures).
func SampleWorkflow(q string, width int) workflow.Spec {
	job := func(kind, node string) queue.NewJob {
		return queue.NewJob{Queue: q, Kind: kind, Payload: []byte(fmt.Sprintf(`{"node":%q}`, node))}
	}
	nodes := []workflow.Node{{Name: "fetch", Job: job("webhook", "fetch")}}
	parts := make([]string, width)
	for i := range width {
		parts[i] = fmt.Sprintf("part-%d", i+1)
		nodes = append(nodes, workflow.Node{Name: parts[i], DependsOn: []string{"fetch"}, Job: job("thumbnail", parts[i])})
	}
	return workflow.Spec{Nodes: append(nodes,
		workflow.Node{Name: "merge", DependsOn: parts, Job: job("invoice", "merge")},
		workflow.Node{Name: "notify", DependsOn: []string{"merge"}, Job: job("email", "notify")})}
}

type workflowRequest struct {
	Width *int `json:"width"`
}

// postWorkflow: POST /v1/demo/workflow {"width"?}: starts a sample
// workflow in the pool's queue.
func (p *Pool) postWorkflow(c echo.Context) error {
	var req workflowRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	width := DefaultWorkflowWidth
	if req.Width != nil {
		width = *req.Width
	}
	if width < 1 || width > MaxWorkflowWidth {
		return invalid("width", fmt.Sprintf("must be in [1, %d], got %d", MaxWorkflowWidth, width))
	}
	w, err := p.cfg.Workflows.Enqueue(c.Request().Context(), SampleWorkflow(p.cfg.Queue, width))
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/workflows/"+w.ID)
	return c.JSON(http.StatusCreated, map[string]any{"id": w.ID, "nodes": len(w.Nodes)})
}
