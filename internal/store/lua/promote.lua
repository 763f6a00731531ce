-- promote.lua: moves the queue's due scheduled jobs into the pending list,
-- earliest first, one bounded batch. Due means due by Redis's clock.
-- Keys and arguments: store.Promote in internal/store/ops.go.
-- Returns: { moved, next, now_us } with next the score of the earliest job
--          still scheduled, "" when none is.
-- Safe to run twice: a second run finds only what is still due.
local limit = tonumber(A_limit)
if not limit then
  return redis.error_reply('ERR chronoq promote: malformed arguments')
end
if not exists() then
  return { 0, '', now_us }
end
if not sets_current() then
  return redis.error_reply(STALE_SETS)
end
local moved = promote_due(limit, true)
publish_events()
return { moved, next_due(), now_us }
