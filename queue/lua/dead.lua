-- dead.lua: requeues or purges dead jobs (all, or those of one kind), one
-- bounded batch from a cursor; the caller loops until done.
-- KEYS[1] -> <prefix>dead    (ZSET)
-- KEYS[2] -> <prefix>pending (LIST)
-- KEYS[3] -> <prefix>stats   (HASH)
-- ARGV[1..4] -> common
-- ARGV[5] -> "requeue" (to the back of pending, attempts back to 0, as
--            runnow.lua does) or "purge" (deleted: hash and idempotency
--            record)
-- ARGV[6] -> kind to match ("" for every kind)
-- ARGV[7] -> batch: the most dead-set entries examined in this call
-- ARGV[8] -> upper bound of died-at ms: jobs that died after the first call
--            are left alone, so the loop ends
-- ARGV[9], ARGV[10] -> cursor: score and id of the last entry examined by
--            the previous call ("", "" on the first)
-- Returns: { done, count, cursor_score, cursor_id }: done 1 when no entry
--          is left to examine, count the jobs requeued or purged.
-- Safe to run twice: handled jobs have left the dead set.
local mode, kind, batch, upto = ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local cscore, cid = ARGV[9], ARGV[10]

local function lt(a, b) -- byte order, as Redis orders members of equal score
  local m = math.min(#a, #b)
  for i = 1, m do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

local start = 0
if cid ~= '' then
  -- the first rank after (cscore, cid), found by binary search
  local lo = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. cscore)
  local hi = redis.call('ZCOUNT', KEYS[1], '-inf', cscore)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if lt(cid, redis.call('ZRANGE', KEYS[1], mid, mid)[1]) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  start = lo
end
local r = redis.call('ZRANGE', KEYS[1], start, start + batch - 1, 'WITHSCORES')
local done = 0
if #r < 2 * batch then
  done = 1
end
local count = 0
local last_score, last_id = '', ''
for i = 1, #r, 2 do
  local id, score = r[i], r[i + 1]
  if tonumber(score) > upto then
    done = 1
    break
  end
  last_score, last_id = score, id
  local key = jobkey(id)
  local f = redis.call('HMGET', key, 'status', 'kind', 'attempts')
  if not f[1] or f[1] ~= 'dead' then
    redis.call('ZREM', KEYS[1], id) -- a stale entry
  elseif kind == '' or f[2] == kind then
    redis.call('ZREM', KEYS[1], id)
    if mode == 'requeue' then
      redis.call('HSET', key, 'status', 'pending', 'run_at_ms', now, 'attempts', 0)
      redis.call('HDEL', key, 'died_at_ms', 'claim_token', 'lease_until_ms', 'cancel_requested')
      redis.call('LPUSH', KEYS[2], id)
      emit('run_now', id, f[2], 'pending', f[3])
    else
      drop(id)
      emit('deleted', id, f[2], 'dead', f[3])
    end
    count = count + 1
  end
end
if count > 0 and mode == 'requeue' then
  redis.call('HINCRBY', KEYS[3], 'requeued', count)
end
return { done, count, last_score, last_id }
