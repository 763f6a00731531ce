-- cron_advance.lua: moves cron entries' cursors in the due index, each
-- only while the entry's settings are the version the caller planned
-- from, only forward, and only past ticks that Redis's clock has reached.
-- Keys and arguments: store.CronAdvance in internal/store/ops.go:
-- offset_us (µs added to Redis's TIME: 0, except under a test's fake
-- clock), then per move: the entry's name, the version planned from,
-- through_ms (the instant, Unix ms, the ticks it handled reach up to) and
-- cursor (the new cursor, Unix ms; "" when the entry never fires again:
-- it leaves the index).
-- Returns: how many cursors moved or left.
-- A move whose ticks reach past Redis's now is refused: only Redis's clock
-- hands out a tick (the caller read it due in cron_due.lua; a failover to
-- a master whose clock is behind can make it not due again, and then the
-- cursor waits there, the tick recorded as done). A cursor is never added
-- (XX): an entry paused, deleted or changed since has another version or
-- none, and Put set its cursor. Safe to run twice.
local offset, count = tonumber(A_offset_us), tonumber(A_n)
if not offset or not count or #ARGV ~= GROUP_START - 1 + count * GROUP then
  return redis.error_reply('ERR cron_advance.lua: bad arguments')
end
for i = 0, count - 1 do
  local g = GROUP_START + i * GROUP
  local cursor = ARGV[g + G_cursor]
  if not tonumber(ARGV[g + G_through_ms]) or (cursor ~= '' and not tonumber(cursor)) then
    return redis.error_reply('ERR cron_advance.lua: bad arguments')
  end
end
local clock = redis.call('TIME')
local now = math.floor((tonumber(clock[1]) * 1000000 + tonumber(clock[2]) + offset) / 1000)
local n = 0
for i = 0, count - 1 do
  local g = GROUP_START + i * GROUP
  local name, cursor = ARGV[g + G_name], ARGV[g + G_cursor]
  if tonumber(ARGV[g + G_through_ms]) <= now and redis.call('HGET', K_versions, name) == ARGV[g + G_version] then
    if cursor == '' then
      n = n + redis.call('ZREM', K_due, name)
    else
      n = n + redis.call('ZADD', K_due, 'XX', 'GT', 'CH', cursor, name)
    end
  end
end
return n
