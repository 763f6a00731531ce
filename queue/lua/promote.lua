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
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[6], 'LIMIT', 0, tonumber(ARGV[5]))
local moved = 0
batch_events()
local pend = {}
for _, id in ipairs(ids) do
  local key = jobkey(id)
  local f = redis.call('HMGET', key, 'status', 'kind', 'attempts')
  if f[1] == 'scheduled' then
    redis.call('HSET', key, 'status', 'pending')
    pend[#pend + 1] = id
    emit('promoted', id, f[2], 'pending', f[3])
  end
end
if #ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(ids))
end
moved = #pend
if moved > 0 then
  redis.call('LPUSH', KEYS[2], unpack(pend))
  redis.call('HINCRBY', KEYS[3], 'promoted', moved)
end
publish_events()
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return { moved, head[2] or '' }
