-- reschedule.lua: gives a scheduled or pending job a new run-at, keeping
-- its id: it waits in scheduled when that is ahead, or goes to the back of
-- pending when it is due.
-- KEYS[1] -> <prefix>scheduled (ZSET)
-- KEYS[2] -> <prefix>pending   (LIST)
-- ARGV[1..4] -> common
-- ARGV[5] -> job id
-- ARGV[6] -> new run-at, Unix ms with microseconds as decimals
-- Returns: { code, status, new_head, fields }: code -1 no such job, 0
--          conflict (status is the job's), 1 done; new_head 1 when the job
--          became the earliest scheduled one; fields its HGETALL.
-- Safe to run twice: the second run sets the same run-at again.
local id, score = ARGV[5], ARGV[6]
local run_at = tonumber(score)
local key = jobkey(id)
local f = redis.call('HMGET', key, 'status', 'kind', 'attempts')
if not f[1] then
  return { -1, '', 0, {} }
end
if f[1] == 'scheduled' then
  redis.call('ZREM', KEYS[1], id)
elseif f[1] == 'pending' then
  -- Not in the list when a blocking claim has just moved it to processing:
  -- activate.lua then finds it scheduled and leaves it to the promoter.
  redis.call('LREM', KEYS[2], 1, id)
else
  return { 0, f[1], 0, {} }
end
local status, new_head = schedule(id, run_at, KEYS[1], KEYS[2], score)
emit('rescheduled', id, f[2], status, f[3])
return { 1, status, new_head, redis.call('HGETALL', key) }
