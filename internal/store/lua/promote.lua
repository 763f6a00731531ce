-- promote.lua: moves the queue's due scheduled jobs into the pending list,
-- earliest first, one bounded batch. Due means due by Redis's clock.
-- Keys and arguments: store.Promote in internal/store/ops.go.
-- Returns: { moved, next, now_us } with next the score of the earliest job
--          still scheduled, "" when none is; or, when that job's due time
--          was handed to a claimer that still holds it, { 0, until,
--          now_us }: the ms its hand-out lapses, when to pass again.
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
-- The earliest job's due time handed to a claimer (claim.lua's
-- take_wake) is left to that claimer until its hand-out lapses: its claim
-- promotes and takes it, and the jobs due before then, in one call. This
-- pass promotes nothing then, and answers when the hand-out lapses.
local head = next_due()
if head ~= '' then
  local m = redis.call('HMGET', K_meta, M_waker, M_waker_until)
  local till = tonumber(m[2] or '0')
  if m[1] == head and till > now then
    return { 0, int_str(till), now_us }
  end
end
local moved = promote_due(limit, true)
publish_events()
return { moved, next_due(), now_us }
