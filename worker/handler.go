package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/chronoq/chronoq/queue"
)

// Handler runs a job. A nil error completes the job with result (optional
// JSON); an error fails the attempt (see [SkipRetry] and [RetryAfter]).
// The job holds its id, kind, payload, attempt number and claim token.
type Handler interface {
	Work(ctx context.Context, job *queue.Job) (result json.RawMessage, err error)
}

// HandlerFunc turns a function into a [Handler].
type HandlerFunc func(ctx context.Context, job *queue.Job) (json.RawMessage, error)

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
	return f(ctx, job)
}

// Middleware wraps a Handler.
type Middleware func(Handler) Handler

// ErrUnknownKind is the error of a job whose kind has no handler in the
// [Mux]. It is retried like any error: another worker (a newer version,
// say) may know the kind.
var ErrUnknownKind = errors.New("worker: no handler for the job's kind")

// Mux is a Handler that sends each job to the handler of its kind, through
// the middleware. Register everything before the worker starts; it is
// safe for concurrent use.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
	mws      []Middleware
	chains   map[string]Handler // handlers wrapped in mws; nil until first used
	unknown  Handler            // the ErrUnknownKind handler, wrapped too
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[string]Handler{}} }

// Handle registers h for kind. It panics when kind is not a valid job kind,
// h is nil, or kind has a handler already: these are programming errors.
func (m *Mux) Handle(kind string, h Handler) {
	if err := names.ValidateKind(kind); err != nil {
		panic(fmt.Sprintf("worker: Mux.Handle: %v", err))
	}
	if h == nil {
		panic("worker: Mux.Handle: nil handler for " + kind)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.handlers[kind]; dup {
		panic("worker: Mux.Handle: a handler for " + kind + " exists already")
	}
	m.handlers[kind] = h
	m.chains = nil
}

// HandleFunc registers f for kind, as Handle does.
func (m *Mux) HandleFunc(kind string, f func(ctx context.Context, job *queue.Job) (json.RawMessage, error)) {
	m.Handle(kind, HandlerFunc(f))
}

// Use appends middleware. The first one given is the outermost: with
// Use(a, b), a job goes through a, then b, then the handler.
func (m *Mux) Use(mws ...Middleware) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mws = append(m.mws, mws...)
	m.chains = nil
}

// Kinds lists the registered kinds, sorted.
func (m *Mux) Kinds() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ks := make([]string, 0, len(m.handlers))
	for k := range m.handlers {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Work runs job through the middleware and the handler of its kind.
func (m *Mux) Work(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
	m.mu.RLock()
	chains, unknown := m.chains, m.unknown
	m.mu.RUnlock()
	if chains == nil {
		chains, unknown = m.build()
	}
	h, ok := chains[job.Kind]
	if !ok {
		h = unknown
	}
	return h.Work(ctx, job)
}

// build wraps every handler in the middleware, once.
func (m *Mux) build() (map[string]Handler, Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.chains != nil {
		return m.chains, m.unknown
	}
	wrap := func(h Handler) Handler {
		for i := len(m.mws) - 1; i >= 0; i-- {
			h = m.mws[i](h)
		}
		return h
	}
	m.chains = make(map[string]Handler, len(m.handlers))
	for k, h := range m.handlers {
		m.chains[k] = wrap(h)
	}
	m.unknown = wrap(HandlerFunc(func(_ context.Context, job *queue.Job) (json.RawMessage, error) {
		return nil, fmt.Errorf("%w %q", ErrUnknownKind, job.Kind)
	}))
	return m.chains, m.unknown
}

// PanicError is a handler's panic, recovered: the value and the stack of
// the goroutine that panicked. Its message, the job's last error, holds
// both.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack) }

// Unwrap answers the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// recovered turns a recover() value into a *PanicError; call it in the
// deferred function that recovered, so that the stack is the panic's.
func recovered(v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack()}
}

// Recover is middleware that turns a panic of the handlers inside it into
// a *PanicError, so that the middleware outside it (Logging, metrics) sees
// the panic as an error. The worker recovers panics in any case, so Recover
// is only needed for that: put it after such middleware in Use.
func Recover(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, job *queue.Job) (res json.RawMessage, err error) {
		defer func() {
			if v := recover(); v != nil {
				res, err = nil, recovered(v)
			}
		}()
		return next.Work(ctx, job)
	})
}

// Logging is middleware that logs each run of a handler when it returns:
// at Info when it succeeded, at Warn with the error when it failed. The
// clock measures the run; nil means the real clock. A nil logger means
// slog.Default().
func Logging(logger *slog.Logger, clock clockwork.Clock) Middleware {
	logger = cmp.Or(logger, slog.Default())
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, job *queue.Job) (json.RawMessage, error) {
			start := clock.Now()
			res, err := next.Work(ctx, job)
			attrs := []slog.Attr{slog.String("queue", job.Queue), slog.String("kind", job.Kind),
				slog.String("id", job.ID), slog.Int("attempt", job.Attempts),
				slog.Duration("duration", clock.Since(start).Round(time.Microsecond))}
			if err != nil {
				logger.LogAttrs(ctx, slog.LevelWarn, "job failed", append(attrs, slog.String("err", err.Error()))...)
			} else {
				logger.LogAttrs(ctx, slog.LevelInfo, "job done", attrs...)
			}
			return res, err
		})
	}
}
