package cron

import (
	"strconv"
	"time"

	"github.com/chronoq/chronoq/internal/store"
)

// Every Redis key of the cron package is built in this file. They are
// global keys, not a queue's: the queue package's per-queue scripts never
// touch them, and the cron package touches queues only through
// queue.Client.
//
//   - <ns>:cron                      HASH entry name -> stored entry (JSON)
//   - <ns>:{<ns>:cron}:due           ZSET entry name -> its cursor: the
//     first tick (Unix ms) no instance has handled yet. Only entries that
//     have one: a paused entry, or one that never fires again, is absent.
//   - <ns>:{<ns>:cron}:versions      HASH entry name -> the version of its
//     settings, changed by every Put that changes them
//   - <ns>:{<ns>:cron}:seq           STRING the last version handed out
//   - <ns>:cron:{<name>}:run         HASH the entry's last run: tick_ms,
//     run_at_ms, queue, job_id
//   - <ns>:cron:{<name>}:ticks       ZSET the ticks enqueued in the last
//     tickMemory (score and member: tick ms)
//
// The entries hash and the three index keys sit in one Redis Cluster
// slot: a key is hashed on the part of its name in braces, and one
// without braces on its whole name, so "<ns>:{<ns>:cron}:due" hashes as
// "<ns>:cron" does. Put changes an entry and its index in one script
// (cron_put.lua), Delete in one MULTI, and cron_advance.lua reads a version and moves a cursor in one
// script. The two bookkeeping keys of an entry share the hash tag
// {<name>}, so cron_record.lua's keys sit in one slot too. Names and
// namespaces are validated (no braces) before any key is built.

func entriesKey(ns string) string     { return ns + ":cron" }
func indexKey(ns, what string) string { return ns + ":{" + entriesKey(ns) + "}:" + what }
func dueKey(ns string) string         { return indexKey(ns, "due") }
func versionsKey(ns string) string    { return indexKey(ns, "versions") }
func seqKey(ns string) string         { return indexKey(ns, "seq") }
func runKey(ns, name string) string   { return ns + ":cron:{" + name + "}:run" }
func ticksKey(ns, name string) string { return ns + ":cron:{" + name + "}:ticks" }

// tickIdempotencyKey is the idempotency key of the job of one tick: the
// same on every instance, whatever its clock says.
func tickIdempotencyKey(name string, tick time.Time) string {
	return store.CronIdemPrefix + name + ":" + strconv.FormatInt(tick.UnixMilli(), 10)
}
