package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/chronoq/chronoq/cron"
	"github.com/chronoq/chronoq/internal/store"
	"github.com/chronoq/chronoq/queue"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// The API sees the job engine through one small interface per role, each
// what a group of handlers needs: [Producer], [Reader], [Manager],
// [Consumer], [Outputs] and [Subscriber]. [Store] is their
// union, what [Config.Store] takes; *queue.Client is the one
// implementation (tests wrap it, or embed the interface and override a
// method, to inject faults). Errors are the queue package's
// (queue.ErrNotFound, *queue.FieldError, ...): the API maps them to its
// answers. The recurring jobs are a seam of their own, [CronStore],
// whose routes exist only when one is configured.

// Producer enqueues jobs: POST /v1/jobs, /v1/jobs/batch and
// /v1/queues/{q}/jobs. A single enqueue is a batch of one, or part of a
// batch of the enqueues of its queue that arrive meanwhile.
type Producer interface {
	EnqueueBatch(ctx context.Context, jobs []queue.NewJob) ([]queue.Enqueued, error)
}

// Reader reads jobs and queues: GET /v1/queues..., a job by id and the
// queue gauges of /metrics.
type Reader interface {
	Get(ctx context.Context, queue, id string) (*queue.Job, error)
	List(ctx context.Context, queue string, o ListOptions) ([]*queue.Job, string, error)
	Queues(ctx context.Context) ([]string, error)
	Stats(ctx context.Context, queue string) (queue.Stats, error)
}

// Manager changes jobs and queues on an operator's word: reschedule,
// cancel, retry, requeue and purge the dead; pause, resume, a reclaim
// sweep, delete a queue; a queue's rate and in-flight limits
// (/v1/queues/{q}/limits); its flow control (/v1/queues/{q}/flow...):
// the limits of each flow key, keys' overrides, the keys with work.
type Manager interface {
	Reschedule(ctx context.Context, queue, id string, runAt time.Time) (*queue.Job, error)
	RescheduleIn(ctx context.Context, queue, id string, d time.Duration) (*queue.Job, error)
	Cancel(ctx context.Context, queue, id string) (*queue.Job, error)
	RunNow(ctx context.Context, queue, id string) (*queue.Job, error)
	RequeueDead(ctx context.Context, queue, kind string) (int, error)
	PurgeDead(ctx context.Context, queue, kind string) (int, error)

	Pause(ctx context.Context, queue string) error
	Resume(ctx context.Context, queue string) error
	Reclaim(ctx context.Context, queue string) ([]string, error)
	DeleteQueue(ctx context.Context, queue string, force bool) error

	Limits(ctx context.Context, queue string) (queue.Limits, error)
	SetLimits(ctx context.Context, queue string, l queue.Limits) (queue.Limits, error)
	ClearLimits(ctx context.Context, queue string) error

	FlowLimits(ctx context.Context, queue string) (queue.FlowLimits, error)
	SetFlowLimits(ctx context.Context, queue string, l queue.FlowLimits) (queue.FlowLimits, error)
	ClearFlowLimits(ctx context.Context, queue string) error
	SetFlowOverride(ctx context.Context, queue string, o queue.FlowOverride) (queue.FlowOverride, error)
	DeleteFlowOverride(ctx context.Context, queue, key string) error
	FlowOverrides(ctx context.Context, queue, cursor string, limit int) ([]queue.FlowOverride, string, error)
	FlowKeys(ctx context.Context, queue string, offset, limit int) ([]queue.FlowKeyStats, int64, error)
	FlowKey(ctx context.Context, queue, key string) (queue.FlowKeyStats, error)
	FlowKeyJobs(ctx context.Context, queue, key string, limit int) (pending, processing []string, err error)
}

// Consumer is the worker protocol: claim, complete (with a result,
// artifacts and a last log), fail, heartbeat (with progress and log
// lines), and ending as canceled a job whose cancellation was requested.
type Consumer interface {
	Claim(ctx context.Context, queue string, o queue.ClaimOptions) ([]*queue.Job, error)
	CompleteMany(ctx context.Context, queue string, acks []queue.Ack) ([]*queue.Job, []error, error)
	FailMany(ctx context.Context, queue string, fails []queue.Failed) ([]queue.FailResult, []error, error)
	Heartbeat(ctx context.Context, queue, id, token string, o queue.HeartbeatOptions) (queue.Lease, error)
	CancelClaimed(ctx context.Context, queue, id, token string) error
}

// Outputs are what a running job leaves besides its result: PUT and GET
// .../artifacts, POST and GET .../logs, and the log of a job's stream.
type Outputs interface {
	AttachArtifacts(ctx context.Context, queue, id, token string, arts map[string]json.RawMessage) error
	Artifacts(ctx context.Context, queue, id string) (json.RawMessage, error)
	AppendLog(ctx context.Context, queue, id, token string, lines []string) (queue.LogAppend, error)
	Logs(ctx context.Context, queue, id string, after int64, limit int) (queue.LogPage, error)
}

// Subscriber streams job events: GET /v1/events and a job's stream; and
// waits for a job's end: the ?wait of GET /v1/queues/{q}/jobs/{id} and of
// the enqueues.
type Subscriber interface {
	Subscribe(ctx context.Context, queues ...string) (<-chan queue.Event, error)
	WaitEnded(ctx context.Context, queue, id string, wait time.Duration) (*queue.Job, error)
}

// Engine is what the API reads of the engine beyond the roles: the
// client's clock (the server's, unless [Config.Clock] says otherwise) and
// Redis connection (which /readyz pings, unless [Config.Ready] says
// otherwise), its estimate of Redis's clock against this instance's (GET
// /v1/status), and a push job's delivery attempts (its notes). A
// *queue.Client's is plumbing.Of(client), which [New] takes itself.
type Engine interface {
	Clock() clockwork.Clock
	Redis() redis.UniversalClient
	RedisClock() store.Estimate
	Notes(ctx context.Context, queue, id string) ([]string, error)
}

// Store is the job engine as the API uses it: every role at once.
type Store interface {
	Producer
	Reader
	Manager
	Consumer
	Outputs
	Subscriber
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

// ListOptions select a page of [Reader.List].
type ListOptions = queue.ListOptions

// The queue client is the engine; the cron package's store keeps the
// recurring jobs.
var (
	_ Store     = (*queue.Client)(nil)
	_ CronStore = (*cron.Store)(nil)
)
