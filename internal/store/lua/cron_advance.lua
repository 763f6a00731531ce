-- advance.lua: moves entries' cursors in the due index, each only while
-- the entry's settings are the version the caller planned from, only
-- forward, and only past ticks that Redis's clock has reached.
-- KEYS[1] -> <ns>:{<ns>:cron}:versions (HASH name -> version)
-- KEYS[2] -> <ns>:{<ns>:cron}:due      (ZSET name -> cursor ms)
-- ARGV[1] -> µs added to Redis's TIME: 0, except under a test's fake clock
-- ARGV[2..] -> groups of four: entry name, the version planned from, the
--            instant (Unix ms) the ticks it handled reach up to, the new
--            cursor (Unix ms; "" when the entry never fires again: it
--            leaves the index)
-- Returns: how many cursors moved or left.
-- A move whose ticks reach past Redis's now is refused: only Redis's clock
-- hands out a tick (the caller read it due in due.lua; a failover to a
-- master whose clock is behind can make it not due again, and then the
-- cursor waits there, the tick recorded as done). A cursor is never added
-- (XX): an entry paused, deleted or changed since has another version or
-- none, and Put set its cursor. Safe to run twice.
local offset = tonumber(ARGV[1])
if not offset or (#ARGV - 1) % 4 ~= 0 then
  return redis.error_reply('ERR advance.lua: bad arguments')
end
for i = 2, #ARGV, 4 do
  if not tonumber(ARGV[i + 2]) or (ARGV[i + 3] ~= '' and not tonumber(ARGV[i + 3])) then
    return redis.error_reply('ERR advance.lua: bad arguments')
  end
end
local clock = redis.call('TIME')
local now = math.floor((tonumber(clock[1]) * 1000000 + tonumber(clock[2]) + offset) / 1000)
local n = 0
for i = 2, #ARGV, 4 do
  local name = ARGV[i]
  if tonumber(ARGV[i + 2]) <= now and redis.call('HGET', KEYS[1], name) == ARGV[i + 1] then
    if ARGV[i + 3] == '' then
      n = n + redis.call('ZREM', KEYS[2], name)
    else
      n = n + redis.call('ZADD', KEYS[2], 'XX', 'GT', 'CH', ARGV[i + 3], name)
    end
  end
end
return n
