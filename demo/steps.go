package demo

import (
	"encoding/json"
	"fmt"
	"time"
)

// What a demo job shows while it runs: its work is cut into steps, each
// step a log line and a progress heartbeat, and a completed job leaves an
// artifact, so that a job's page has a live log, progress and an output.
const (
	// MinSteps and MaxSteps bound a job's steps: one per StepEvery of its
	// work, at least MinSteps (a job with no latency logs them at once).
	MinSteps  = 4
	MaxSteps  = 20
	StepEvery = 500 * time.Millisecond
	// ArtifactName is the artifact a completed demo job leaves.
	ArtifactName = "summary"
)

// stages are the names of each kind's stages, spread over its steps.
var stages = map[string][]string{
	"email":     {"render the template", "resolve the recipient", "connect to the SMTP relay", "send the message"},
	"webhook":   {"sign the payload", "resolve the host", "POST the event", "read the response"},
	"thumbnail": {"download the original", "decode the image", "resize", "encode and upload"},
	"invoice":   {"load the order", "compute the totals", "render the PDF", "store the invoice"},
}

// steps is how many steps a job that takes took is cut into.
func steps(took time.Duration) int {
	return min(MaxSteps, max(MinSteps, int((took+StepEvery-1)/StepEvery)))
}

// stage names step i (1 to n) of a job of kind.
func stage(kind string, i, n int) string {
	s, ok := stages[kind]
	if !ok {
		s = []string{"work"}
	}
	return s[(i-1)*len(s)/n]
}

// stepLine is the log line of step i of n.
func stepLine(kind string, i, n int) string {
	return fmt.Sprintf("%s (step %d of %d)", stage(kind, i, n), i, n)
}

// summary is the artifact a completed job of kind leaves: what it made.
func summary(kind string, payload json.RawMessage, worker string, attempt, n int, took time.Duration) json.RawMessage {
	var in map[string]any
	_ = json.Unmarshal(payload, &in) // a payload not of the demo's: no input shown
	var out map[string]any
	switch kind {
	case "email":
		out = map[string]any{"to": in["to"], "message_id": fmt.Sprintf("<%s-%d@chronoq>", worker, attempt), "bytes": 2048 + 64*n}
	case "webhook":
		out = map[string]any{"url": in["url"], "status": 200, "response_ms": took.Milliseconds() / 2}
	case "thumbnail":
		out = map[string]any{"image": in["image"], "thumbnail": fmt.Sprintf("thumbs/%v", in["image"]), "width": 256, "height": 256}
	default:
		out = map[string]any{"customer": in["customer"], "amount_cents": in["amount_cents"], "pdf": "invoices/demo.pdf", "pages": 1 + n%3}
	}
	v, _ := json.Marshal(map[string]any{"kind": kind, "worker": worker, "attempt": attempt, "steps": n,
		"took_ms": took.Milliseconds(), "output": out})
	return v
}
