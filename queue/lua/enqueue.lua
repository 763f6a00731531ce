-- enqueue.lua: adds jobs to one queue, each due now (pending) or later
-- (scheduled), honouring idempotency keys.
-- KEYS[1] -> <prefix>scheduled (ZSET)
-- KEYS[2] -> <prefix>pending   (LIST)
-- KEYS[3] -> <prefix>stats     (HASH)
-- ARGV[1..4] -> common (prefix, now ms, publish command, events channel)
-- ARGV[5] -> idempotency record TTL ms
-- ARGV[6] -> number of jobs n; then 7 values per job:
--            id, kind, payload, spec (see common.lua), run_at (Unix ms,
--            microseconds as decimals: the score; run_at_ms is the
--            millisecond it falls in), idempotency_key ("" none),
--            result_ttl_ms ("" default)
-- Returns: { head_ms, id_1, replayed_1, ..., id_n, replayed_n } where
--          head_ms is the due time of a job that became the queue's
--          earliest scheduled one (-1 when none did), id_i the job that
--          answers job i (its own id, or the first job of its idempotency
--          key) and replayed_i 1 when that job existed before.
-- Safe to run twice: a job whose hash exists already is answered as it is.
-- A call of several jobs marks itself with its first job's id for 60 s and
-- checks its jobs one by one only when it finds its mark (a rerun); a call
-- of one job just checks it.
local idem_ttl = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local out = { -1 }
local head_ms = nil -- the earliest scheduled score before this call, read once if needed
local new_head = -1
local added = 0
local pend, sched = {}, {}
local rerun = true
if n > 1 then
  rerun = not redis.call('SET', prefix .. 'enq:' .. ARGV[7], '1', 'NX', 'PX', 60000)
end
batch_events()
for i = 0, n - 1 do
  local b = 7 + i * 7
  local id, kind, payload, spec, score, idem, rttl =
    ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
  local run_at = tonumber(score)
  local key = jobkey(id)
  local answer, replayed = id, 0
  if rerun and redis.call('EXISTS', key) == 1 then
    -- written by an earlier run of this same call
  else
    if idem ~= '' then
      local idk = prefix .. 'idem:' .. idem
      local first = redis.call('GET', idk)
      if first and redis.call('EXISTS', jobkey(first)) == 1 then
        answer, replayed = first, 1
      else
        redis.call('SET', idk, id, 'PX', idem_ttl)
      end
    end
    if replayed == 0 then
      local status = 'scheduled'
      if run_at <= now then
        status = 'pending'
      end
      redis.call('HSET', key, 'kind', kind, 'payload', payload, 'status', status, 'spec', spec,
        'run_at_ms', math.floor(run_at))
      if idem ~= '' then
        redis.call('HSET', key, 'idempotency_key', idem)
      end
      if rttl ~= '' then
        redis.call('HSET', key, 'result_ttl_ms', rttl)
      end
      if status == 'pending' then
        pend[#pend + 1] = id
      else
        sched[#sched + 1] = score
        sched[#sched + 1] = id
        if not head_ms then
          local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
          head_ms = tonumber(head[2] or '-1')
        end
        if (head_ms < 0 or run_at < head_ms) and (new_head < 0 or run_at < new_head) then
          new_head = run_at
        end
      end
      added = added + 1
      emit('enqueued', id, kind, status, 0)
    end
  end
  out[#out + 1] = answer
  out[#out + 1] = replayed
end
if #pend > 0 then
  redis.call('LPUSH', KEYS[2], unpack(pend))
end
if #sched > 0 then
  redis.call('ZADD', KEYS[1], unpack(sched))
end
if added > 0 then
  redis.call('HINCRBY', KEYS[3], 'enqueued', added)
end
out[1] = math.floor(new_head)
publish_events()
return out
