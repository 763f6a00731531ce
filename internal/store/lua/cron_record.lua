-- cron_record.lua: records a run of a cron entry: its tick is remembered
-- as done, and the run becomes the entry's last run unless a later tick
-- was recorded already.
-- Keys and arguments: store.CronRecord in internal/store/ops.go: tick
-- (Unix ms; "" for a run not tied to a tick, a trigger), run_at_ms (when
-- the job was enqueued), queue and job_id (the job's), trim_ms (forget
-- done ticks below this, Unix ms).
-- Returns: 1 when the run became the last run, 0 when a later (or the
--          same) tick had been recorded before.
-- Safe to run twice: the second run finds its tick recorded.
local tick = A_tick
if tick ~= '' then
  redis.call('ZADD', K_ticks, tick, tick)
  redis.call('ZREMRANGEBYSCORE', K_ticks, '-inf', '(' .. A_trim_ms)
  local cur = redis.call('HGET', K_run, 'tick_ms')
  if cur and tonumber(cur) >= tonumber(tick) then
    return 0
  end
  redis.call('HSET', K_run, 'tick_ms', tick)
end
redis.call('HSET', K_run, 'run_at_ms', A_run_at_ms, 'queue', A_queue, 'job_id', A_job_id)
return 1
