package chaos

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/chronoq/chronoq/queue"
)

// ForbiddenClasses are the error classes that must never reach a caller of
// the engine as a failure:
// the engine (and go-redis under it) must follow redirects, keep every
// script's keys in one slot, declare every key a script touches (NONLOCAL:
// "Script attempted to access a non local key", which Redis answers after
// the script's earlier writes), reload flushed scripts and survive a
// failover's unblocking.
var ForbiddenClasses = []string{"CROSSSLOT", "MOVED", "ASK", "NONLOCAL", "NOSCRIPT", "UNBLOCKED"}

// redisTokens are error codes of Redis replies, by the class they count as.
var redisTokens = []string{"CROSSSLOT", "MOVED", "ASK", "NOSCRIPT", "UNBLOCKED", "CLUSTERDOWN",
	"TRYAGAIN", "LOADING", "READONLY", "MASTERDOWN", "NOREPLICAS", "BUSY", "OOM"}

// Classify names the class of an error seen by a caller of the engine.
func Classify(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, queue.ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, queue.ErrNotFound):
		return "not_found"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return ClassifyText(err.Error())
}

// ClassifyText names the class of an error message.
func ClassifyText(s string) string {
	// Errors a script raises on a cluster node (after its earlier writes).
	switch {
	case strings.Contains(s, "attempted to access a non local key"):
		return "NONLOCAL"
	case strings.Contains(s, "attempted to access keys that do not hash to the same slot"):
		return "CROSSSLOT"
	}
	for _, t := range redisTokens {
		// Reply codes come first in Redis's message, after go-redis's and
		// the engine's prefixes ("queue: claim from q: queue: redis: MOVED ...").
		if strings.HasPrefix(s, t+" ") || strings.Contains(s, ": "+t+" ") || s == t {
			return t
		}
	}
	switch {
	case strings.Contains(s, "lease lost"):
		return "lease_lost"
	case strings.Contains(s, "connection refused"):
		return "conn_refused"
	case strings.Contains(s, "connection reset"):
		return "conn_reset"
	case strings.Contains(s, "broken pipe"):
		return "broken_pipe"
	case strings.Contains(s, "EOF"):
		return "eof"
	case strings.Contains(s, "pool timed out"), strings.Contains(s, "pool timeout"):
		return "pool_timeout"
	case strings.Contains(s, "timeout"):
		return "timeout"
	case strings.Contains(s, "use of closed network connection"), strings.Contains(s, "client is closed"):
		return "closed"
	case strings.Contains(s, "context deadline exceeded"):
		return "deadline"
	case strings.Contains(s, "context canceled"):
		return "canceled"
	}
	return "other"
}

// IsForbidden reports whether class is one of ForbiddenClasses.
func IsForbidden(class string) bool { return slices.Contains(ForbiddenClasses, class) }
