-- fail.lua: records a failed attempt of a claimed job whose token is
-- current: a retry after the job's backoff (or at an explicit time), or
-- the dead set when its attempts are spent or it is failed for good.
-- KEYS[1] -> <prefix>scheduled  (ZSET)
-- KEYS[2] -> <prefix>pending    (LIST)
-- KEYS[3] -> <prefix>processing (LIST; unused: claimed jobs are in leases)
-- KEYS[4] -> <prefix>leases     (ZSET)
-- KEYS[5] -> <prefix>dead       (ZSET)
-- KEYS[6] -> <prefix>stats      (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> job id
-- ARGV[6] -> claim token
-- ARGV[7] -> error message
-- ARGV[8] -> retry at, Unix ms, with microseconds as decimals (-1: now +
--            the job's backoff)
-- ARGV[9] -> "1": dead now, whatever attempts are left
-- ARGV[10] -> random number in [0, 1) for the backoff's jitter
-- ARGV[11] -> dead set cap (count); ARGV[12] -> dead set max age ms
-- Returns: { code, status, run_at_ms (whole ms, rounded down), new_head }: code 1 done, 2 this
--          token's failure was recorded before (a repeated call; status is
--          the job's status now), 0 lease lost, -1 no such job. new_head 1
--          when the retry became the earliest scheduled job.
-- The backoff formula is delayed.Backoff.Delay's; a test holds them equal.
local id, token = ARGV[5], ARGV[6]
local key = jobkey(id)
local f = redis.call('HMGET', key, 'status', 'claim_token', 'attempts', 'spec', 'kind', 'run_at_ms')
if not f[1] then
  return { -1, '', 0, 0 }
end
if f[2] ~= token then
  return { 0, f[1], 0, 0 }
end
if f[1] ~= 'processing' then
  if f[1] == 'completed' then
    return { 0, f[1], 0, 0 }
  end
  return { 2, f[1], tonumber(f[6] or '0'), 0 }
end
local attempts, max_attempts = tonumber(f[3]), spec_max_attempts(f[4])
redis.call('ZREM', KEYS[4], id)
redis.call('HSET', key, 'last_error', ARGV[7])
redis.call('HDEL', key, 'lease_until_ms')
redis.call('HINCRBY', KEYS[6], 'failed', 1)
if ARGV[9] == '1' or attempts >= max_attempts then
  kill(id, KEYS[5], KEYS[6], ARGV[7], f[5], attempts, tonumber(ARGV[11]), tonumber(ARGV[12]))
  return { 1, 'dead', now, 0 }
end
local run_at, score = tonumber(ARGV[8]), ARGV[8]
if run_at < 0 then
  score = nil
  local initial, factor, maxd, jitter = spec_backoff(f[4])
  local d = math.min(initial * factor ^ (attempts - 1), maxd)
  d = math.min(d * (1 + jitter * (2 * tonumber(ARGV[10]) - 1)), maxd)
  run_at = now + math.floor(d)
end
local status, new_head = schedule(id, run_at, KEYS[1], KEYS[2], score)
redis.call('HINCRBY', KEYS[6], 'retried', 1)
emit('retried', id, f[5], status, attempts)
return { 1, status, math.floor(run_at), new_head }
