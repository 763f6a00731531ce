-- reclaim.lua: takes back jobs whose worker is gone, one bounded batch.
-- 1. Jobs whose lease deadline has passed (found through the leases ZSET,
--    O(expired)): back to the head of pending with attempts kept, or dead
--    when their attempts are spent (a job that kills its worker each time
--    must not loop for ever).
-- 2. Ids in processing: a claimer died between BLMOVE and activate.lua
--    (activation takes the id out of processing, so the list only holds
--    such gaps). The list is scanned in windows from a cursor.
-- KEYS[1] -> <prefix>pending    (LIST)
-- KEYS[2] -> <prefix>processing (LIST)
-- KEYS[3] -> <prefix>leases     (ZSET)
-- KEYS[4] -> <prefix>dead       (ZSET)
-- KEYS[5] -> <prefix>stats      (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> batch limit (expired leases taken, and processing entries scanned)
-- ARGV[6] -> scan cursor into processing (index from the left; -1: no scan)
-- ARGV[7] -> dead set cap (count); ARGV[8] -> dead set max age ms
-- Returns: { more, next_cursor, id_1, ..., id_k }: more 1 when expired
--          leases may remain, next_cursor -1 when the scan reached the end,
--          and the ids taken back (to pending or dead).
-- Safe to run twice: a second run finds only what is still expired or
-- orphaned.
local limit, cursor = tonumber(ARGV[5]), tonumber(ARGV[6])
local dead_max, dead_age = tonumber(ARGV[7]), tonumber(ARGV[8])
local out = { 0, -1 }
local reclaimed = 0
batch_events()

local function take_back(id, f)
  -- f: status, attempts, spec, kind
  local key = jobkey(id)
  local attempts = tonumber(f[2] or '0')
  local max_attempts = spec_max_attempts(f[3])
  if attempts >= max_attempts then
    kill(id, KEYS[4], KEYS[5], 'lease expired: worker lost during attempt ' .. attempts .. ' of ' .. max_attempts, f[4], attempts, dead_max, dead_age)
  else
    redis.call('HSET', key, 'status', 'pending', 'claim_token', '')
    redis.call('HDEL', key, 'lease_until_ms', 'cancel_requested')
    redis.call('RPUSH', KEYS[1], id)
    emit('reclaimed', id, f[4], 'pending', attempts)
  end
  reclaimed = reclaimed + 1
  out[#out + 1] = id
end

local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[3], id)
  local f = redis.call('HMGET', jobkey(id), 'status', 'attempts', 'spec', 'kind')
  if f[1] == 'processing' then
    take_back(id, f)
  end
end
if #expired == limit then
  out[1] = 1
end

if cursor >= 0 then
  local window = redis.call('LRANGE', KEYS[2], cursor, cursor + limit - 1)
  local removed = 0
  for _, id in ipairs(window) do
    if not redis.call('ZSCORE', KEYS[3], id) then
      local f = redis.call('HMGET', jobkey(id), 'status', 'attempts', 'spec', 'kind')
      redis.call('LREM', KEYS[2], 1, id)
      removed = removed + 1
      if f[1] == 'pending' then
        -- never activated: it goes back, its attempt was never counted
        redis.call('RPUSH', KEYS[1], id)
        emit('reclaimed', id, f[4], 'pending', f[2])
        reclaimed = reclaimed + 1
        out[#out + 1] = id
      elseif f[1] == 'processing' then
        take_back(id, f)
      end
      -- any other status: a stale id, dropped from the list
    end
  end
  if #window == limit then
    out[2] = cursor + limit - removed
  end
end
if reclaimed > 0 then
  redis.call('HINCRBY', KEYS[5], 'reclaimed', reclaimed)
end
publish_events()
return out
