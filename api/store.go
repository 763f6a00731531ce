package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
)

// The API has two seams, one interface each: the job engine ([Store],
// what *queue.Client is; required) and the recurring jobs ([CronStore],
// what *cron.Store is; optional, because the cron routes exist only when
// one is configured). Every route but the cron ones is served by the
// engine: no route depends on a method the engine might lack.

// Store is the job engine as the API uses it: every method is one of
// *queue.Client, which is the only implementation (tests wrap it, or
// embed the interface and override a method, to inject faults). Errors
// are the queue package's (queue.ErrNotFound, *queue.FieldError, ...):
// the API maps them to its answers.
type Store interface {
	// Producing: POST /v1/jobs, /v1/jobs/batch, /v1/queues/{q}/jobs.
	Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error)
	EnqueueBatch(ctx context.Context, jobs []queue.NewJob) ([]queue.Enqueued, error)

	// Reading: GET /v1/queues..., the job by id, /metrics.
	Get(ctx context.Context, queue, id string) (*queue.Job, error)
	List(ctx context.Context, queue string, o ListOptions) ([]*queue.Job, string, error)
	Queues(ctx context.Context) ([]string, error)
	Stats(ctx context.Context, queue string) (queue.Stats, error)

	// Managing single jobs and the dead set: reschedule, cancel, retry,
	// requeue and purge the dead.
	Reschedule(ctx context.Context, queue, id string, runAt time.Time) (*queue.Job, error)
	Cancel(ctx context.Context, queue, id string) (*queue.Job, error)
	RunNow(ctx context.Context, queue, id string) (*queue.Job, error)
	RequeueDead(ctx context.Context, queue, kind string) (int, error)
	PurgeDead(ctx context.Context, queue, kind string) (int, error)

	// Managing a whole queue: pause, resume, a reclaim sweep, delete.
	Pause(ctx context.Context, queue string) error
	Resume(ctx context.Context, queue string) error
	Reclaim(ctx context.Context, queue string) ([]string, error)
	DeleteQueue(ctx context.Context, queue string, force bool) error
	// A queue's rate and in-flight limits: /v1/queues/{q}/limits.
	Limits(ctx context.Context, queue string) (queue.Limits, error)
	SetLimits(ctx context.Context, queue string, l queue.Limits) error
	ClearLimits(ctx context.Context, queue string) error

	// The worker protocol: claim, complete, fail, heartbeat, and ending
	// as canceled a job whose cancellation was requested.
	Claim(ctx context.Context, queue string, o queue.ClaimOptions) ([]*queue.Job, error)
	Fail(ctx context.Context, queue, id, token string, o queue.FailOptions) (queue.FailResult, error)
	Heartbeat(ctx context.Context, queue, id, token string, extend time.Duration) (queue.Lease, error)
	CancelClaimed(ctx context.Context, queue, id, token string) error

	// Artifacts, logs and progress of a running job: complete and
	// heartbeat that carry them, PUT and GET .../artifacts, POST and GET
	// .../logs.
	CompleteManyJobs(ctx context.Context, queue string, acks []queue.Ack) ([]*queue.Job, []error, error)
	HeartbeatWith(ctx context.Context, queue, id, token string, o queue.HeartbeatOptions) (queue.Lease, error)
	AttachArtifacts(ctx context.Context, queue, id, token string, arts map[string]json.RawMessage) error
	Artifacts(ctx context.Context, queue, id string) (json.RawMessage, error)
	AppendLog(ctx context.Context, queue, id, token string, lines []string) (queue.LogAppend, error)
	Logs(ctx context.Context, queue, id string, after int64, limit int) (queue.LogPage, error)

	// Events: GET /v1/events.
	Subscribe(ctx context.Context, queues ...string) (<-chan queue.Event, error)

	// RedisClock is the engine's estimate of Redis's clock against this
	// instance's: GET /v1/status.
	RedisClock() queue.ClockEstimate
}

// CronStore keeps the recurring jobs: the /v1/cron routes, registered only
// when [Config.Cron] is set.
//
// Errors: one wrapping queue.ErrNotFound for an unknown name (404), a
// *queue.FieldError (or one wrapping queue.ErrInvalid) for a bad field —
// "schedule" or "timezone", say — (400, naming it), one wrapping
// queue.ErrPayloadTooLarge for a payload its jobs could not carry (413).
type CronStore interface {
	// Put creates or replaces the entry of e.Name; created tells which.
	Put(ctx context.Context, e CronEntry) (created bool, err error)
	Get(ctx context.Context, name string) (CronEntry, error)
	// ListPage reads a page of the entries, by name (see cron.ListOptions).
	ListPage(ctx context.Context, o cron.ListOptions) (cron.Page, error)
	Delete(ctx context.Context, name string) error
	// Trigger enqueues one run of the entry now.
	Trigger(ctx context.Context, name string) (*queue.Job, error)
}

// CronEntry is a recurring job as the cron routes read and write it: the
// cron package's Entry, so *cron.Store is a CronStore as it is.
type CronEntry = cron.Entry

// ListOptions select a page of [Store.List].
type ListOptions = queue.ListOptions

// The queue client is the engine; the cron package's store keeps the
// recurring jobs.
var (
	_ Store     = (*queue.Client)(nil)
	_ CronStore = (*cron.Store)(nil)
)
