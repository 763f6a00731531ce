-- complete.lua: completes claimed jobs whose token is current.
-- KEYS[1] -> <prefix>processing (LIST; unused: claimed jobs are in leases)
-- KEYS[2] -> <prefix>leases     (ZSET)
-- KEYS[3] -> <prefix>completed  (LIST, capped history)
-- KEYS[4] -> <prefix>stats      (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> default retention ms of a finished job's hash (0: delete now)
-- ARGV[6] -> completed history cap (ids kept in KEYS[3])
-- ARGV[7] -> number of jobs n; then 3 values per job: id, token, result
-- Returns: { code_1, ..., code_n }: 1 completed, 2 completed before with
--          this token (a repeated call), 0 lease lost (stale token or not
--          processing: nothing changed), -1 no such job.
-- Safe to run twice: the second run answers 2 and changes nothing.
local retention, cap, n = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local out = {}
local done = 0
local finished = {}
batch_events()
for i = 0, n - 1 do
  local id, token, result = ARGV[8 + i * 3], ARGV[9 + i * 3], ARGV[10 + i * 3]
  local key = jobkey(id)
  local f = redis.call('HMGET', key, 'status', 'claim_token', 'kind', 'attempts', 'result_ttl_ms', 'idempotency_key', 'cancel_requested')
  local code = 1
  if not f[1] then
    code = -1
  elseif f[2] ~= token then
    code = 0
  elseif f[1] == 'completed' then
    code = 2
  elseif f[1] ~= 'processing' then
    code = 0
  else
    finished[#finished + 1] = id
    if result ~= '' then
      redis.call('HSET', key, 'status', 'completed', 'completed_at_ms', now, 'result', result)
    else
      redis.call('HSET', key, 'status', 'completed', 'completed_at_ms', now)
    end
    if f[7] then
      redis.call('HDEL', key, 'cancel_requested')
    end
    local ttl = tonumber(f[5] or retention)
    if f[6] then
      -- keep the job as long as its idempotency record, so that a replay
      -- always finds the job it answers with
      ttl = math.max(ttl, redis.call('PTTL', prefix .. 'idem:' .. f[6]))
    end
    if ttl > 0 then
      redis.call('PEXPIRE', key, ttl)
    else
      drop(id)
    end
    done = done + 1
    emit('completed', id, f[3], 'completed', f[4])
  end
  out[#out + 1] = code
end
if done > 0 then
  redis.call('ZREM', KEYS[2], unpack(finished))
  if cap > 0 then
    redis.call('LPUSH', KEYS[3], unpack(finished))
    redis.call('LTRIM', KEYS[3], 0, cap - 1)
  end
  redis.call('HINCRBY', KEYS[4], 'completed', done)
end
publish_events()
return out
