-- common.lua: prepended to every script (the scripts are one chunk each).
-- Every script takes the same first four arguments:
--   ARGV[1] -> key prefix of the queue, "<ns>:{<queue>}:" (job and
--              idempotency keys are built from it: same hash tag, same slot)
--   ARGV[2] -> now, Unix ms (from the caller's clock: tests drive it)
--   ARGV[3] -> publish command for events: "PUBLISH", "SPUBLISH", or "" (off)
--   ARGV[4] -> events channel of the queue
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local pubcmd = ARGV[3]
local channel = ARGV[4]

local function jobkey(id)
  return prefix .. 'job:' .. id
end

-- The job hash keeps what is fixed at enqueue in one field, "spec":
-- "<max_attempts>|<visibility_ms>|<enqueued_at_ms>|<backoff>", the backoff
-- as delayed.Backoff.Encode writes it. (One field instead of four makes
-- the hash Redis creates per job smaller and cheaper to write; the
-- readers below take what they need. Go's reader is queue.parseSpec.) A
-- job's "attempts" is absent until its first claim.
local function spec_max_attempts(spec)
  return tonumber(string.match(spec, '^(%d+)|'))
end

local function spec_visibility(spec)
  return tonumber(string.match(spec, '^%d+|(%d+)|'))
end

-- spec_backoff answers the backoff's initial ms, factor, max ms and jitter.
local function spec_backoff(spec)
  local initial, factor, maxd, jitter = string.match(spec, '^%d+|%d+|%d+|([^:]+):([^:]+):([^:]+):([^:]+)$')
  return tonumber(initial), tonumber(factor), tonumber(maxd), tonumber(jitter)
end

-- Events: one line "type|id|kind|status|attempts|at_ms" per state change.
-- A message holds one or more lines separated by "\n": the batch scripts
-- call batch_events() first and publish_events() last, so a batch of 500
-- costs one PUBLISH, not 500.
-- A batch with no one listening builds no lines at all: on a single
-- server batch_events() asks whether the channel has a subscriber or any
-- pattern subscription exists (Client.Subscribe uses one of the two). A
-- cluster's shard channels may be subscribed on a replica, which the
-- primary cannot count, so with SPUBLISH the lines are always built.
local event_lines = nil
local muted = false

local function batch_events()
  if event_lines then
    return -- batching already
  end
  event_lines = {}
  if pubcmd == 'PUBLISH' and redis.call('PUBSUB', 'NUMPAT') == 0
      and redis.call('PUBSUB', 'NUMSUB', channel)[2] == 0 then
    muted = true
  end
end

local function emit(typ, id, kind, status, attempts)
  if pubcmd == '' or muted then
    return
  end
  local line = typ .. '|' .. id .. '|' .. (kind or '') .. '|' .. status .. '|' .. (attempts or '0') .. '|' .. now
  if event_lines then
    event_lines[#event_lines + 1] = line
  else
    redis.call(pubcmd, channel, line)
  end
end

local function publish_events()
  if event_lines and #event_lines > 0 then
    redis.call(pubcmd, channel, table.concat(event_lines, '\n'))
  end
  event_lines = nil
  muted = false
end

-- drop deletes a job's hash and the idempotency record that points at it.
local function drop(id)
  local key = jobkey(id)
  local ik = redis.call('HGET', key, 'idempotency_key')
  if ik then
    local idk = prefix .. 'idem:' .. ik
    if redis.call('GET', idk) == id then
      redis.call('DEL', idk)
    end
  end
  redis.call('DEL', key)
end

-- trim_dead removes dead jobs older than max_age_ms or past max_count,
-- oldest first, at most 100 a call (the next call takes the rest).
local function trim_dead(deadkey, max_count, max_age_ms)
  local budget = 100
  local old = redis.call('ZRANGEBYSCORE', deadkey, '-inf', now - max_age_ms, 'LIMIT', 0, budget)
  for _, id in ipairs(old) do
    redis.call('ZREM', deadkey, id)
    drop(id)
  end
  budget = budget - #old
  local excess = redis.call('ZCARD', deadkey) - max_count
  if excess > 0 and budget > 0 then
    local popped = redis.call('ZPOPMIN', deadkey, math.min(excess, budget))
    for i = 1, #popped, 2 do
      drop(popped[i])
    end
  end
end

-- kill moves a job that is out of every list into the dead set.
local function kill(id, deadkey, statskey, err, kind, attempts, max_count, max_age_ms)
  local key = jobkey(id)
  redis.call('HSET', key, 'status', 'dead', 'died_at_ms', now, 'last_error', err)
  redis.call('HDEL', key, 'cancel_requested')
  redis.call('ZADD', deadkey, now, id)
  redis.call('HINCRBY', statskey, 'dead', 1)
  emit('dead', id, kind, 'dead', attempts)
  trim_dead(deadkey, max_count, max_age_ms)
end

-- schedule puts a job that is out of every list back to wait until run_at
-- (or straight into pending when that is now or past). It answers the new
-- status and whether the job is now the earliest scheduled one.
-- A due time may hold microseconds ("<ms>.<us>"): the score keeps them,
-- given as score (the string the caller sent: Lua would print the number
-- with 14 digits), and run_at_ms is the millisecond it falls in.
local function schedule(id, run_at, schedkey, pendkey, score)
  local key = jobkey(id)
  if run_at <= now then
    redis.call('HSET', key, 'status', 'pending', 'run_at_ms', math.floor(run_at))
    redis.call('LPUSH', pendkey, id)
    return 'pending', 0
  end
  local head = redis.call('ZRANGE', schedkey, 0, 0, 'WITHSCORES')
  redis.call('HSET', key, 'status', 'scheduled', 'run_at_ms', math.floor(run_at))
  redis.call('ZADD', schedkey, score or run_at, id)
  if head[2] == nil or run_at < tonumber(head[2]) then
    return 'scheduled', 1
  end
  return 'scheduled', 0
end

-- promote_due moves up to limit scheduled jobs due at cutoff (a score,
-- "<ms>.<us>") into pending, earliest first, and answers how many moved.
-- An id whose hash is no longer scheduled (a stale entry) only leaves the
-- set. Its events are batched: the caller calls publish_events().
local function promote_due(schedkey, pendkey, statskey, cutoff, limit)
  local ids = redis.call('ZRANGEBYSCORE', schedkey, '-inf', cutoff, 'LIMIT', 0, limit)
  if #ids == 0 then
    return 0
  end
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
  redis.call('ZREM', schedkey, unpack(ids))
  if #pend > 0 then
    redis.call('LPUSH', pendkey, unpack(pend))
    redis.call('HINCRBY', statskey, 'promoted', #pend)
  end
  return #pend
end

-- next_due is the score of the earliest scheduled job, as a string, ""
-- when none is.
local function next_due(schedkey)
  return redis.call('ZRANGE', schedkey, 0, 0, 'WITHSCORES')[2] or ''
end

-- activate makes a job that BLMOVE just moved into the processing list a
-- claim of token: attempts + 1, a lease, and the id leaves processing (the
-- leases set holds every claimed job; processing only holds ids between
-- BLMOVE and this). Answers the job's fields, or nil when the id is not a
-- pending job (it is then taken out of processing unless another claim
-- holds it).
local function activate(id, token, vis_override, procKey, leaseKey)
  local key = jobkey(id)
  local f = redis.call('HMGET', key, 'status', 'spec', 'kind', 'attempts', 'cancel_requested')
  if f[1] ~= 'pending' then
    if f[1] ~= 'processing' and f[1] ~= 'scheduled' then
      redis.call('LREM', procKey, 1, id)
    end
    return nil
  end
  local attempts = tonumber(f[4] or '0') + 1
  local vis = vis_override
  if vis <= 0 then
    vis = spec_visibility(f[2])
  end
  local lease = now + vis
  redis.call('HSET', key, 'status', 'processing', 'attempts', attempts, 'claim_token', token, 'claimed_at_ms', now, 'lease_until_ms', lease)
  if f[5] then
    redis.call('HDEL', key, 'cancel_requested')
  end
  redis.call('ZADD', leaseKey, lease, id)
  redis.call('LREM', procKey, 1, id)
  emit('claimed', id, f[3], 'processing', attempts)
  return redis.call('HGETALL', key)
end

-- END common.lua
