package worker

import (
	"errors"
	"time"
)

// Causes of a handler's cancelled context, read with context.Cause. A lost
// lease is a cause that wraps queue.ErrLeaseLost.
var (
	// ErrJobCanceled: someone asked for the job to be canceled
	// (queue.Client.Cancel of a processing job). Unless the handler still
	// succeeds, the job ends as canceled, not retried.
	ErrJobCanceled = errors.New("worker: job cancellation requested")
	// ErrTimeout: the job ran past its timeout (Config.Timeout or
	// Config.KindTimeouts). The attempt fails and is retried.
	ErrTimeout = errors.New("worker: job timed out")
	// ErrStopped: the worker stopped before the handler returned; the job
	// was handed back to pending.
	ErrStopped = errors.New("worker: stopped")
)

// SkipRetry marks err as final: the job goes to the dead set at once,
// whatever attempts it has left. Use it for failures a retry cannot fix
// (bad input).
func SkipRetry(err error) error {
	if err == nil {
		err = errors.New("failed, not to be retried")
	}
	return &skipRetryError{err: err}
}

type skipRetryError struct{ err error }

func (e *skipRetryError) Error() string { return e.err.Error() }
func (e *skipRetryError) Unwrap() error { return e.err }

// RetryAfter fails the attempt and asks for the next one d after the
// handler returns, instead of after the job's backoff (rate limits,
// Retry-After headers). The job still dies when its attempts are spent. A
// negative d means now; a d over queue.MaxDelay is MaxDelay. The delay is
// counted on Redis's clock from when the store records the failure, less
// the time since the handler returned, so a host clock that is off does
// not move it.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAfterError{delay: max(d, 0), err: err}
}

type retryAfterError struct {
	delay time.Duration
	err   error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// IsSkipRetry reports whether err, or an error it wraps, was made by
// [SkipRetry]: the job goes to the dead set at once.
func IsSkipRetry(err error) bool {
	var e *skipRetryError
	return errors.As(err, &e)
}

// RetryAfterOf answers the delay of an error made by [RetryAfter] (or
// wrapping one), ok false for any other error.
func RetryAfterOf(err error) (d time.Duration, ok bool) {
	var e *retryAfterError
	if errors.As(err, &e) {
		return e.delay, true
	}
	return 0, false
}
