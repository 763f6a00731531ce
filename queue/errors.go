package queue

import (
	"errors"

	"github.com/chronoq/chronoq/internal/names"
)

// Sentinel errors. Match them with errors.Is; the errors returned carry
// more detail (which queue, which field).
var (
	// ErrInvalid is wrapped by every error about bad input: a bad queue
	// name, kind, payload, option or time.
	ErrInvalid = names.ErrInvalid
	// ErrNotFound: no such job (or it has expired).
	ErrNotFound = errors.New("job not found")
	// ErrLeaseLost: the claim token is not the job's current one — the job
	// was reclaimed, finished, or claimed again. Nothing was changed.
	ErrLeaseLost = errors.New("lease lost: stale or wrong claim token")
	// ErrConflict: the job is in a state that does not allow the operation
	// (rescheduling a completed job, say).
	ErrConflict = errors.New("conflict with the job's state")
	// ErrPayloadTooLarge: a payload or result over Config.MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrTooManyQueues: a new queue would pass Config.MaxQueues.
	ErrTooManyQueues = errors.New("too many queues")
	// ErrTooManyOverrides: a new flow override would pass
	// MaxFlowOverrides.
	ErrTooManyOverrides = errors.New("too many flow overrides")
	// ErrQueueBusy: a queue to delete has jobs processing (see
	// Client.DeleteQueue's force).
	ErrQueueBusy = errors.New("queue has jobs processing")
	// ErrNoQueue: no such queue (never used, or deleted).
	ErrNoQueue = errors.New("no such queue")
)
