package names

import (
	"encoding/base32"
	"fmt"

	"github.com/google/uuid"
)

// IDLen is the length of the ids NewID makes.
const IDLen = 26

// idEncoding writes an id's 128 bits 5 at a time from the top, in
// Crockford's base32 alphabet, lower case. Its digits are in ASCII order,
// so ids compare as their bits do: a later millisecond's id sorts after
// an earlier one's. They also sort after the ids of earlier releases,
// the same UUIDs in 32 hex digits: those begin "01" (the top 8 bits of a
// millisecond from 2004 to 2039), these "06" or more from 2026 on. So the
// jobs of one flow key stay in enqueue order across an upgrade.
var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID makes the id of a new job or workflow: a UUIDv7 (a millisecond
// timestamp, then random bits; ordered within a process) in 26
// characters of [0-9a-z]. The id is held in several keys (the jobs hash,
// the schedule, the lists): 26 characters fit a 32-byte allocation in
// Redis, where 32 hex digits would take 48.
func NewID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new id: %w", err)
	}
	return idEncoding.EncodeToString(u[:]), nil
}
