package queue

import (
	"strconv"
	"strings"
)

// LabelSetKeys are the pending list and wake stream of the label set of
// labels in queue (see layout.go), for tests that look at Redis directly.
func LabelSetKeys(ns, queue string, labels ...string) (list, wake string) {
	l, _ := CanonicalLabels(labels, MaxClaimLabels)
	k := queueKeys(ns, queue)
	id := labelSetID(joinLabels(l))
	return k.setListKey(id), k.setWakeKey(id)
}

// FirstRecord is the record of a pending job as the first version of the
// layout wrote it (NRecFirst fields, before labels), for tests that read
// old records.
func FirstRecord(kind, spec string, atMs int64) string {
	f := make([]string, NRecFirst)
	f[rStatus], f[rKind], f[rSpec] = string(StatusPending), kind, spec
	f[rEnqueuedAt], f[rRunAt] = strconv.FormatInt(atMs, 10), strconv.FormatInt(atMs, 10)
	f[rAttempts], f[rFence] = "0", "0"
	return strings.Join(f, "\x00")
}

// KeyLsets is the name of a queue's registry of label sets, for QueueKey.
const KeyLsets = keyLsets
