-- activate.lua: turns an id that BLMOVE moved into the processing list into
-- a claim. If the process dies before this runs, the id sits in processing
-- with no lease; reclaim.lua finds it there.
-- KEYS[1] -> <prefix>pending    (LIST)
-- KEYS[2] -> <prefix>processing (LIST)
-- KEYS[3] -> <prefix>leases     (ZSET)
-- KEYS[4] -> <prefix>paused     (STRING)
-- ARGV[1..4] -> common
-- ARGV[5] -> job id
-- ARGV[6] -> claim token
-- ARGV[7] -> visibility override ms (0: the job's own)
-- Returns: the job's HGETALL, or nil when the id is no longer ours (a
--          reclaim sweep took it back first) or the queue is paused (the id
--          then goes back to the head of pending).
-- Safe to run twice: a job already claimed with this token is answered.
local id, token = ARGV[5], ARGV[6]
local key = jobkey(id)
local f = redis.call('HMGET', key, 'status', 'claim_token')
if f[1] == 'processing' and f[2] == token then
  return redis.call('HGETALL', key)
end
if not redis.call('LPOS', KEYS[2], id) then
  return nil
end
if redis.call('EXISTS', KEYS[4]) == 1 and f[1] == 'pending' then
  redis.call('LREM', KEYS[2], 1, id)
  redis.call('RPUSH', KEYS[1], id)
  return nil
end
return activate(id, token, tonumber(ARGV[7]), KEYS[2], KEYS[3])
