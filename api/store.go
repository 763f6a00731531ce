package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/queue"
)

// The engine as the handlers see it: one small interface per group of
// routes. *queue.Client implements all of them but [CronStore].

// Producer adds jobs: POST /v1/jobs, /v1/jobs/batch, /v1/queues/{q}/jobs.
type Producer interface {
	Enqueue(ctx context.Context, nj queue.NewJob) (queue.Enqueued, error)
	EnqueueBatch(ctx context.Context, jobs []queue.NewJob) ([]queue.Enqueued, error)
}

// Reader reads jobs and queues: GET /v1/queues..., the job by id, metrics.
type Reader interface {
	Get(ctx context.Context, queue, id string) (*queue.Job, error)
	Queues(ctx context.Context) ([]string, error)
	Stats(ctx context.Context, queue string) (queue.Stats, error)
}

// Operator acts on a whole queue: pause, resume, a reclaim sweep, delete.
type Operator interface {
	DeleteQueue(ctx context.Context, queue string, force bool) error
	Pause(ctx context.Context, queue string) error
	Resume(ctx context.Context, queue string) error
	Reclaim(ctx context.Context, queue string) ([]string, error)
}

// Claimer is the worker protocol: claim, complete, fail, heartbeat, and
// ending as canceled a job whose cancellation was requested.
type Claimer interface {
	Claim(ctx context.Context, queue string, o queue.ClaimOptions) ([]*queue.Job, error)
	Complete(ctx context.Context, queue, id, token string, result json.RawMessage) error
	Fail(ctx context.Context, queue, id, token string, o queue.FailOptions) (queue.FailResult, error)
	Heartbeat(ctx context.Context, queue, id, token string, extend time.Duration) (queue.Lease, error)
	CancelClaimed(ctx context.Context, queue, id, token string) error
}

// EventSource streams job events: GET /v1/events.
type EventSource interface {
	Subscribe(ctx context.Context, queues ...string) (<-chan queue.Event, error)
}

// Store is every core interface at once: what [Config.Store] must be.
type Store interface {
	Producer
	Reader
	Operator
	Claimer
	EventSource
}

// Manager manages single jobs and the dead set: list, reschedule, cancel,
// retry, requeue and purge the dead.
type Manager interface {
	List(ctx context.Context, queue string, o ListOptions) ([]*queue.Job, string, error)
	Cancel(ctx context.Context, queue, id string) (*queue.Job, error)
	Reschedule(ctx context.Context, queue, id string, runAt time.Time) (*queue.Job, error)
	RunNow(ctx context.Context, queue, id string) (*queue.Job, error)
	RequeueDead(ctx context.Context, queue, kind string) (int, error)
	PurgeDead(ctx context.Context, queue, kind string) (int, error)
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
	List(ctx context.Context) ([]CronEntry, error)
	Delete(ctx context.Context, name string) error
	// Trigger enqueues one run of the entry now.
	Trigger(ctx context.Context, name string) (*queue.Job, error)
}

// CronEntry is a recurring job as the cron routes read and write it: the
// cron package's Entry, so *cron.Store is a CronStore as it is.
type CronEntry = cron.Entry

// ListOptions select a page of [Manager.List].
type ListOptions = queue.ListOptions

// The queue client is the store and the manager.
var (
	_ Store   = (*queue.Client)(nil)
	_ Manager = (*queue.Client)(nil)
)
