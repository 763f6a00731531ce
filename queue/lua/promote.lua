-- promote.lua: moves due scheduled jobs into the pending list, earliest
-- first, one bounded batch.
-- KEYS[1] -> <prefix>scheduled (ZSET)
-- KEYS[2] -> <prefix>pending   (LIST)
-- KEYS[3] -> <prefix>stats     (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> batch limit
-- ARGV[6] -> the highest due score: now, Unix ms with microseconds as
--            decimals (scores keep the microseconds of a due time)
-- Returns: { moved, next } with next the score of the earliest job still
--          scheduled, as a string, "" when none is.
-- Safe to run twice: a second run finds only what is still due.
local moved = promote_due(KEYS[1], KEYS[2], KEYS[3], ARGV[6], tonumber(ARGV[5]))
publish_events()
return { moved, next_due(KEYS[1]) }
