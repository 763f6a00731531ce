package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/api/internal/wire"
	"github.com/chronoq/chronoq/queue"
	"github.com/chronoq/chronoq/registry"
)

// The error codes of the API.
const (
	CodeInvalidArgument    = "invalid_argument"    // 400
	CodeUnauthenticated    = "unauthenticated"     // 401
	CodeForbidden          = "forbidden"           // 403
	CodeNotFound           = "not_found"           // 404
	CodeMethodNotAllowed   = "method_not_allowed"  // 405
	CodeConflict           = "conflict"            // 409
	CodeLeaseLost          = "lease_lost"          // 409
	CodeQueueBusy          = "queue_busy"          // 409
	CodePayloadTooLarge    = "payload_too_large"   // 413
	CodeMisdirectedRequest = "misdirected_request" // 421: a Host that does not name a server without a token (host.go)
	CodeUnavailable        = "unavailable"         // 503
	CodeInternal           = "internal"            // 500
)

// Error is an error as the API answers it:
// {"error":{"code","message","field"}}.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	err     error  // the cause, for the log only
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%d %s: %s: %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.err }

func invalidArg(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

func tooLarge(field, msg string) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge, Field: field, Message: msg}
}

var (
	errUnauthenticated = &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
		Message: "a valid bearer token is required (Authorization: Bearer <token>)"}
	errCrossOrigin = &Error{Status: http.StatusForbidden, Code: CodeForbidden,
		Message: "a state-changing request from a browser must come from the dashboard's own origin"}
)

// toError maps any error of a handler to the API's answer: the API's own
// errors as they are, then the wire layer's, the router's, a field of the
// engine's and the engine's errors; anything else is a 500.
func toError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var we *wire.Error
	if errors.As(err, &we) {
		if we.TooLarge {
			return tooLarge(we.Field, we.Message)
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: we.Field, Message: we.Message}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return routerError(he, err)
	}
	var fe *queue.FieldError
	if errors.As(err, &fe) {
		if e := fieldError(fe, err); e != nil {
			return e
		}
	}
	return engineError(err)
}

// routerError is the answer to an error of Echo's (no route, a method the
// route does not take, ...).
func routerError(he *echo.HTTPError, err error) *Error {
	switch he.Code {
	case http.StatusNotFound:
		return &Error{Status: he.Code, Code: CodeNotFound, Message: "no such route", err: err}
	case http.StatusMethodNotAllowed:
		return &Error{Status: he.Code, Code: CodeMethodNotAllowed, Message: "method not allowed on this route", err: err}
	case http.StatusRequestEntityTooLarge:
		return &Error{Status: he.Code, Code: CodePayloadTooLarge, Message: "request body too large", err: err}
	case http.StatusUnauthorized:
		return errUnauthenticated
	}
	if he.Code >= 400 && he.Code < 500 {
		return &Error{Status: he.Code, Code: CodeInvalidArgument, Message: http.StatusText(he.Code), err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", err: err}
}

// fieldError is the answer to an error of the engine's that names a field
// (of the job at fe.Index of a batch); nil for one of a kind it does not
// know, which engineError answers.
func fieldError(fe *queue.FieldError, err error) *Error {
	field := fe.Field
	if fe.Index >= 0 {
		field = fmt.Sprintf("jobs[%d].%s", fe.Index, fe.Field)
	}
	switch {
	case errors.Is(err, queue.ErrPayloadTooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge, Field: field, Message: fe.Err.Error(), err: err}
	case errors.Is(err, queue.ErrInvalid):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: field, Message: fe.Err.Error(), err: err}
	case errors.Is(err, queue.ErrTooManyLabelSets):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Field: field, Message: fe.Err.Error(), err: err}
	}
	return nil
}

// engineError is the answer to an error of the engine's, by its sentinel;
// a 500 for any other.
func engineError(err error) *Error {
	switch {
	case errors.Is(err, queue.ErrPayloadTooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge, Message: err.Error(), err: err}
	case errors.Is(err, queue.ErrInvalid):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: invalidField(err), Message: err.Error(), err: err}
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrNoQueue):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error(), err: err}
	case errors.Is(err, queue.ErrQueueBusy):
		return &Error{Status: http.StatusConflict, Code: CodeQueueBusy, Message: err.Error(), err: err}
	case errors.Is(err, queue.ErrLeaseLost):
		return &Error{Status: http.StatusConflict, Code: CodeLeaseLost, Message: err.Error(), err: err}
	case errors.Is(err, queue.ErrConflict), errors.Is(err, queue.ErrTooManyQueues), errors.Is(err, queue.ErrTooManyOverrides),
		errors.Is(err, registry.ErrTooManyWorkers):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error(), err: err}
	case errors.Is(err, queue.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The cause names Redis's address: it goes to the log only.
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the job store (Redis) is unavailable; retry later", err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", err: err}
}

// invalidField names the field of a validation error of the queue package
// that carries no FieldError.
func invalidField(err error) string {
	switch {
	case errors.Is(err, queue.ErrInvalidQueue):
		return "queue"
	case errors.Is(err, queue.ErrInvalidKind):
		return "kind"
	case errors.Is(err, queue.ErrInvalidID):
		return "id"
	}
	return ""
}

type errorBody struct {
	Error *Error `json:"error"`
}

// handleError is the Echo HTTPErrorHandler: it writes err as the API's
// error body, and logs what the client is not told.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	e := toError(err)
	switch {
	case e.Status >= 500 && e.Status != http.StatusServiceUnavailable:
		s.log.Error("api: request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	case e.Status == http.StatusServiceUnavailable:
		s.log.Warn("api: store unavailable", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	h := c.Response().Header()
	switch e.Status {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="chronoq"`)
	case http.StatusServiceUnavailable:
		h.Set("Retry-After", "1")
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(e.Status)
		return
	}
	_ = writeJSON(c, e.Status, errorBody{e})
}
