package dispatch

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

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
// may follow: at least once, as everything else.) A job whose last
// attempt's dispatcher died is put in the dead set by the reclaim sweep,
// which knows nothing of push jobs: every RefreshInterval each dispatcher
// reads, newest first, the deaths of its push queues since its last look
// (sweepDead) and enqueues the failure callback of each such job, under
// the same idempotency key, so it is made once however many look.

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
	// there was none) and body (JSON, or the text as a string, at most
	// 64 KiB; null when it was empty, absent when there was none).
	Response struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body,omitempty"`
	} `json:"response"`
	Error string `json:"error,omitempty"`
}

// deadLookBack is how far back a dispatcher's first look at the dead sets
// goes (deaths while no dispatcher ran), and the overlap of later looks.
const (
	deadLookBack  = time.Hour
	deadOverlap   = 5 * time.Second
	deadPageLimit = 100
)

// sweepDead enqueues the failure callbacks of the push jobs that the
// reclaim sweep put in the dead set (their last attempt's dispatcher
// died) since the last look, in every push queue served here.
func (d *Dispatcher) sweepDead(ctx context.Context, queues []string) {
	now := d.clock.Now()
	for _, q := range queues {
		since, ok := d.deadSeen[q]
		if !ok {
			since = now.Add(-deadLookBack)
		}
		newest, err := d.sweepDeadQueue(ctx, q, since.Add(-deadOverlap))
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dispatch: reading the dead set for failure callbacks", "queue", q, "err", err)
			}
			continue
		}
		if newest.After(since) {
			since = newest
		}
		d.deadSeen[q] = since
	}
}

// sweepDeadQueue reads q's dead set newest first down to after, enqueues
// the failure callbacks due, and answers the newest death it saw.
func (d *Dispatcher) sweepDeadQueue(ctx context.Context, q string, after time.Time) (time.Time, error) {
	var newest time.Time
	cursor := ""
	// The first page is the newest death alone: on most looks it is one
	// seen already, and no more is read.
	for limit := 1; ; limit = deadPageLimit {
		jobs, next, err := d.client.List(ctx, q, queue.ListOptions{Status: queue.StatusDead, Limit: limit, Cursor: cursor})
		if err != nil {
			return newest, err
		}
		for _, j := range jobs {
			if j.DiedAt.Before(after) {
				return newest, nil
			}
			if j.DiedAt.After(newest) {
				newest = j.DiedAt
			}
			env, ok := Open(j)
			if !ok || env.CallbackOf != "" || env.FailureCallbackURL == "" || !strings.HasPrefix(j.LastError, queue.LeaseExpiredError) {
				continue // no callback asked for, or one sent by the attempt that ended it
			}
			d.enqueueCallback(ctx, j, Attempt{Error: j.LastError, Outcome: "dead"}, nil, env.FailureCallbackURL)
		}
		if next == "" {
			return newest, nil
		}
		cursor = next
	}
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
	} else if a.Status != 0 {
		s.Response.Body = a.respBody // a failed attempt's answer
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
