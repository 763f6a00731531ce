-- cron_repair.lua: indexes cron entries that were written without an
-- index (by a chronoq from before the due index), and drops the index of
-- entries that are gone.
-- Keys and arguments: store.CronRepair in internal/store/ops.go: per
-- entry, its name and its cursor (Unix ms; "" for none: paused, never
-- fires again, or unreadable).
-- Returns: how many names were repaired.
-- An entry that has a version is left alone: Put indexed it, in the same
-- script that wrote it. Safe to run twice.
local count = tonumber(A_n)
if not count or #ARGV ~= GROUP_START - 1 + count * GROUP then
  return redis.error_reply('ERR cron_repair.lua: bad arguments')
end
local n = 0
for i = 0, count - 1 do
  local g = GROUP_START + i * GROUP
  local name, cursor = ARGV[g + G_name], ARGV[g + G_cursor]
  local stored = redis.call('HEXISTS', K_entries, name) == 1
  local versioned = redis.call('HEXISTS', K_versions, name) == 1
  if stored and not versioned then
    redis.call('HSET', K_versions, name, redis.call('INCR', K_seq))
    if cursor ~= '' then
      redis.call('ZADD', K_due, 'NX', cursor, name)
    end
    n = n + 1
  elseif versioned and not stored then
    redis.call('HDEL', K_versions, name)
    redis.call('ZREM', K_due, name)
    n = n + 1
  end
end
return n
