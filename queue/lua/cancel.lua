-- cancel.lua: cancels a job, or deletes a finished one.
--   scheduled, pending -> canceled: out of its set or list; the hash is
--                         kept for the job's retention, then expires
--   processing         -> cancel_requested = 1; the worker sees it on its
--                         next heartbeat and ends the job (see below)
--   completed, dead, canceled -> deleted: the hash, its idempotency record
--                         and its entry in the completed list or dead set
-- With a claim token (ARGV[8]) it is the worker of a processing job whose
-- cancellation was requested ending it: processing -> canceled, fenced by
-- the token like complete.lua.
-- KEYS[1] -> <prefix>scheduled  (ZSET)
-- KEYS[2] -> <prefix>pending    (LIST)
-- KEYS[3] -> <prefix>processing (LIST)
-- KEYS[4] -> <prefix>leases     (ZSET)
-- KEYS[5] -> <prefix>completed  (LIST)
-- KEYS[6] -> <prefix>dead       (ZSET)
-- KEYS[7] -> <prefix>stats      (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> job id
-- ARGV[6] -> request token: remembered on the canceled job, so that a
--            repeated call is answered as the first one
-- ARGV[7] -> default retention ms of a canceled job's hash (0: delete now)
-- ARGV[8] -> claim token ("" for an operator's cancel)
-- Returns: { code, status, fields } with code -1 no such job, 0 conflict
--          (status is the job's; with a claim token: not the current claim),
--          1 canceled, 2 canceled before by this request (a repeated
--          call), 3 cancellation requested (processing), 4 deleted; and
--          fields the job's HGETALL after the change (before it, when
--          deleted).
-- Safe to run twice: the request token turns a repeat into answer 2; a
-- repeated delete answers -1.
local id, req, retention, claim = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]
local key = jobkey(id)
local f = redis.call('HMGET', key, 'status', 'claim_token', 'cancel_token', 'kind', 'attempts', 'result_ttl_ms', 'idempotency_key')
local status = f[1]
if not status then
  return { -1, '', {} }
end
if status == 'canceled' and f[3] == req then
  return { 2, status, redis.call('HGETALL', key) }
end

local function finish()
  redis.call('HSET', key, 'status', 'canceled', 'cancel_token', req, 'canceled_at_ms', now)
  redis.call('HDEL', key, 'cancel_requested', 'lease_until_ms')
  local ttl = tonumber(f[6] or retention)
  if f[7] then
    -- as complete.lua: kept as long as its idempotency record
    ttl = math.max(ttl, redis.call('PTTL', prefix .. 'idem:' .. f[7]))
  end
  local fields = redis.call('HGETALL', key)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  else
    drop(id)
  end
  redis.call('HINCRBY', KEYS[7], 'canceled', 1)
  emit('canceled', id, f[4], 'canceled', f[5])
  return { 1, 'canceled', fields }
end

if claim ~= '' then
  if status ~= 'processing' or f[2] ~= claim then
    return { 0, status, {} }
  end
  redis.call('ZREM', KEYS[4], id)
  return finish()
end
if status == 'scheduled' then
  redis.call('ZREM', KEYS[1], id)
  return finish()
elseif status == 'pending' then
  -- Not in the list when a blocking claim has just moved it to processing:
  -- activate.lua then finds it canceled and drops it.
  redis.call('LREM', KEYS[2], 1, id)
  return finish()
elseif status == 'processing' then
  redis.call('HSET', key, 'cancel_requested', 1)
  return { 3, status, redis.call('HGETALL', key) }
elseif status == 'completed' or status == 'dead' or status == 'canceled' then
  local fields = redis.call('HGETALL', key)
  if status == 'dead' then
    redis.call('ZREM', KEYS[6], id)
  elseif status == 'completed' then
    redis.call('LREM', KEYS[5], 1, id)
  end
  drop(id)
  emit('deleted', id, f[4], status, f[5])
  return { 4, status, fields }
end
return { 0, status, {} }
