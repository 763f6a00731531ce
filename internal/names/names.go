// Package names holds the rules of chronoq's names (queues, kinds, job
// ids, namespaces, labels, artifacts), checked wherever a name comes in:
// package queue on every call, and the api, cron, registry, worker,
// dispatch and workflow packages before they call it. Package queue
// re-exports the errors (queue.ErrInvalid, queue.ErrInvalidQueue, ...),
// so a user matches them there.
//
// The rules are checked with byte loops, not regexps: they run on every
// call.
package names

import (
	"errors"
	"fmt"
	"slices"
)

// Validation errors; each error returned for a bad name wraps one of them
// and ErrInvalid.
var (
	// ErrInvalid is wrapped by every error about bad input (queue.ErrInvalid).
	ErrInvalid      = errors.New("invalid")
	ErrInvalidQueue = fmt.Errorf("%w queue name", ErrInvalid)
	ErrInvalidKind  = fmt.Errorf("%w kind", ErrInvalid)
	ErrInvalidID    = fmt.Errorf("%w job id", ErrInvalid)
	// ErrInvalidLabels is wrapped by the errors about bad labels: one that
	// is empty, too long or holds a byte outside [A-Za-z0-9._:/=+@-], or
	// too many of them.
	ErrInvalidLabels = fmt.Errorf("%w labels", ErrInvalid)
)

// MaxLabelBytes is the longest label.
const MaxLabelBytes = 64

// MaxArtifactNameBytes is the longest name of an artifact.
const MaxArtifactNameBytes = 128

// ok reports whether s is 1 to maxLen bytes, starting with a byte of
// first, the rest from rest.
func ok(s string, maxLen int, first, rest func(byte) bool) bool {
	if len(s) == 0 || len(s) > maxLen || !first(s[0]) {
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
func artifactByte(c byte) bool { return alnum(c) || c == '.' || c == '_' || c == '-' }
func labelByte(c byte) bool {
	return alnum(c) || c == '.' || c == '_' || c == ':' || c == '/' || c == '=' || c == '+' || c == '@' || c == '-'
}

// ValidateQueue reports whether name is a valid queue name: 1 to 64 of
// [a-z0-9._-], starting with a letter or digit.
func ValidateQueue(name string) error {
	if !ok(name, 64, lowerOrDigit, queueRest) {
		return fmt.Errorf("%w %q: want ^[a-z0-9][a-z0-9._-]{0,63}$", ErrInvalidQueue, name)
	}
	return nil
}

// ValidateKind reports whether kind is a valid job kind: 1 to 128 of
// [A-Za-z0-9._:-], starting with a letter or digit.
func ValidateKind(kind string) error {
	if !ok(kind, 128, alnum, kindRest) {
		return fmt.Errorf("%w %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", ErrInvalidKind, kind)
	}
	return nil
}

// ValidateID reports whether id can name a job: 1 to 64 of [A-Za-z0-9_-].
func ValidateID(id string) error {
	if !ok(id, 64, idByte, idByte) {
		return fmt.Errorf("%w %q", ErrInvalidID, id)
	}
	return nil
}

// ValidateNamespace reports whether ns is a valid namespace: 1 to 64 of
// [A-Za-z0-9:_-], starting with a letter or digit (no braces: a
// namespace is inside every key, before the hash tag).
func ValidateNamespace(ns string) error {
	if !ok(ns, 64, alnum, nsRest) {
		return errors.New("queue: namespace must match ^[A-Za-z0-9][A-Za-z0-9:_-]{0,63}$ (no braces)")
	}
	return nil
}

// ArtifactNameOK reports whether name can name an artifact: 1 to
// MaxArtifactNameBytes of [A-Za-z0-9._-].
func ArtifactNameOK(name string) bool {
	return ok(name, MaxArtifactNameBytes, artifactByte, artifactByte)
}

// CanonicalLabels checks labels (at most maxN, each 1 to MaxLabelBytes of
// [A-Za-z0-9._:/=+@-]) and answers them sorted, without duplicates.
func CanonicalLabels(labels []string, maxN int) ([]string, error) {
	if len(labels) > maxN {
		return nil, fmt.Errorf("%w: %d labels, the cap is %d", ErrInvalidLabels, len(labels), maxN)
	}
	for i, l := range labels {
		if !ok(l, MaxLabelBytes, labelByte, labelByte) {
			return nil, fmt.Errorf("%w: label %d (%q): want 1 to %d of [A-Za-z0-9._:/=+@-]", ErrInvalidLabels, i, l, MaxLabelBytes)
		}
	}
	if len(labels) == 0 {
		return nil, nil
	}
	if Canonical(labels) {
		return labels, nil // a worker's, on every claim
	}
	out := slices.Clone(labels)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Canonical reports whether labels are sorted, without duplicates.
func Canonical(labels []string) bool {
	for i := 1; i < len(labels); i++ {
		if labels[i-1] >= labels[i] {
			return false
		}
	}
	return true
}
