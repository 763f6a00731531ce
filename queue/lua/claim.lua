-- claim.lua: claims up to max pending jobs without blocking (the hot path).
-- First it promotes up to max scheduled jobs that are due, as promote.lua
-- does: a worker that wakes at a job's due time claims it in this one
-- round trip, without waiting for a promoter's pass.
-- KEYS[1] -> <prefix>pending    (LIST)
-- KEYS[2] -> <prefix>processing (LIST; unused here, kept for the key layout)
-- KEYS[3] -> <prefix>leases     (ZSET)
-- KEYS[4] -> <prefix>paused     (STRING)
-- KEYS[5] -> <prefix>scheduled  (ZSET)
-- KEYS[6] -> <prefix>stats      (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> max jobs
-- ARGV[6] -> token base: the i-th id popped gets token "<base>.<i>"
-- ARGV[7] -> visibility override ms (0: each job's own)
-- ARGV[8] -> the highest due score: now with microseconds, as promote.lua
-- ARGV[9] -> "1": answer the due time for the caller to wake at (next)
-- Returns: { paused, next, job_1, ..., job_k }: paused 1 when the queue is
--          paused (then no job, and nothing promoted); next, when asked
--          for, the score of the earliest job still scheduled, unless
--          another claim was handed that same score first ("" then, when
--          none is scheduled, or when not asked for); each job_i
--          the claimed job's hash as one string, field and value
--          alternating, joined by NUL bytes, with the fields the claim
--          wrote and "id" appended
--          (a field may appear twice: its last value is the current one).
--          (One string is much cheaper for Redis to reply than 30 array
--          elements; no value can hold a NUL: payloads and results are
--          JSON, names are validated, errors are scrubbed.)
-- Safe to run twice: the ids of a claim are remembered under its token base
-- for 60 s, and a second run answers the same jobs.

-- take_wake hands next to this claim unless an earlier claim was handed
-- it: of many idle workers, one wakes for each due time (the promoter
-- covers a waker that died). <prefix>waker holds the score last handed
-- out, until a second after it is due.
local function take_wake(next)
  if next == '' then
    return ''
  end
  local key = prefix .. 'waker'
  if redis.call('GET', key) == next then
    return ''
  end
  redis.call('SET', key, next, 'PX', math.max(math.floor(tonumber(next) - now), 0) + 1000)
  return next
end

local wants_next = ARGV[9] == '1'
local marker = prefix .. 'claim:' .. ARGV[6]
local out = { 0, '' }
local prior = redis.call('GET', marker)
if prior then
  if wants_next then
    out[2] = next_due(KEYS[5]) -- the same caller, whose reply was lost
  end
  for id in string.gmatch(prior, '[^,]+') do
    local f = redis.call('HGETALL', jobkey(id))
    f[#f + 1] = 'id'
    f[#f + 1] = id
    out[#out + 1] = table.concat(f, '\0')
  end
  return out
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return { 1, '' }
end
local max, vis = tonumber(ARGV[5]), tonumber(ARGV[7])
promote_due(KEYS[5], KEYS[1], KEYS[6], ARGV[8], max)
if wants_next then
  out[2] = take_wake(next_due(KEYS[5]))
end
local popped = redis.call('RPOP', KEYS[1], max)
if not popped then
  publish_events()
  return out
end
batch_events()
local ids, leases = {}, {}
for i, id in ipairs(popped) do
  local key = jobkey(id)
  local h = redis.call('HGETALL', key)
  local status, attempts, spec, kind, cancel
  for j = 1, #h, 2 do
    local name = h[j]
    if name == 'status' then
      status = h[j + 1]
    elseif name == 'attempts' then
      attempts = h[j + 1]
    elseif name == 'spec' then
      spec = h[j + 1]
    elseif name == 'kind' then
      kind = h[j + 1]
    elseif name == 'cancel_requested' then
      cancel = true
    end
  end
  -- Only a pending job can be claimed; anything else popped here is a
  -- stale id (a canceled job, say) and is dropped.
  if status == 'pending' then
    attempts = tonumber(attempts or '0') + 1
    local v = vis
    if v <= 0 then
      v = spec_visibility(spec)
    end
    local lease, token = now + v, ARGV[6] .. '.' .. i
    redis.call('HSET', key, 'status', 'processing', 'attempts', attempts, 'claim_token', token,
      'claimed_at_ms', now, 'lease_until_ms', lease)
    -- The fields just written follow the hash as it was: the reader keeps
    -- the last value of a field.
    local n = #h
    h[n + 1], h[n + 2] = 'status', 'processing'
    h[n + 3], h[n + 4] = 'attempts', attempts
    h[n + 5], h[n + 6] = 'claim_token', token
    h[n + 7], h[n + 8] = 'claimed_at_ms', now
    h[n + 9], h[n + 10] = 'lease_until_ms', lease
    h[n + 11], h[n + 12] = 'id', id
    if cancel then
      redis.call('HDEL', key, 'cancel_requested')
      h[n + 13], h[n + 14] = 'cancel_requested', '0'
    end
    out[#out + 1] = table.concat(h, '\0')
    ids[#ids + 1] = id
    leases[#leases + 1] = lease
    leases[#leases + 1] = id
    emit('claimed', id, kind, 'processing', attempts)
  end
end
if #ids > 0 then
  redis.call('ZADD', KEYS[3], unpack(leases))
  redis.call('SET', marker, table.concat(ids, ','), 'PX', 60000)
end
publish_events()
return out
