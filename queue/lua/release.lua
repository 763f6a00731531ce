-- release.lua: hands a claimed job straight back to the head of pending
-- (a worker shutting down), without waiting for its lease to lapse. The
-- attempt stays counted (attempts only grows), but a released job is never
-- sent to the dead set here: it gets its run.
-- KEYS[1] -> <prefix>pending    (LIST)
-- KEYS[2] -> <prefix>processing (LIST; unused: claimed jobs are in leases)
-- KEYS[3] -> <prefix>leases     (ZSET)
-- ARGV[1..4] -> common
-- ARGV[5] -> job id
-- ARGV[6] -> claim token
-- Returns: 1 released, 0 lease lost (nothing changed), -1 no such job.
-- Safe to run twice: the token is cleared, so a second run answers 0.
local id, token = ARGV[5], ARGV[6]
local key = jobkey(id)
local f = redis.call('HMGET', key, 'status', 'claim_token', 'kind', 'attempts')
if not f[1] then
  return -1
end
if f[2] ~= token or f[1] ~= 'processing' then
  return 0
end
redis.call('ZREM', KEYS[3], id)
redis.call('HSET', key, 'status', 'pending', 'claim_token', '')
redis.call('HDEL', key, 'lease_until_ms', 'cancel_requested')
redis.call('RPUSH', KEYS[1], id)
emit('released', id, f[3], 'pending', f[4])
return 1
