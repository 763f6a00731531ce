-- runnow.lua: a scheduled job, or a dead one, goes to the back of pending
-- now. A dead job starts afresh: attempts back to 0, so it gets its
-- max_attempts again and its backoff starts over; its last error is kept.
-- KEYS[1] -> <prefix>scheduled (ZSET)
-- KEYS[2] -> <prefix>pending   (LIST)
-- KEYS[3] -> <prefix>dead      (ZSET)
-- KEYS[4] -> <prefix>stats     (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> job id
-- Returns: { code, status, fields }: code -1 no such job, 0 conflict
--          (status is the job's), 1 done, 2 pending already (nothing to
--          do); fields the job's HGETALL.
-- Safe to run twice: the second run finds the job pending and answers 2.
local id = ARGV[5]
local key = jobkey(id)
local f = redis.call('HMGET', key, 'status', 'kind', 'attempts')
if not f[1] then
  return { -1, '', {} }
end
if f[1] == 'pending' then
  return { 2, 'pending', redis.call('HGETALL', key) }
elseif f[1] == 'scheduled' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('HSET', key, 'status', 'pending', 'run_at_ms', now)
elseif f[1] == 'dead' then
  redis.call('ZREM', KEYS[3], id)
  redis.call('HSET', key, 'status', 'pending', 'run_at_ms', now, 'attempts', 0)
  redis.call('HDEL', key, 'died_at_ms', 'claim_token', 'lease_until_ms', 'cancel_requested')
  redis.call('HINCRBY', KEYS[4], 'requeued', 1)
else
  return { 0, f[1], {} }
end
redis.call('LPUSH', KEYS[2], id)
emit('run_now', id, f[2], 'pending', f[3])
return { 1, 'pending', redis.call('HGETALL', key) }
