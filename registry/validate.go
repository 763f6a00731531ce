package registry

import (
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chronoq/chronoq/queue"
)

// ValidateID reports whether id can name a worker: 1 to MaxIDBytes of
// [A-Za-z0-9._:-], starting with a letter or digit.
func ValidateID(id string) error {
	ok := len(id) > 0 && len(id) <= MaxIDBytes && alnum(id[0])
	for i := 1; ok && i < len(id); i++ {
		c := id[i]
		ok = alnum(c) || c == '.' || c == '_' || c == ':' || c == '-'
	}
	if !ok {
		return fieldErr("id", fmt.Errorf("%w: worker id %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,%d}$", queue.ErrInvalid, id, MaxIDBytes-1))
	}
	return nil
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// SanitizeID turns s (a host name, say) into a valid worker id, or ""
// when nothing of it is left: bytes a worker id cannot hold become '-',
// leading ones are dropped, and it is cut to MaxIDBytes less room for a
// suffix of reserve bytes.
func SanitizeID(s string, reserve int) string {
	b := []byte(s)
	for i, c := range b {
		if !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			b[i] = '-'
		}
	}
	for len(b) > 0 && !alnum(b[0]) {
		b = b[1:]
	}
	return string(b[:min(len(b), max(MaxIDBytes-reserve, 0))])
}

// fieldErr names the field of a validation error.
func fieldErr(field string, err error) error {
	if fe, ok := err.(*queue.FieldError); ok { //nolint:errorlint // only our own, unwrapped
		err = fe.Err
	}
	return &queue.FieldError{Index: -1, Field: field, Err: err}
}

func invalid(field, format string, args ...any) error {
	return fieldErr(field, fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalid}, args...)...))
}

// printable reports whether s is UTF-8 with no control character.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// CheckInfo checks info against the registry's rules and caps, and
// answers it without duplicate labels and queues (never nil).
func CheckInfo(info Info) (Info, error) {
	if err := ValidateID(info.ID); err != nil {
		return info, err
	}
	if len(info.Host) > MaxHostBytes || !printable(info.Host) {
		return info, invalid("host", "at most %d bytes of printable UTF-8", MaxHostBytes)
	}
	if len(info.Version) > MaxVersionBytes || !printable(info.Version) {
		return info, invalid("version", "at most %d bytes of printable UTF-8", MaxVersionBytes)
	}
	labels, err := CheckLabels("labels", info.Labels)
	if err != nil {
		return info, err
	}
	if len(info.Queues) > MaxQueues {
		return info, invalid("queues", "at most %d queues, got %d", MaxQueues, len(info.Queues))
	}
	queues := make([]string, 0, len(info.Queues))
	for i, q := range info.Queues {
		if err := names.ValidateQueue(q); err != nil {
			return info, fieldErr(fmt.Sprintf("queues[%d]", i), err)
		}
		if !contains(queues, q) {
			queues = append(queues, q)
		}
	}
	info.Labels, info.Queues = labels, queues
	return info, nil
}

// CheckLabels checks a worker's labels as the registry keeps them (at
// most MaxLabels, each 1 to MaxLabelBytes of printable UTF-8 without
// spaces) and answers them without duplicates, never nil. field names
// them in the error.
func CheckLabels(field string, labels []string) ([]string, error) {
	if len(labels) > MaxLabels {
		return nil, invalid(field, "at most %d labels, got %d", MaxLabels, len(labels))
	}
	out := make([]string, 0, len(labels))
	for i, l := range labels {
		if l == "" || len(l) > MaxLabelBytes || !printable(l) || strings.ContainsFunc(l, unicode.IsSpace) {
			return nil, invalid(fmt.Sprintf("%s[%d]", field, i), "a label is 1 to %d bytes of printable UTF-8 without spaces, got %q", MaxLabelBytes, l)
		}
		if !contains(out, l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// checkJobs checks job references and drops duplicates.
func checkJobs(field string, jobs []JobRef) ([]JobRef, error) {
	if len(jobs) > MaxHeldJobs {
		return nil, invalid(field, "at most %d jobs, got %d", MaxHeldJobs, len(jobs))
	}
	out := make([]JobRef, 0, len(jobs))
	seen := make(map[JobRef]bool, len(jobs))
	for i, j := range jobs {
		if err := names.ValidateQueue(j.Queue); err != nil {
			return nil, fieldErr(fmt.Sprintf("%s[%d].queue", field, i), err)
		}
		if err := names.ValidateID(j.ID); err != nil {
			return nil, fieldErr(fmt.Sprintf("%s[%d].id", field, i), err)
		}
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	return out, nil
}

func checkTTL(field string, ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return invalid(field, "must be in [%s, %s], got %s", MinTTL, MaxTTL, ttl)
	}
	return nil
}
