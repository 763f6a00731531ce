-- claim.lua: claims up to max pending jobs without blocking (the hot path).
-- KEYS[1] -> <prefix>pending    (LIST)
-- KEYS[2] -> <prefix>processing (LIST)
-- KEYS[3] -> <prefix>leases     (ZSET)
-- KEYS[4] -> <prefix>paused     (STRING)
-- ARGV[1..4] -> common
-- ARGV[5] -> max jobs
-- ARGV[6] -> token base: job i of this claim gets token "<base>.<i>"
-- ARGV[7] -> visibility override ms (0: each job's own)
-- Returns: { paused, fields_1, ..., fields_k }: paused 1 when the queue is
--          paused (then no job), and each fields_i an HGETALL of a claimed
--          job with "id" appended.
-- Safe to run twice: the ids of a claim are remembered under its token base
-- for 60 s, and a second run answers the same jobs.
local marker = prefix .. 'claim:' .. ARGV[6]
local out = { 0 }
local prior = redis.call('GET', marker)
if prior then
  for id in string.gmatch(prior, '[^,]+') do
    local f = redis.call('HGETALL', jobkey(id))
    f[#f + 1] = 'id'
    f[#f + 1] = id
    out[#out + 1] = f
  end
  return out
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return { 1 }
end
local max, vis = tonumber(ARGV[5]), tonumber(ARGV[7])
local ids = {}
local i = 0
while #ids < max and i < max + 100 do
  local id = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not id then
    break
  end
  i = i + 1
  local f = activate(id, ARGV[6] .. '.' .. i, vis, KEYS[2], KEYS[3])
  if f then
    f[#f + 1] = 'id'
    f[#f + 1] = id
    out[#out + 1] = f
    ids[#ids + 1] = id
  end
end
if #ids > 0 then
  redis.call('SET', marker, table.concat(ids, ','), 'PX', 60000)
end
return out
