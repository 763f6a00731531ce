package queue

import "github.com/chronoq/chronoq/internal/names"

// Validation errors; each error returned for bad input wraps one of them and
// [ErrInvalid]. The name rules are those of NewJob's fields and
// Config.Namespace.
var (
	ErrInvalidQueue = names.ErrInvalidQueue
	ErrInvalidKind  = names.ErrInvalidKind
	ErrInvalidID    = names.ErrInvalidID
)
