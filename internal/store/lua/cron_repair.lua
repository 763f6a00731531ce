-- repair.lua: indexes entries that were written without an index (by a
-- chronoq from before the due index), and drops the index of entries that
-- are gone.
-- KEYS[1] -> <ns>:cron                 (HASH name -> entry JSON)
-- KEYS[2] -> <ns>:{<ns>:cron}:versions (HASH name -> version)
-- KEYS[3] -> <ns>:{<ns>:cron}:due      (ZSET name -> cursor ms)
-- KEYS[4] -> <ns>:{<ns>:cron}:seq      (STRING the last version)
-- ARGV    -> pairs: entry name, its cursor (Unix ms; "" for none: paused,
--            never fires again, or unreadable)
-- Returns: how many names were repaired.
-- An entry that has a version is left alone: Put indexed it, in the same
-- MULTI that wrote it. Safe to run twice.
local n = 0
for i = 1, #ARGV, 2 do
  local name = ARGV[i]
  local stored = redis.call('HEXISTS', KEYS[1], name) == 1
  local versioned = redis.call('HEXISTS', KEYS[2], name) == 1
  if stored and not versioned then
    redis.call('HSET', KEYS[2], name, redis.call('INCR', KEYS[4]))
    if ARGV[i + 1] ~= '' then
      redis.call('ZADD', KEYS[3], 'NX', ARGV[i + 1], name)
    end
    n = n + 1
  elseif versioned and not stored then
    redis.call('HDEL', KEYS[2], name)
    redis.call('ZREM', KEYS[3], name)
    n = n + 1
  end
end
return n
