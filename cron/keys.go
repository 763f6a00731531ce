package cron

import (
	"strconv"
	"time"
)

// Every Redis key of the cron package is built in this file. They are
// global keys, not a queue's: the queue package's per-queue scripts never
// touch them, and the cron package touches queues only through
// queue.Client.
//
//   - <ns>:cron                  HASH entry name -> stored entry (JSON)
//   - <ns>:cron:{<name>}:run     HASH the entry's last run: tick_ms,
//     run_at_ms, queue, job_id
//   - <ns>:cron:{<name>}:ticks   ZSET the ticks enqueued in the last
//     tickMemory (score and member: tick ms)
//
// The two bookkeeping keys of an entry share the hash tag {<name>}, so
// record.lua's keys sit in one Redis Cluster slot. Names are validated
// (no braces) before any key is built.

func entriesKey(ns string) string     { return ns + ":cron" }
func runKey(ns, name string) string   { return ns + ":cron:{" + name + "}:run" }
func ticksKey(ns, name string) string { return ns + ":cron:{" + name + "}:ticks" }

// tickIdempotencyKey is the idempotency key of the job of one tick: the
// same on every instance, whatever its clock says.
func tickIdempotencyKey(name string, tick time.Time) string {
	return "cron:" + name + ":" + strconv.FormatInt(tick.UnixMilli(), 10)
}
