package cron

// DueKey is the due index of namespace ns, for tests that move a cursor
// by hand.
func DueKey(ns string) string { return dueKey(ns) }
