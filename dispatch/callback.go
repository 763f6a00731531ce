package dispatch

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/chronoq/chronoq/queue"
)

// Callbacks. A job may carry callback_url (called when it completes) and
// failure_callback_url (when it dies). The callback is itself a push job,
// enqueued into the same queue by the attempt that ended the job, before
// that attempt is acknowledged: it is signed like any request, retried
// with the queue's backoff, kept in the dead set when it never succeeds,
// and sent under the same guard. Its idempotency key is the job's id and
// fence, so a retried enqueue makes it once. (Should the ending attempt
// lose its lease before its ack, the job runs again and a second callback
// may follow: at least once, as everything else. A job whose last
// attempt's worker died, reclaimed into the dead set, gets no callback.)

// CallbackKind is the chronoq-kind of a callback request.
const CallbackKind = "chronoq.callback"

// Summary is the body of a callback request.
type Summary struct {
	JobID    string `json:"job_id"`
	Queue    string `json:"queue"`
	Kind     string `json:"kind,omitempty"`
	Status   string `json:"status"` // "completed" or "dead"
	Attempts int    `json:"attempts"`
	// Response is the last attempt's response: its status code (0 when
	// there was none) and body (a completed job's result body).
	Response struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body,omitempty"`
	} `json:"response"`
	Error string `json:"error,omitempty"`
}

func (d *Dispatcher) enqueueCallback(ctx context.Context, job *queue.Job, a Attempt, res json.RawMessage, url string) {
	s := Summary{JobID: job.ID, Queue: job.Queue, Kind: job.Kind, Status: "completed", Attempts: job.Attempts, Error: a.Error}
	if env, ok := Open(job); ok {
		s.Kind = env.Kind
	}
	if a.Outcome == "dead" {
		s.Status = "dead"
	}
	s.Response.Status = a.Status
	if len(res) > 0 {
		var r result
		if json.Unmarshal(res, &r) == nil {
			s.Response.Body = r.Body
		}
	}
	body, _ := json.Marshal(s)
	env := Envelope{Body: body, Kind: CallbackKind, CallbackOf: job.ID,
		Target: &storedTarget{URL: url, Method: http.MethodPost, TimeoutMs: DefaultTimeout.Milliseconds()}}
	payload, _ := json.Marshal(env)
	_, err := d.client.Enqueue(context.WithoutCancel(ctx), queue.NewJob{Queue: job.Queue, Kind: EnvelopeKind, Payload: payload,
		IdempotencyKey: "chronoq.callback:" + job.ID + ":" + strconv.FormatInt(job.Fence, 10)})
	if err != nil {
		d.log.Error("dispatch: enqueueing a callback", "queue", job.Queue, "id", job.ID, "url", url, "err", err)
	}
}
