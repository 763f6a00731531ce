package queue

import (
	"errors"
	"fmt"
)

// Every Redis key chronoq uses is built in this file.
//
// The keys of one queue all carry the queue's name as a hash tag,
// "<ns>:{<queue>}:...", so that they sit in one Redis Cluster slot and every
// script touches one slot only. Queue names are validated before any key
// is built: a name can hold no brace, so nothing can move the hash tag.

// The name rules are checked with byte loops, not regexps: they run on
// every call.

// nameOK reports whether s is 1 to max bytes, starting with a letter or
// digit of first, the rest from rest.
func nameOK(s string, max int, first, rest func(byte) bool) bool {
	if len(s) == 0 || len(s) > max || !first(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !rest(s[i]) {
			return false
		}
	}
	return true
}

func lowerOrDigit(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func alnum(c byte) bool        { return lowerOrDigit(c) || c >= 'A' && c <= 'Z' }
func queueRest(c byte) bool    { return lowerOrDigit(c) || c == '.' || c == '_' || c == '-' }
func kindRest(c byte) bool     { return alnum(c) || c == '.' || c == '_' || c == ':' || c == '-' }
func idByte(c byte) bool       { return alnum(c) || c == '_' || c == '-' }
func nsRest(c byte) bool       { return alnum(c) || c == ':' || c == '_' || c == '-' }

// Validation errors; each error returned for bad input wraps one of them and
// [ErrInvalid].
var (
	ErrInvalidQueue = fmt.Errorf("%w queue name", ErrInvalid)
	ErrInvalidKind  = fmt.Errorf("%w kind", ErrInvalid)
	ErrInvalidID    = fmt.Errorf("%w job id", ErrInvalid)
)

// ValidateQueue reports whether name is a valid queue name: 1 to 64 of
// [a-z0-9._-], starting with a letter or digit.
func ValidateQueue(name string) error {
	if !nameOK(name, 64, lowerOrDigit, queueRest) {
		return fmt.Errorf("%w %q: want ^[a-z0-9][a-z0-9._-]{0,63}$", ErrInvalidQueue, name)
	}
	return nil
}

// ValidateKind reports whether kind is a valid job kind: 1 to 128 of
// [A-Za-z0-9._:-], starting with a letter or digit.
func ValidateKind(kind string) error {
	if !nameOK(kind, 128, alnum, kindRest) {
		return fmt.Errorf("%w %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", ErrInvalidKind, kind)
	}
	return nil
}

// ValidateID reports whether id can name a job: 1 to 64 of [A-Za-z0-9_-].
func ValidateID(id string) error {
	if !nameOK(id, 64, idByte, idByte) {
		return fmt.Errorf("%w %q", ErrInvalidID, id)
	}
	return nil
}

func validateNamespace(ns string) error {
	if !nameOK(ns, 64, alnum, nsRest) {
		return errors.New("queue: namespace must match ^[A-Za-z0-9][A-Za-z0-9:_-]{0,63}$ (no braces)")
	}
	return nil
}

// keys are the Redis keys of one queue. Build them with queueKeys only
// after the queue name was validated.
type keys struct {
	prefix     string // "<ns>:{<queue>}:" — the scripts build job and idempotency keys from it
	scheduled  string // ZSET run_at ms -> id
	pending    string // LIST of ids, oldest at the right
	processing string // LIST of claimed ids
	leases     string // ZSET lease deadline ms -> id
	completed  string // LIST of recently completed ids, capped
	dead       string // ZSET died-at ms -> id, capped by count and age
	stats      string // HASH of totals
	paused     string // STRING flag
	events     string // pub/sub channel of job events (sharded pub/sub in a cluster)
}

func queueKeys(ns, queue string) keys {
	p := ns + ":{" + queue + "}:"
	return keys{
		prefix:     p,
		scheduled:  p + "scheduled",
		pending:    p + "pending",
		processing: p + "processing",
		leases:     p + "leases",
		completed:  p + "completed",
		dead:       p + "dead",
		stats:      p + "stats",
		paused:     p + "paused",
		events:     p + "events",
	}
}

// job is the key of a job's hash; the scripts build it the same way.
func (k keys) job(id string) string { return k.prefix + "job:" + id }

// idem is the key of an idempotency key's record.
func (k keys) idem(key string) string { return k.prefix + "idem:" + key }

// Global keys: never touched inside a per-queue script.
func queuesKey(ns string) string     { return ns + ":queues" }     // SET of known queue names
func nudgeChannel(ns string) string  { return ns + ":nudge" }      // pub/sub: "<queue>|<due ms>"
func eventsPattern(ns string) string { return ns + ":{*}:events" } // PSUBSCRIBE pattern, single node only
