package queue

import (
	"errors"
	"fmt"
)

// The name rules are checked with byte loops, not regexps: they run on
// every call.

// nameOK reports whether s is 1 to maxLen bytes, starting with a letter
// or digit of first, the rest from rest.
func nameOK(s string, maxLen int, first, rest func(byte) bool) bool {
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
