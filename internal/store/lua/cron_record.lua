-- record.lua: records a run of a cron entry: its tick is remembered as
-- done, and the run becomes the entry's last run unless a later tick was
-- recorded already.
-- KEYS[1] -> <ns>:cron:{<name>}:run   (HASH tick_ms, run_at_ms, queue, job_id)
-- KEYS[2] -> <ns>:cron:{<name>}:ticks (ZSET tick ms -> tick ms)
-- ARGV[1] -> tick, Unix ms; "" for a run not tied to a tick (a trigger)
-- ARGV[2] -> when the job was enqueued, Unix ms
-- ARGV[3] -> the job's queue
-- ARGV[4] -> the job's id
-- ARGV[5] -> forget done ticks below this, Unix ms
-- Returns: 1 when the run became the last run, 0 when a later (or the
--          same) tick had been recorded before.
-- Safe to run twice: the second run finds its tick recorded.
local tick = ARGV[1]
if tick ~= '' then
  redis.call('ZADD', KEYS[2], tick, tick)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[5])
  local cur = redis.call('HGET', KEYS[1], 'tick_ms')
  if cur and tonumber(cur) >= tonumber(tick) then
    return 0
  end
  redis.call('HSET', KEYS[1], 'tick_ms', tick)
end
redis.call('HSET', KEYS[1], 'run_at_ms', ARGV[2], 'queue', ARGV[3], 'job_id', ARGV[4])
return 1
