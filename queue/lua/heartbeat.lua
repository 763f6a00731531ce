-- heartbeat.lua: extends the lease of a claimed job whose token is current.
-- KEYS[1] -> <prefix>leases (ZSET)
-- ARGV[1..4] -> common
-- ARGV[5] -> job id
-- ARGV[6] -> claim token
-- ARGV[7] -> extension ms (0: the job's visibility)
-- Returns: { code, lease_until_ms, cancel_requested }: code 1 extended,
--          0 lease lost (nothing changed), -1 no such job. A lease is
--          never shortened.
-- Safe to run twice: the same arguments give the same lease.
local id, token = ARGV[5], ARGV[6]
local key = jobkey(id)
local f = redis.call('HMGET', key, 'status', 'claim_token', 'spec', 'lease_until_ms', 'cancel_requested')
if not f[1] then
  return { -1, 0, 0 }
end
if f[2] ~= token or f[1] ~= 'processing' then
  return { 0, 0, 0 }
end
local ext = tonumber(ARGV[7])
if ext <= 0 then
  ext = spec_visibility(f[3])
end
local lease = math.max(now + ext, tonumber(f[4] or '0'))
redis.call('HSET', key, 'lease_until_ms', lease)
redis.call('ZADD', KEYS[1], lease, id)
local cancel = 0
if f[5] == '1' then
  cancel = 1
end
return { 1, lease, cancel }
