package queue

import (
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"strconv"
	"strings"
)

// LabelSetKeys are the pending list and wake stream of the label set of
// labels in queue (see layout.go), for tests that look at Redis directly.
func LabelSetKeys(ns, queue string, labels ...string) (list, wake string) {
	l, _ := names.CanonicalLabels(labels, MaxClaimLabels)
	k := store.QueueKeys(ns, queue)
	id := labelSetID(joinLabels(l))
	return k.SetListKey(id), k.SetWakeKey(id)
}

// FirstRecord is the record of a pending job as the first version of the
// layout wrote it (NRecFirst fields, before labels), for tests that read
// old records.
func FirstRecord(kind, spec string, atMs int64) string {
	f := make([]string, NRecFirst)
	f[store.RStatus], f[store.RKind], f[store.RSpec] = string(StatusPending), kind, spec
	f[store.REnqueuedAt], f[store.RRunAt] = strconv.FormatInt(atMs, 10), strconv.FormatInt(atMs, 10)
	f[store.RAttempts], f[store.RFence] = "0", "0"
	return strings.Join(f, "\x00")
}

// KeyLsets is the name of a queue's registry of label sets, for QueueKey.
const KeyLsets = store.KeyLsets
