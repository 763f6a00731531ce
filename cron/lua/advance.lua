-- advance.lua: moves entries' cursors in the due index, each only while
-- the entry's settings are the version the caller planned from, and only
-- forward.
-- KEYS[1] -> <ns>:{<ns>:cron}:versions (HASH name -> version)
-- KEYS[2] -> <ns>:{<ns>:cron}:due      (ZSET name -> cursor ms)
-- ARGV    -> triples: entry name, the version planned from, the new
--            cursor (Unix ms; "" when the entry never fires again: it
--            leaves the index)
-- Returns: how many cursors moved or left.
-- A cursor is never added (XX): an entry paused, deleted or changed since
-- has another version or none, and Put set its cursor. Safe to run twice.
local n = 0
for i = 1, #ARGV, 3 do
  local name = ARGV[i]
  if redis.call('HGET', KEYS[1], name) == ARGV[i + 1] then
    if ARGV[i + 2] == '' then
      n = n + redis.call('ZREM', KEYS[2], name)
    else
      n = n + redis.call('ZADD', KEYS[2], 'XX', 'GT', 'CH', ARGV[i + 2], name)
    end
  end
end
return n
