package cron

import "time"

// DueKey is the due index of namespace ns, for tests that move a cursor
// by hand.
func DueKey(ns string) string { return dueKey(ns) }

// RedisClockOffset is a scheduler's estimate of how far Redis's clock is
// ahead of its own: what it sleeps by.
func RedisClockOffset(s *Scheduler) time.Duration { return s.store.rc.c.Offset() }
